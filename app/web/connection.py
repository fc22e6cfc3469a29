"""The dashboard's "Test connection": one real MCP call with the user's key, to this server's own MCP endpoint.

It goes out through the public URL with the official MCP client, exactly as an installed agent would, so it proves
what the install commands rely on: the URL is reachable, the key is accepted, and the tools are listed. A key that is
not bound is tried on the user's own URL, not a session URL, so a test leaves no agent behind in any session. A key
bound to one session and agent works nowhere else, so it is tried on its own session URL (which shows that agent in
its session, as the agent itself will).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from urllib.parse import quote

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from app.web.install import session_url

# A healthy round trip takes tens of milliseconds; this only stops a hung server from hanging the page.
TIMEOUT_SECONDS = 15.0
CLIENT_NAME = "dashboard-test"


@dataclass(frozen=True, slots=True)
class ConnectionResult:
    ok: bool
    url: str
    message: str
    tools: list[str]
    milliseconds: int


def check_url(base_url: str, user_id: str) -> str:
    return f"{base_url.rstrip('/')}/mcp/v2/{CLIENT_NAME}/{quote(user_id, safe='')}"


@dataclass(frozen=True, slots=True)
class Binding:
    """The one session and agent a bound key may act as."""

    session: str
    agent: str


@dataclass(slots=True)
class _Refusal:
    status: int
    message: str | None


def _reason(exc: BaseException, refusals: list[_Refusal]) -> str:
    """What went wrong, by the HTTP answer the server gave when there was one: the MCP client turns an HTTP error
    into a generic JSON-RPC one, so the refusals (with the server's own words) are recorded as they come in."""
    for refusal in refusals:
        if refusal.status in (401, 403):
            said = f": {refusal.message}" if refusal.message else ": check that it is whole and not revoked"
            return f"the server refused the key (HTTP {refusal.status}){said}"
    if refusals:
        said = f": {refusals[0].message}" if refusals[0].message else ""
        return f"the server answered HTTP {refusals[0].status}{said}"
    for inner in _leaves(exc):
        if isinstance(inner, httpx2.TransportError):
            return f"could not reach the server: {type(inner).__name__}"
    leaf = _leaves(exc)[-1]
    text = str(leaf).strip().splitlines()
    return text[0][:300] if text else type(leaf).__name__


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)] or [exc]
    chain = [exc]
    while exc.__cause__ is not None and len(chain) < 10:
        exc = exc.__cause__
        chain.append(exc)
    return chain


def _message_of(body: bytes) -> str | None:
    """The server's own words in an error body (``{"error": {"message"}}``, JSON-RPC's ``error.message``), if any."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message[:300] if isinstance(message, str) and message else None


async def check_connection(base_url: str, user_id: str, key: str, binding: Binding | None = None) -> ConnectionResult:
    """Connect with ``key`` and list the tools; never raises, the result says what happened. A ``binding`` (the key's
    own) is tried on its session URL, the only one that key may open."""
    url = (
        check_url(base_url, user_id)
        if binding is None
        else session_url(base_url, CLIENT_NAME, user_id, binding.session, binding.agent)
    )
    refusals: list[_Refusal] = []

    async def record(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            refusals.append(_Refusal(response.status_code, _message_of(await response.aread())))

    started = time.perf_counter()
    try:
        with anyio.fail_after(TIMEOUT_SECONDS):
            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {key}"},
                timeout=TIMEOUT_SECONDS,
                event_hooks={"response": [record]},
            )
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                listed = await client.list_tools()
        tools = sorted(tool.name for tool in listed.tools)
        elapsed = int((time.perf_counter() - started) * 1000)
        if binding is None:
            # The install panel's URLs name a session: there the agent also gets the session's coordination tools.
            said = (
                f"Connected: the key works and {len(tools)} tools answer; "
                "on a session URL an agent also gets the session's coordination tools."
            )
        else:
            said = (
                f"Connected: the key works on its own session URL (session {binding.session}, agent {binding.agent}) "
                f"and {len(tools)} tools answer."
            )
        return ConnectionResult(True, url, said, tools, elapsed)
    except TimeoutError:
        message = f"no answer within {TIMEOUT_SECONDS:.0f} s"
    except Exception as exc:  # the page reports any failure rather than failing itself
        message = _reason(exc, refusals)
    elapsed = int((time.perf_counter() - started) * 1000)
    return ConnectionResult(False, url, f"Not connected: {message}.", [], elapsed)
