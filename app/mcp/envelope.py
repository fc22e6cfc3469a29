"""A first look at a POSTed JSON-RPC message, so that a malformed one gets a short error naming the wrong part.

The SDK validates too, but answers a malformed envelope with -32602 and a pydantic dump; JSON-RPC 2.0 says -32600.
"""

from __future__ import annotations

import json
from typing import Any

from litestar.types import HTTPRequestEvent, Receive, ReceiveMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from app.errors import ClientGone, InvalidJsonRpc, InvalidParams, MethodNotFound, PayloadTooLarge
from app.request_body import LEFT_HALFWAY, arrived

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
# The handshake-era methods the stateless revisions (2026-07-28 on) removed: under them, "method not found".
REMOVED_IN_STATELESS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)


def check_message(body: bytes) -> str | None:
    """Raise ``InvalidJsonRpc`` naming what is wrong with ``body``, unless it is one well-formed JSON-RPC message.

    Returns its method (None for a response)."""
    try:
        message: Any = json.loads(body, parse_constant=_not_a_json_number)
    except _NotJsonNumber as exc:
        raise InvalidJsonRpc(f"the body is not JSON: {exc}", jsonrpc_code=-32700) from None
    except (ValueError, RecursionError):
        raise InvalidJsonRpc("the body is not JSON", jsonrpc_code=-32700) from None
    if isinstance(message, list):
        raise InvalidJsonRpc("send one JSON-RPC message per request: MCP has no batches since 2025-06-18")
    if not isinstance(message, dict):
        raise InvalidJsonRpc(f"a JSON-RPC message is an object, not {type(message).__name__}")
    if message.get("jsonrpc") != "2.0":
        raise InvalidJsonRpc('"jsonrpc" must be "2.0"')
    if "id" in message and (isinstance(message["id"], bool) or not isinstance(message["id"], (str, int))):
        raise InvalidJsonRpc('"id" must be a string or an integer')
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            raise InvalidJsonRpc('"method" must be a non-empty string')
        if "params" in message and not isinstance(message["params"], dict):
            raise InvalidJsonRpc('"params" must be an object')
        if message["method"] in REMOVED_IN_STATELESS and _stateless_revision(message.get("params")):
            raise MethodNotFound(f"{message['method']} does not exist in protocol revision 2026-07-28 and later")
        problem = _params_problem(message["method"], message.get("params"))
        if problem:
            raise InvalidParams(f"{message['method']}: {problem}")
        return str(message["method"])
    if "id" not in message or ("result" in message) == ("error" in message):
        raise InvalidJsonRpc('a request needs "method"; a response needs "id" and one of "result" or "error"')
    return None


class _NotJsonNumber(ValueError):
    pass


def _not_a_json_number(name: str) -> Any:
    """Python's json reads NaN and Infinity; JSON has neither (a ``threshold: NaN`` was then "not <= 1")."""
    raise _NotJsonNumber(f"{name} is not a JSON number")


def request_id_in(body: bytes | None) -> str | int | None:
    """The JSON-RPC id in ``body``, so that an error can name the request it answers (JSON-RPC 2.0 §5); else null."""
    if not body:
        return None
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return None
    found = parsed.get("id") if isinstance(parsed, dict) else None
    return found if isinstance(found, (str, int)) and not isinstance(found, bool) else None


def names_a_revision(body: bytes | None) -> bool:
    """Whether ``body`` is a request carrying the stateless revisions' ``_meta`` envelope with a protocol version."""
    try:
        parsed = json.loads(body) if body else None
    except (ValueError, RecursionError):
        return False
    meta = _meta_of(parsed.get("params") if isinstance(parsed, dict) else None)
    return meta is not None and PROTOCOL_VERSION_META in meta


def _stateless_revision(params: dict[str, Any] | None) -> bool:
    """Whether a request names a stateless revision (2026-07-28 on) in its ``_meta`` envelope."""
    meta = _meta_of(params)
    return meta is not None and meta.get(PROTOCOL_VERSION_META) in MODERN_PROTOCOL_VERSIONS


def _meta_of(params: Any) -> dict[str, Any] | None:
    """A request's ``params._meta``, where it is an object."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else None


_LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def _params_problem(method: str, params: dict[str, Any] | None) -> str | None:
    """What is wrong with the params of the methods agents call most, where the SDK would only say "invalid"."""
    params = params or {}
    if method == "initialize":
        if not isinstance(params.get("protocolVersion"), str):
            return 'params.protocolVersion (a string such as "2025-11-25") is required'
        if not isinstance(params.get("capabilities"), dict):
            return "params.capabilities (an object) is required"
        if not isinstance(params.get("clientInfo"), dict):
            return "params.clientInfo (an object with name and version) is required"
    elif method == "tools/call":
        if not isinstance(params.get("name"), str) or not params["name"]:
            return "params.name (the tool's name) is required"
        if "arguments" in params and params["arguments"] is not None and not isinstance(params["arguments"], dict):
            return "params.arguments must be an object"
    elif method == "resources/read":
        if not isinstance(params.get("uri"), str):
            return "params.uri (a string) is required"
    elif method == "logging/setLevel" and params.get("level") not in _LOG_LEVELS:
        return f"params.level must be one of {', '.join(_LOG_LEVELS)}"
    return None


async def read_body(receive: Receive, limit: int, *, declared: str | None = None, seconds: float = 30.0) -> bytes:
    """The whole body: ``PayloadTooLarge`` at once when its declared length (``Content-Length``) is over ``limit``,
    else as soon as it passes ``limit`` bytes; within ``seconds`` (``app.request_body``)."""
    too_large = f"the request body is over the limit of {limit} bytes"
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise PayloadTooLarge(too_large)

    async def whole() -> bytes:
        body = b""
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise ClientGone(LEFT_HALFWAY)
            body += message.get("body", b"")
            if len(body) > limit:
                raise PayloadTooLarge(too_large)
            if not message.get("more_body"):
                return body

    return await arrived(whole(), seconds)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands over ``body`` once, then whatever comes next (a disconnect)."""
    sent = False

    async def replayed() -> ReceiveMessage:
        nonlocal sent
        if not sent:
            sent = True
            event: HTTPRequestEvent = {"type": "http.request", "body": body, "more_body": False}
            return event
        return await receive()

    return replayed
