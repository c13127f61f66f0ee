# Redis for deploy/compose.yml, when no registry offers the official image (production may set
# FORGE_CI_REDIS_IMAGE=redis:7-bookworm: the same command line works there). Runs as redis.
ARG BASE_IMAGE=forge-ci-base:bookworm-services-1
FROM ${BASE_IMAGE}
SHELL ["/bin/sh", "-eu", "-c"]
RUN command -v redis-server >/dev/null; command -v tini >/dev/null; \
    install -d -o redis -g redis -m 0700 /data
VOLUME /data
WORKDIR /data
USER redis
ENTRYPOINT ["tini", "--"]
CMD ["redis-server", "--dir", "/data", "--appendonly", "yes", "--protected-mode", "no"]
