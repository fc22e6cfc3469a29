"""Domain errors. This is the one place that knows their HTTP status codes and JSON-RPC codes."""

from __future__ import annotations

from typing import Any, ClassVar


class AppError(Exception):
    """Base of every error a caller may see. ``code`` is stable; ``message`` is for people."""

    status_code: ClassVar[int] = 400
    code: ClassVar[str] = "bad_request"
    # JSON-RPC: -32602 invalid params is the right answer for most caller mistakes.
    jsonrpc_code: ClassVar[int] = -32602

    def __init__(self, message: str, *, headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}
        self.extra = extra

    def to_body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        error.update(self.extra)
        return {"error": error}


class ValidationFailed(AppError):
    status_code = 422
    code = "invalid_request"


class MalformedBody(AppError):
    """A body that cannot be read as what its content type says (not UTF-8, not JSON, nested beyond reason)."""

    status_code = 400
    code = "malformed_body"


class NotSupported(AppError):
    """A feature a compatible API names that Engram does not offer (e.g. Mem0's profiles or webhooks)."""

    status_code = 400
    code = "not_supported"


class InvalidIdentity(AppError):
    status_code = 400
    code = "invalid_user_id"


class InvalidJsonRpc(AppError):
    """A body that is not one well-formed JSON-RPC message."""

    status_code = 400
    code = "invalid_jsonrpc"
    jsonrpc_code = -32600

    def __init__(self, message: str, *, jsonrpc_code: int = -32600) -> None:
        super().__init__(message)
        self.jsonrpc_code = jsonrpc_code  # type: ignore[misc]


class MethodNotFound(AppError):
    """A JSON-RPC method this revision of MCP does not have (over HTTP: 404, as the 2026-07-28 revision requires)."""

    status_code = 404
    code = "method_not_found"
    jsonrpc_code = -32601


class InvalidParams(AppError):
    """A well-formed JSON-RPC request whose params are wrong: the HTTP exchange itself was fine (200)."""

    status_code = 200
    code = "invalid_params"
    jsonrpc_code = -32602


class Unauthorized(AppError):
    status_code = 401
    code = "unauthorized"
    jsonrpc_code = -32001


class Forbidden(AppError):
    status_code = 403
    code = "forbidden"
    jsonrpc_code = -32003


class NotFound(AppError):
    status_code = 404
    code = "not_found"
    jsonrpc_code = -32004


class Conflict(AppError):
    status_code = 409
    code = "conflict"
    jsonrpc_code = -32009


class AccountDeleted(AppError):
    """The credential belonged to an account that was deleted: nothing will answer it again (stop, do not retry)."""

    status_code = 410
    code = "account_deleted"
    jsonrpc_code = -32010


class RequestTimeout(AppError):
    """The request's body did not arrive in time: it is dropped, and the client may send it again."""

    status_code = 408
    code = "request_timeout"


class ClientGone(AppError):
    """The client closed the connection before its request arrived whole: no one hears the answer, which exists so
    that logs and metrics say what happened (499, as proxies record it) instead of a server error."""

    status_code = 499
    code = "client_closed_request"


class PayloadTooLarge(AppError):
    status_code = 413
    code = "payload_too_large"


class MemoryTooLarge(PayloadTooLarge):
    code = "memory_too_large"


class RateLimited(AppError):
    status_code = 429
    code = "rate_limited"
    jsonrpc_code = -32029


class QuotaExceeded(RateLimited):
    code = "quota_exceeded"


class ServiceUnavailable(AppError):
    status_code = 503
    code = "unavailable"
    jsonrpc_code = -32603


class OverFairShare(RateLimited):
    """A tenant holding more than its share of a busy server (admission control)."""

    code = "over_fair_share"


class Overloaded(ServiceUnavailable):
    """No slot within the request's waiting budget: the server is at capacity (admission control)."""

    code = "overloaded"
