# The job image: the forge-ci runner (`python3 -S -m worker.runner`) as PID 1, UID/GID 10001.
#
# Build it with deploy/build-runner-image, which stages only the files below into a private build
# context, labels the image with their hash and builds with --network=none.
#
# Base image: anything with python3 (>= 3.11), bash, coreutils, tar and a POSIX sh. The default
# public python:3.12-slim and the local forge-ci-base:bookworm (debootstrap, made by
# build-runner-image when no registry is reachable) both have them, so this build installs nothing
# from the network: it only checks the base, adds the runner user and copies the runner code. Job
# images that need more tools (git, compilers) derive from a base that has them.
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
#   /workspace/             owned by 10001; a fresh named volume per attempt is mounted here and
#                           Docker copies this ownership into it on first mount
#   /run/forge-ci/          mount point of the per-attempt directory holding the runner API socket

ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

SHELL ["/bin/sh", "-eu", "-c"]

# Check the base instead of installing anything: a missing tool fails the build and says which.
RUN for tool in python3 bash tar sh id install; do \
        command -v "$tool" >/dev/null || { echo "base image lacks $tool" >&2; exit 1; }; \
    done; \
    python3 -S -c 'import sys; assert sys.version_info >= (3, 11), "runner needs Python >= 3.11"'

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

COPY forge_ci/__init__.py /opt/forge-ci/forge_ci/
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
