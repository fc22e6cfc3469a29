"""Our domain errors as MCP protocol errors: one mapping for the endpoint's refusals and the handlers' failures."""

from __future__ import annotations

from typing import Any

from mcp.shared.exceptions import MCPError

from app.errors import AppError


def error_object(exc: AppError) -> dict[str, Any]:
    """The JSON-RPC ``error`` member: the error's JSON-RPC code and message, our code and details in ``data``."""
    data: dict[str, Any] = {"code": exc.code, **exc.extra}
    if (retry_after := exc.headers.get("Retry-After")) is not None:
        data["retry_after_seconds"] = int(retry_after)  # what HTTP says in a header, for clients that only see JSON
    return {"code": exc.jsonrpc_code, "message": exc.message, "data": data}


def protocol_error(exc: AppError) -> MCPError:
    """What a handler raises so that the SDK answers with ``error_object(exc)``."""
    error = error_object(exc)
    return MCPError(error["code"], error["message"], error["data"])
