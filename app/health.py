"""Liveness and readiness."""

from __future__ import annotations

import time
from typing import Any

from litestar import Response, get

from app.container import Container


@get("/healthz", tags=["health"], summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@get("/readyz", tags=["health"], summary="Every dependency answers")
async def readyz(container: Container) -> Response[dict[str, Any]]:
    checks: dict[str, Any] = {}
    ready = True
    probes: dict[str, Any] = {
        "database": container.db.ping,
        "vector_index": container.engine.ping,
        "coordination": container.coordination.ping,
    }
    probes.update(container.extras.get("readiness", {}))
    for name, probe in probes.items():
        started = time.perf_counter()
        try:
            await probe()
            checks[name] = {"status": "ok", "ms": round((time.perf_counter() - started) * 1000, 2)}
        except Exception as exc:
            ready = False
            checks[name] = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    checks["vector_index"]["backend"] = container.engine.backend
    checks["coordination"]["backend"] = container.coordination.name
    body = {"status": "ready" if ready else "unavailable", "checks": checks}
    return Response(body, status_code=200 if ready else 503)
