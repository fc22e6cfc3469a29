"""Liveness and readiness."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from litestar import Response, get

from app.container import Container


async def _probe(check: Callable[[], Awaitable[None]]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        await check()
    except Exception as exc:
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    return {"status": "ok", "ms": round((time.perf_counter() - started) * 1000, 2)}


@get("/healthz", tags=["health"], summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@get("/readyz", tags=["health"], summary="Every dependency answers")
async def readyz(container: Container) -> Response[dict[str, Any]]:
    """503 when the database or the index is down; coordination down only degrades (memories keep working)."""
    redis = container.redis
    if redis is not None and redis.is_open:
        # The breaker's watchdog is already asking Redis several times a second: answer at once.
        coordination: dict[str, Any] = {"status": "error", "error": f"redis is not answering: {redis.reason}"}
    else:
        coordination = await _probe(container.coordination.ping)
    checks = {
        "database": await _probe(container.db.ping),
        "vector_index": {**await _probe(container.engine.ping), "backend": container.engine.backend},
        "coordination": {**coordination, "backend": container.coordination.name},
    }
    if checks["database"]["status"] != "ok" or checks["vector_index"]["status"] != "ok":
        status, code = "unavailable", 503
    elif checks["coordination"]["status"] != "ok":
        status, code = "degraded", 200
    else:
        status, code = "ready", 200
    return Response({"status": status, "checks": checks}, status_code=code)
