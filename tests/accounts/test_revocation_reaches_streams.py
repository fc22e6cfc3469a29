"""A revocation reaches every open stream of the credential within a second, on this instance and on the others.

These servers re-check stream credentials only every 10 minutes, so nothing here can pass by the timed re-check:
what ends each stream is the revocation being announced (in-process, and through Redis to the other instance).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from tests.conftest import _settings
from tests.harness import RunningServer, add_key, make_account, revoke_key, serve
from tests.mcp.conftest import hold_get_stream, mcp_url, raw_session, session_id
from tests.mcp.test_listen import agent_and_raw_listener

pytestmark = [pytest.mark.redis]

SLOW_RECHECK = 600.0
# The promise is one second. This limit only catches a revocation that is never announced: ten times that, and
# still far below the 600 s re-check these servers are given, which is what a missed announcement would wait for.
WITHIN = 20.0


@pytest.fixture(scope="module")
def pair(
    pg_database_url: str, redis_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, RunningServer]]:
    """Two instances sharing the database and Redis, neither re-checking streams on a timer, nor keys it verified,
    any time soon: only the announcement of a revocation can end them."""
    slow = {"stream_recheck_seconds": SLOW_RECHECK, "verified_key_seconds": SLOW_RECHECK}
    first = _settings(tmp_path_factory.mktemp("revoke-1"), pg_database_url, redis_url=redis_url, **slow)
    second = _settings(
        tmp_path_factory.mktemp("revoke-2"),
        pg_database_url,
        redis_url=redis_url,
        secret_key=first.secret_key,  # type: ignore[attr-defined]
        **slow,
    )
    with serve(first, embedder=embedder) as a, serve(second, embedder=embedder) as b:  # type: ignore[arg-type]
        yield a, b


class SseReader:
    """Reads a REST SSE stream in a thread, noting each event and when the stream ended."""

    def __init__(self, server: RunningServer, key: str, session: str) -> None:
        self.events: list[tuple[float, str]] = []
        self.ended_at: float | None = None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(server, key, session), daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "the stream did not open"

    def _read(self, server: RunningServer, key: str, session: str) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        try:
            with (
                httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as http,
                http.stream("GET", f"/v1/sessions/{session}/events") as response,
            ):
                for line in response.iter_lines():
                    if line.startswith("event:"):
                        kind = line.split(":", 1)[1].strip()
                        self.events.append((time.monotonic(), kind))
                        if kind == "ready":
                            self.ready.set()
        except httpx.HTTPError:
            pass
        self.ended_at = time.monotonic()

    def ended_within(self, started: float, seconds: float) -> bool:
        self.thread.join(timeout=seconds + 1)
        return self.ended_at is not None and self.ended_at - started < seconds


def test_a_key_revoked_on_one_instance_is_refused_by_the_other_that_knew_it(
    pair: tuple[RunningServer, RunningServer],
) -> None:
    a, b = pair
    me = make_account(a)
    doomed = add_key(a, me.user_id)
    with b.client(doomed.key) as http:
        assert http.get("/v1/memories").status_code == 200  # b now keeps it as verified
        started = time.monotonic()
        revoke_key(a, doomed.key_id)
        while (answer := http.get("/v1/memories")).status_code == 200:
            assert time.monotonic() - started < WITHIN, "instance b still accepts the revoked key"
            time.sleep(0.05)
    assert answer.status_code == 401 and "revoked" in answer.json()["error"]["message"], answer.text


def test_a_revoked_keys_sse_streams_end_at_once_on_every_instance(pair: tuple[RunningServer, RunningServer]) -> None:
    a, b = pair
    me = make_account(a)
    doomed = add_key(a, me.user_id)
    here, there = SseReader(a, doomed.key, "web"), SseReader(b, doomed.key, "web")
    unaffected = SseReader(b, me.key, "web")

    started = time.monotonic()
    revoke_key(a, doomed.key_id)  # as the dashboard or the CLI does: through instance a's database session
    assert here.ended_within(started, WITHIN), here.events
    assert there.ended_within(started, WITHIN), there.events
    assert [kind for _, kind in here.events][-1] == "revoked"
    assert [kind for _, kind in there.events][-1] == "revoked"
    # Another key of the same user heard the announcement too, checked its own credential, and stays.
    time.sleep(0.3)
    assert unaffected.ended_at is None


@pytest.mark.anyio
async def test_a_revoked_keys_mcp_session_is_ended_and_its_get_stream_closed(
    pair: tuple[RunningServer, RunningServer],
) -> None:
    a, b = pair
    me = make_account(a)
    doomed = add_key(a, me.user_id)
    url = mcp_url(b, session_id(me.user_id, "web", "agent"))
    async with httpx.AsyncClient(timeout=30) as http:
        session_headers = await raw_session(http, url, doomed.key)
        ended = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(hold_get_stream, http, url, session_headers, ended)
            await anyio.sleep(0.3)  # the GET stream is open
            started = time.monotonic()
            await anyio.to_thread.run_sync(lambda: revoke_key(a, doomed.key_id))
            with anyio.fail_after(WITHIN):
                await ended.wait()
            took = time.monotonic() - started
        # The session is gone: its id answers as if it never existed (and the key itself is refused anyway).
        gone = await http.post(
            url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers={**session_headers}
        )
    assert took < WITHIN
    assert gone.status_code in (401, 404), gone.text


@pytest.mark.anyio
async def test_an_idle_listen_stream_ends_at_once_when_its_key_is_revoked(
    pair: tuple[RunningServer, RunningServer],
) -> None:
    a, b = pair
    me = make_account(a)
    listener = add_key(a, me.user_id)
    async with agent_and_raw_listener(b, me.user_id, "idle", me.key, listener.key) as (_, frames):
        with anyio.fail_after(60):
            ack = await frames.receive()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        started = time.monotonic()
        # No event will come: only the announced revocation can end this stream.
        await anyio.to_thread.run_sync(lambda: revoke_key(a, listener.key_id))
        with anyio.fail_after(WITHIN):
            last = await frames.receive()
    assert time.monotonic() - started < WITHIN
    assert last["id"] == "listen-raw" and "revoked" in last["error"]["message"], last


def test_revoking_an_oauth_token_at_the_endpoint_ends_its_streams(pair: tuple[RunningServer, RunningServer]) -> None:
    """/oauth/revoke runs inside authlib on a synchronous session: its revocations are announced all the same."""
    from tests.oauth.conftest import exchange, get_code, new_pkce, register
    from tests.web.conftest import Browser

    a, _ = pair  # (a token is bound to one instance's URL: the cross-instance path is the key tests' to show)
    browser = Browser(a).signup()
    client = register(a)
    pkce = new_pkce()
    code = get_code(browser, client["client_id"], pkce, f"{a.base_url}/v1")
    issued = exchange(a, client["client_id"], code, pkce).json()
    stream = SseReader(a, issued["access_token"], "oauth")
    started = time.monotonic()
    revoked = httpx.post(
        f"{a.base_url}/oauth/revoke", data={"token": issued["refresh_token"], "client_id": client["client_id"]}
    )
    assert revoked.status_code == 200, revoked.text
    assert stream.ended_within(started, WITHIN), stream.events
    assert [kind for _, kind in stream.events][-1] == "revoked"
    browser.close()


def test_no_event_is_sent_to_a_stream_after_its_revocation(pair: tuple[RunningServer, RunningServer]) -> None:
    a, _ = pair
    me = make_account(a)
    doomed = add_key(a, me.user_id)
    stream = SseReader(a, doomed.key, "quiet")
    started = time.monotonic()
    revoke_key(a, doomed.key_id)
    assert stream.ended_within(started, WITHIN)
    with a.client(me.key) as http:
        http.post("/v1/sessions/quiet/changes", json={"agent": "x", "changes_summary": "after"})
    assert "change" not in [kind for _, kind in stream.events], stream.events
