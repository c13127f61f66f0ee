# PostgreSQL for deploy/compose.yml, when no registry offers the official image (production may
# set FORGE_CI_POSTGRES_IMAGE=postgres:15-bookworm instead: this image reads the same variables,
# POSTGRES_USER, POSTGRES_DB, POSTGRES_PASSWORD_FILE and PGDATA, and keeps its data in the same
# place). Built by deploy/build-deploy-images (--network=none) from the services base.
ARG BASE_IMAGE=forge-ci-base:bookworm-services-1
FROM ${BASE_IMAGE}
SHELL ["/bin/sh", "-eu", "-c"]
RUN for tool in tini setpriv; do command -v "$tool" >/dev/null; done; \
    test -x "$(ls -d /usr/lib/postgresql/*/bin | tail -n1)/postgres"; \
    ln -sf "$(ls -d /usr/lib/postgresql/*/bin | tail -n1)"/* /usr/local/bin/; \
    install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data; \
    install -d -o postgres -g postgres -m 2775 /var/run/postgresql
COPY entrypoint /usr/local/bin/postgres-entrypoint
ENV PGDATA=/var/lib/postgresql/data
VOLUME /var/lib/postgresql/data
ENTRYPOINT ["tini", "--", "postgres-entrypoint"]
CMD ["postgres"]
