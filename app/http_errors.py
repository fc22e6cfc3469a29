"""Render every error as ``{"error": {"code", "message"}}``; the one place HTTP responses for errors are built."""

from __future__ import annotations

import logging
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from app.db import busy_database
from app.errors import AppError
from app.validation_words import readable

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
}


def _response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(content=body, status_code=status, headers=headers or {}, media_type=MediaType.JSON)


def app_error(_: Request[Any, Any, Any], exc: AppError) -> Response[Any]:
    return _response(exc.status_code, exc.to_body(), exc.headers)


def validation_error(_: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    details = readable(_readable(d) for d in exc.extra) if isinstance(exc.extra, list) else []
    message = "; ".join(
        f"{d.get('key') or d.get('source') or 'body'}: {d.get('message')}" for d in details if isinstance(d, dict)
    )
    body = {"error": {"code": "invalid_request", "message": message or exc.detail, "details": details}}
    return _response(422, body)


def _readable(detail: Any) -> Any:
    """Litestar's own words where they name nothing a client knows: an empty body is a missing ``data`` (the
    KeyError's text, ``'data'``), and a body that is not an object names the model's class."""
    if not isinstance(detail, dict) or detail.get("source") not in ("body", None):
        return detail
    said = str(detail.get("message", ""))
    if detail.get("key") == "data" and said == "'data'":
        return {**detail, "message": "the request has no body; send a JSON object"}
    if said.startswith("Input should be a valid dictionary or instance of "):
        return {**detail, "message": "the body must be a JSON object"}
    return detail


# msgspec's own words for a body that is not JSON, where they do not say it is the JSON that is wrong (the rest of
# its message, the place in the body, is kept).
_DECODER_WORDS = {
    # msgspec also says so of a string whose \\uD800-\\uDBFF escape has no low surrogate after it.
    "Input data was truncated": "JSON is malformed: the body ends before the JSON value does (truncated), or a "
    "string holds a lone UTF-16 surrogate escape",
    "Integer value out of range": "JSON number out of range: whole numbers are kept to 64 bits",
    "Number out of range": "JSON number out of range: numbers are kept to 64-bit floats",
}


def _in_words(detail: str) -> str:
    for said, meant in _DECODER_WORDS.items():
        if detail.startswith(said):
            return meant + detail[len(said) :]
    return detail


def http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    status = exc.status_code
    code = _HTTP_CODES.get(status, "error")
    headers = dict(exc.headers or {})
    message = _too_large(request) if status == 413 else _in_words(exc.detail)
    return _response(status, {"error": {"code": code, "message": message}}, headers)


def _too_large(request: Request[Any, Any, Any]) -> str:
    """Litestar's 413 says only "Request Entity Too Large": say the limit, which differs by route (an import or a sync
    push takes more than a memory's add)."""
    try:
        limit = request.route_handler.resolve_request_max_body_size()
    except Exception:  # no route resolved (the error came before routing): say what we can
        limit = None
    if not limit:
        return "the request body is too large"
    return f"the request body is over the limit of {limit} bytes"


def unexpected_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    if (busy := busy_database(exc)) is not None:
        # A database wait outside ``bounded_waits`` is still the server at capacity, not a fault.
        log.warning("database wait ran out on %s %s: %s", request.method, request.url.path, exc)
        return app_error(request, busy)
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    body = {"error": {"code": "internal_error", "message": "internal error; it has been logged"}}
    return _response(HTTP_500_INTERNAL_SERVER_ERROR, body)


EXCEPTION_HANDLERS: dict[Any, Any] = {
    AppError: app_error,
    ValidationException: validation_error,
    HTTPException: http_error,
    Exception: unexpected_error,
}
