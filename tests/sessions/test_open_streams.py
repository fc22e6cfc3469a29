"""Event streams a user holds open are capped (``ENGRAM_SSE_STREAMS_PER_USER``): one more is a 429 with Retry-After,
other users are not touched by it, and closing a stream frees its place."""

from __future__ import annotations

import time
from contextlib import ExitStack

import httpx

from tests.harness import RunningServer, make_account

EVENTS = "/v1/sessions/web/events"


def _open(client: httpx.Client, stack: ExitStack) -> httpx.Response:
    return stack.enter_context(client.stream("GET", EVENTS))


def test_a_user_holding_the_most_streams_is_refused_one_more_until_it_closes_one(api: RunningServer) -> None:
    cap = api.container.settings.sse_streams_per_user
    me, other = make_account(api), make_account(api)
    limits = httpx.Limits(max_connections=cap + 10)
    with ExitStack() as stack:
        mine = stack.enter_context(api.client(me.key, limits=limits))
        held = ExitStack()
        stack.enter_context(held)
        for _ in range(cap):
            assert _open(mine, held).status_code == 200
        with mine.stream("GET", EVENTS) as refused:
            assert refused.status_code == 429
            assert int(refused.headers["Retry-After"]) >= 1
            assert "open event streams" in refused.read().decode()

        with api.client(other.key) as theirs, theirs.stream("GET", EVENTS) as response:
            assert response.status_code == 200  # another user's cap is its own

        held.close()  # every stream of mine ends; the server notices each disconnect and frees its place
        deadline = time.monotonic() + 30
        while True:
            with mine.stream("GET", EVENTS) as again:
                if again.status_code == 200:
                    break
            assert time.monotonic() < deadline, "closed streams never gave their places back"
            time.sleep(0.2)
