# Engram: slim, non-root, the embedding model inside the image (no download at run time).
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml constraints.txt alembic.ini ./
COPY app ./app
COPY migrations ./migrations
# Editable, so `engram migrate` finds alembic.ini and migrations/ beside the package at /app.
RUN python -m venv /venv && /venv/bin/pip install -c constraints.txt -e .

FROM python:3.11-slim
ENV PATH=/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MEM0_TELEMETRY=False \
    ENGRAM_HOST=0.0.0.0 \
    ENGRAM_PORT=8000 \
    ENGRAM_DATA_DIR=/data
RUN useradd --system --uid 10001 --home-dir /app engram && mkdir -p /data && chown engram /data
WORKDIR /app
COPY --from=build /venv /venv
COPY --from=build /app /app
USER engram
EXPOSE 8000
VOLUME ["/data"]
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"
CMD ["sh", "-c", "engram migrate && exec engram serve"]
