# The skewlab image: one image for the producer, the engine (PySpark, local master) and the dashboard.
# Which one runs is the command: `skewlab produce ...`, `skewlab engine ...`, `skewlab dashboard ...`
# (see docker-compose.yml and docs/docker.md).
#
#   docker build -t skewlab:latest .
#   docker run --rm skewlab:latest skewlab algorithms
FROM python:3.11-slim-bookworm

# Java 17 for Spark 4 (local master inside the container); procps because Spark's launch scripts call
# `ps`; tini as PID 1 so SIGTERM reaches skewlab (the engine finishes its batch and flushes metrics)
# and the JVM's children are reaped.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps tini \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SKEWLAB_DATA_DIR=/data \
    NUMBA_CACHE_DIR=/opt/numba-cache

WORKDIR /app
COPY pyproject.toml README.md ./
COPY skewlab ./skewlab
COPY shared ./shared
COPY engine ./engine
COPY storage ./storage
COPY dashboard ./dashboard
COPY bench ./bench
COPY assets ./assets
# Editable install: the code runs from /app, the dashboard's static files from /app/assets (also
# declared as package data skewlab.assets in pyproject.toml).
# The numba kernels are compiled into the image's cache at build time (python -m skewlab.engine.cli.warmup), so
# the engine's first micro-batch loads them instead of compiling for minutes.
RUN pip install -e . \
    && python -c "import skewlab.cli, skewlab.engine.cli, skewlab.storage, skewlab.dashboard.app, pyspark, psycopg" \
    && python -m skewlab.engine.cli.warmup

COPY docker/entrypoint.sh /usr/local/bin/skewlab-entrypoint
RUN chmod 0755 /usr/local/bin/skewlab-entrypoint \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin skewlab \
    && mkdir -p /data \
    && chown skewlab:skewlab /data \
    && chown -R skewlab:skewlab /opt/numba-cache

USER skewlab
VOLUME ["/data"]
# the dashboard's port (skewlab dashboard --port 8050 in docker-compose.yml)
EXPOSE 8050

ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/skewlab-entrypoint"]
CMD ["skewlab", "algorithms"]
