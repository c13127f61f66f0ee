# The Docker-in-Docker engine of deploy/compose.pipeline.yml: dockerd for job containers only,
# listening on a Unix socket in a volume it shares with the provider alone (never TCP).
# Built by deploy/build-deploy-images (--network=none).
#
# Base: forge-ci-base:bookworm-dind-1 (debootstrap + Debian's docker.io) by default; any base
# with dockerd, containerd, runc, tini and mount works (checked below).
ARG BASE_IMAGE=forge-ci-base:bookworm-dind-1
FROM ${BASE_IMAGE}

SHELL ["/bin/sh", "-eu", "-c"]

RUN for tool in dockerd containerd runc tini mount; do \
        command -v "$tool" >/dev/null || { echo "base image lacks $tool" >&2; exit 1; }; \
    done; \
    if ! grep -q '^forge-ci-provider:' /etc/group; then \
        echo 'forge-ci-provider:x:10001:' >>/etc/group; \
    fi
COPY entrypoint /usr/local/bin/dind-entrypoint

# Image storage: its own volume (overlay2 cannot live on the container's own overlay).
VOLUME /var/lib/docker
ENTRYPOINT ["tini", "--", "dind-entrypoint"]
CMD []
