# The gnomon image: the package and its runtime dependencies, run as an unprivileged user.
# The role is chosen by the command: `docker run gnomon meta ...`, `... node ...`,
# `... compaction-node ...`, `... standalone ...` (the default). Settings come from a mounted TOML file (--config),
# GNOMON_* environment variables or flags; see deploy/ and docker-compose.yml.

# Install gnomon with its runtime dependencies into a virtual environment, which alone goes
# into the final image: no build tools, caches or source tree.
FROM python:3.11.14-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The context is the source tree less what .dockerignore leaves out; pyproject.toml says
# which packages of it are installed.
COPY . .
# Optional extras of the package, e.g. --build-arg EXTRAS=ray for compaction nodes that run
# merges as Ray tasks.
ARG EXTRAS=""
RUN python -m venv /opt/gnomon \
    && /opt/gnomon/bin/pip install ".${EXTRAS:+[$EXTRAS]}" \
    && /opt/gnomon/bin/pip uninstall --yes pip setuptools

FROM python:3.11.14-slim-bookworm
ENV PATH=/opt/gnomon/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# A fixed uid/gid, so volumes and Kubernetes' fsGroup can grant it the data directory.
RUN groupadd --system --gid 10001 gnomon \
    && useradd --system --uid 10001 --gid gnomon --home-dir /var/lib/gnomon --shell /usr/sbin/nologin gnomon \
    && mkdir -p /var/lib/gnomon /etc/gnomon \
    && chown gnomon:gnomon /var/lib/gnomon
COPY --from=build /opt/gnomon /opt/gnomon
WORKDIR /var/lib/gnomon
USER 10001:10001
# HTTP (SQL, line protocol, /health), gRPC (HoraeDB protocol), Arrow Flight, PostgreSQL
# protocol, meta gRPC.
EXPOSE 5440 8831 8832 5433 2390
ENTRYPOINT ["gnomon"]
# Open to the container network: pass --auth=true (after gnomon admin users create) to close it.
CMD ["standalone", "--bind=0.0.0.0", "--insecure=true", "--data-dir=/var/lib/gnomon"]
