"""``/mcp/v2/{client_name}/{user_id}``: checks Origin, the id and the credential, then hands over to the MCP SDK.

Everything refused here is refused before the SDK sees the request, with a JSON-RPC error body and the HTTP status
of the error. Stateful MCP sessions are bound to the credential and URL that created them; any other use of a
session id answers 404, as if it did not exist.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

from litestar import asgi
from litestar.handlers import ASGIRouteHandler
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Message, Receive, Scope, Send
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

from app.accounts.principal import Principal
from app.container import Container
from app.errors import AppError, Forbidden, InvalidJsonRpc, NotFound
from app.identity import Identity, parse_identity
from app.mcp.caller import SCOPE_KEY, Caller
from app.mcp.envelope import check_message, names_a_revision, read_body, replay, request_id_in
from app.mcp.errors import error_object
from app.mcp.live import LiveSessions, Owner
from app.mcp.server import SESSION_ID_HEADER, build_server
from app.oauth.resources import mcp_resource
from app.observability.request_id import note_user
from app.quotas.plans import Plan
from app.settings import Settings

log = logging.getLogger(__name__)

PROTOCOL_VERSION_HEADER = "mcp-protocol-version"

MOUNT = "/mcp/v2"
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


class _SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, telling us when a session ends, whether by DELETE, idle timeout or crash."""

    def __init__(self, *args: Any, on_discard: Callable[[str], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_discard = on_discard

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self._on_discard(session_id)
        await super()._discard_session(session_id, transport)

    async def terminate(self, session_id: str) -> None:
        """End a session now, as a DELETE would: its streams close and its id answers 404 from then on."""
        transport = self._server_instances.get(session_id)
        if transport is not None:
            await self._discard_session(session_id, transport)


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def origin_allowed(origin: str | None, public_base_url: str) -> bool:
    """No Origin (not a browser), a local origin, or the server's own public origin."""
    if origin is None:
        return True
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    return parts.hostname in _LOCAL_HOSTS or origin_of(origin) == origin_of(public_base_url)


def parse_route(scope: Scope) -> tuple[str, str]:
    """``(client_name, user_id)`` from the raw path, percent-decoded; a trailing slash is fine."""
    raw = scope.get("raw_path") or scope["path"].encode()
    path = raw.decode("latin-1")
    if path.startswith(MOUNT):
        path = path[len(MOUNT) :]
    parts = path.strip("/").split("/")
    if len(parts) != 2 or not all(parts):
        raise NotFound(f"the MCP endpoint is {MOUNT}/<client_name>/<user_id>, e.g. {MOUNT}/claude%20code/alice")
    return unquote(parts[0]), unquote(parts[1])


async def send_error(send: Send, exc: AppError, request_id: str | int | None = None) -> None:
    body = {"jsonrpc": "2.0", "id": request_id, "error": error_object(exc)}
    headers = [(b"content-type", b"application/json")]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in exc.headers.items()]
    start: HTTPResponseStartEvent = {"type": "http.response.start", "status": exc.status_code, "headers": headers}
    await send(start)
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": json.dumps(body).encode(), "more_body": False}
    await send(end)


class McpEndpoint:
    """One per app: the SDK's server and session manager, the live sessions, and the Litestar mount."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.live = LiveSessions(per_user=settings.mcp_sessions_per_user)
        self.server = build_server(self.live)
        self.manager = _SessionManager(
            self.server,
            on_discard=self.live.discard,
            json_response=True,
            max_request_body_size=settings.max_body_bytes,
            session_idle_timeout=settings.mcp_session_idle_seconds,
        )
        self.route = self._route()

    @asynccontextmanager
    async def running(self, container: Container) -> AsyncIterator[None]:
        """Enter once in the app's lifespan, after the container exists."""
        async with self.live.running(container.authenticator, self.manager.terminate), self.manager.run():
            container.revocations.listen(self.live.credential_revoked)
            yield

    def _route(self) -> ASGIRouteHandler:
        @asgi(MOUNT, is_mount=True, include_in_schema=False)
        async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            await self.handle(scope, receive, send)

        return mcp_endpoint

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        container: Container = scope["app"].state.container
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        body: bytes | None = None
        try:
            if scope.get("method") == "POST":
                body = await read_body(
                    receive,
                    self.settings.max_body_bytes,
                    declared=headers.get("content-length"),
                    seconds=self.settings.request_body_seconds,
                )
                receive = replay(body, receive)
            caller, plan = await self._admit(scope, headers, container)
            _check_protocol_version(headers.get(PROTOCOL_VERSION_HEADER), body)
            session_id = headers.get(SESSION_ID_HEADER)
            if session_id is not None:
                if self.live.owner(session_id) != _owner(caller):
                    raise NotFound("Session not found")
                self.live.touch(session_id)
            method = check_message(body) if body is not None else None
            # A tool call is work like a REST request; the rest (handshake, listings, streams) never waits.
            ticket = (
                await container.admission.enter(
                    caller.principal.user_id, "mcp tools/call", weight=plan.weight, tenant_class=plan.name
                )
                if method == "tools/call"
                else None
            )
        except AppError as exc:
            await send_error(send, exc, request_id_in(body))
            return
        try:
            await self._serve(scope, receive, send, container, caller, session_id, tool_call=method == "tools/call")
        finally:
            if ticket is not None:
                container.admission.leave(ticket)

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        container: Container,
        caller: Caller,
        session_id: str | None,
        *,
        tool_call: bool,
    ) -> None:
        if caller.identity.is_session:
            await _mark_present(container, caller, tool_call=tool_call)
        owner = _owner(caller)

        async def bind_new_session(message: Message) -> None:
            if message["type"] == "http.response.start" and session_id is None and message["status"] < 400:
                created = dict(message.get("headers") or []).get(SESSION_ID_HEADER.encode())
                if created:
                    self.live.bind(created.decode(), owner, caller.identity, caller.principal)
            await send(message)

        await self.manager.handle_request({**scope, SCOPE_KEY: caller}, receive, bind_new_session)  # type: ignore[arg-type]

    async def _admit(self, scope: Scope, headers: dict[str, str], container: Container) -> tuple[Caller, Plan]:
        if not origin_allowed(headers.get("origin"), self.settings.resolved_public_base_url):
            raise Forbidden("this Origin may not use the MCP endpoint")
        client_name, raw_user_id = parse_route(scope)
        identity = parse_identity(raw_user_id)
        # OAuth tokens are bound to this exact URL; a 401 names its RFC 9728 metadata (WWW-Authenticate).
        resource = mcp_resource(self.settings.resolved_public_base_url, client_name, raw_user_id)
        principal = await container.authenticator.authenticate(headers, resource=resource)
        note_user(principal.user_id)
        _check_owner(principal, identity)
        plan = await container.quotas.check_request(principal)
        return Caller(principal=principal, identity=identity, client_name=client_name, container=container), plan


async def _mark_present(container: Container, caller: Caller, *, tool_call: bool) -> None:
    """Any call on a session URL shows the agent in the session (rate-limited per agent, see TeamService.seen); only
    a tool call brings back an agent that left (closing its client, say, must not)."""
    try:
        await container.teams.agents.seen(caller.identity, revive=tool_call)
    except Exception:  # presence is a courtesy: it must never fail the call itself
        log.warning("could not mark %s present", caller.identity.format(), exc_info=True)


def _check_owner(principal: Principal, identity: Identity) -> None:
    if principal.user_id != identity.user_id:
        raise Forbidden(f"this API key belongs to another user, not to {identity.user_id!r} named in the URL")
    principal.require_identity(identity)


def _owner(caller: Caller) -> Owner:
    principal = caller.principal
    return Owner(principal.user_id, principal.key_id, principal.via, caller.client_name, caller.identity.format())


def _check_protocol_version(version: str | None, body: bytes | None) -> None:
    """A revision this server does not speak is refused in words: the SDK took a request without the stateless
    revisions' envelope for a malformed one and said "params._meta must be an object ...". A request with the
    envelope is left to the SDK, whose answer carries the versions in ``data`` as those revisions specify."""
    if version is not None and version not in SUPPORTED_PROTOCOL_VERSIONS and not names_a_revision(body):
        raise InvalidJsonRpc(
            f"MCP-Protocol-Version {version!r} is not supported; this server speaks "
            f"{', '.join(SUPPORTED_PROTOCOL_VERSIONS)}",
            jsonrpc_code=UNSUPPORTED_PROTOCOL_VERSION,
        )
