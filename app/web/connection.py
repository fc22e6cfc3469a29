"""The dashboard's "Test connection": one real MCP call with the user's key, to this server's own MCP endpoint.

It goes out through the public URL with the official MCP client, exactly as an installed agent would, so it proves
what the install commands rely on: the URL is reachable, the key is accepted, and the tools are listed. It uses the
user's own URL, not a session URL, so a test leaves no agent behind in any session.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import quote

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

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


def _reason(exc: BaseException, statuses: list[int]) -> str:
    """What went wrong, by the HTTP status the server answered with when there was one: the MCP client turns an
    HTTP error into a generic JSON-RPC one, so the statuses are recorded as the responses come in."""
    refused = [s for s in statuses if s in (401, 403)]
    if refused:
        return f"the server refused the key (HTTP {refused[0]}): check that it is whole and not revoked"
    failed = [s for s in statuses if s >= 400]
    if failed:
        return f"the server answered HTTP {failed[0]}"
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


async def check_connection(base_url: str, user_id: str, key: str) -> ConnectionResult:
    """Connect with ``key`` and list the tools; never raises, the result says what happened."""
    url = check_url(base_url, user_id)
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

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
        return ConnectionResult(True, url, f"Connected: the key works and {len(tools)} tools answer.", tools, elapsed)
    except TimeoutError:
        message = f"no answer within {TIMEOUT_SECONDS:.0f} s"
    except Exception as exc:  # the page reports any failure rather than failing itself
        message = _reason(exc, statuses)
    elapsed = int((time.perf_counter() - started) * 1000)
    return ConnectionResult(False, url, f"Not connected: {message}.", [], elapsed)
