# The application image: forge-ci in /opt/forge-ci/venv, for the web, ssh, worker and provider
# services of deploy/compose.yml. Built by deploy/build-deploy-images (--network=none: the
# dependencies come as wheels in the context).
#
# Base: forge-ci-base:bookworm-app-1 (debootstrap) by default; any Debian-like base with
# python3 >= 3.11 (venv), git, bash, pg_dump/psql, tini and setpriv works (checked below).
#
# Runs as UID/GID 10000 (forge-ci); its data directory /var/lib/forge-ci is a volume. Only the
# provider service starts as root, to copy its token secret into a private runtime directory and
# drop to UID 10001 (see entrypoint).
ARG BASE_IMAGE=forge-ci-base:bookworm-app-1
FROM ${BASE_IMAGE}

SHELL ["/bin/sh", "-eu", "-c"]

RUN for tool in python3 git bash pg_dump psql tini setpriv; do \
        command -v "$tool" >/dev/null || { echo "base image lacks $tool" >&2; exit 1; }; \
    done; \
    python3 -c 'import sys, venv; assert sys.version_info >= (3, 11), "forge-ci needs Python >= 3.11"'

RUN if command -v groupadd >/dev/null && command -v useradd >/dev/null; then \
        groupadd --gid 10000 forge-ci; \
        useradd --uid 10000 --gid 10000 --no-create-home --no-log-init \
            --home-dir /var/lib/forge-ci --shell /usr/sbin/nologin forge-ci; \
        groupadd --gid 10001 forge-ci-provider; \
        useradd --uid 10001 --gid 10001 --no-create-home --no-log-init \
            --home-dir /nonexistent --shell /usr/sbin/nologin forge-ci-provider; \
    else \
        echo 'forge-ci:x:10000:' >>/etc/group; \
        echo 'forge-ci:x:10000:10000::/var/lib/forge-ci:/usr/sbin/nologin' >>/etc/passwd; \
        echo 'forge-ci-provider:x:10001:' >>/etc/group; \
        echo 'forge-ci-provider:x:10001:10001::/nonexistent:/usr/sbin/nologin' >>/etc/passwd; \
    fi; \
    install -d -o 10000 -g 10000 -m 0700 /var/lib/forge-ci

# The dependencies first (their layer survives source changes), then forge-ci itself.
COPY wheels/ /tmp/wheels/
RUN python3 -m venv /opt/forge-ci/venv; \
    /opt/forge-ci/venv/bin/pip install --quiet --no-index --no-cache-dir /tmp/wheels/*.whl; \
    rm -rf /tmp/wheels
COPY src/ /tmp/src/
RUN /opt/forge-ci/venv/bin/pip install --quiet --no-index --no-cache-dir --no-deps \
        --no-build-isolation /tmp/src; \
    rm -rf /tmp/src; \
    /opt/forge-ci/venv/bin/forge-ci --version
COPY entrypoint /usr/local/bin/forge-ci-entrypoint

ENV PATH=/opt/forge-ci/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    FORGE_CI_DATA_DIR=/var/lib/forge-ci \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /var/lib/forge-ci
USER 10000:10000
ENTRYPOINT ["tini", "--", "forge-ci-entrypoint"]
CMD ["forge-ci", "--help"]
