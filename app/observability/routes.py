"""``GET /metrics``: the Prometheus text format; behind a bearer token when ``ENGRAM_METRICS_TOKEN`` is set."""

from __future__ import annotations

import hmac
from typing import Any

from litestar import Request, Response, get
from prometheus_client import CONTENT_TYPE_LATEST

from app.container import Container
from app.errors import Unauthorized

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="engram-metrics"'}


def _token_ok(expected: str, authorization: str | None) -> bool:
    scheme, _, presented = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), expected.encode())


@get("/metrics", include_in_schema=False)
async def metrics(request: Request[Any, Any, Any], container: Container) -> Response[bytes]:
    expected = container.settings.metrics_token
    if expected and not _token_ok(expected, request.headers.get("authorization")):
        raise Unauthorized("metrics need 'Authorization: Bearer <metrics token>'", headers=_CHALLENGE)
    # Litestar appends the charset to text types itself; a second one makes strict parsers (Go's) reject the scrape.
    return Response(content=container.metrics.render(), media_type=CONTENT_TYPE_LATEST.replace("; charset=utf-8", ""))
