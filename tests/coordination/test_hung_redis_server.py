"""A whole server whose Redis hangs (connections open, nothing answered, as under SIGSTOP), over real HTTP.

Before the shared breaker: a coordination call answered 503 after 19 s, /readyz took 6-18 s, and every authenticated
request waited about 1 s for the rate limiter. Now the first caller to find the hang pays at most its budget, and
everyone after it goes on (memories) or fails (coordination) at once, until Redis answers again.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from tests.conftest import _settings
from tests.coordination.test_redis_outage import Proxy
from tests.harness import RunningServer, make_account, serve

pytestmark = [pytest.mark.redis]

# Each of these calls takes at most the 2 s budget on a quiet machine: a limit that only catches a hang.
HANG = 30.0


class ThreadedProxy:
    """The outage tests' proxy, on a loop of its own so that a synchronous test can hang and resume it."""

    def __init__(self, redis_url: str) -> None:
        parsed = urlparse(redis_url)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy = self._run(self._make(parsed.hostname or "127.0.0.1", parsed.port or 6379))

    async def _make(self, host: str, port: int) -> Proxy:
        proxy = Proxy(host, port)
        await proxy.start()
        return proxy

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def hang(self) -> None:
        self.loop.call_soon_threadsafe(self.proxy.hang)

    def resume(self) -> None:
        self.loop.call_soon_threadsafe(self.proxy.resume)

    def close(self) -> None:
        self._run(self.proxy.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def hung(
    pg_database_url: str, redis_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, ThreadedProxy]]:
    proxy = ThreadedProxy(redis_url)
    db = urlparse(redis_url).path or "/0"
    settings = _settings(
        tmp_path_factory.mktemp("hung-redis"), pg_database_url, redis_url=f"redis://127.0.0.1:{proxy.proxy.port}{db}"
    )
    try:
        with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
            yield server, proxy
    finally:
        proxy.close()


def _timed(call: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def _metric(http: httpx.Client, name: str) -> float:
    total = 0.0
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(name):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_hung_redis_leaves_memory_calls_working_and_coordination_failing_through_the_breaker(
    hung: tuple[RunningServer, ThreadedProxy],
) -> None:
    server, proxy = hung
    me = make_account(server)
    with server.client(me.key) as http:
        assert http.post("/v1/memories", json={"content": "deploys go through fly"}).status_code == 201
        claim = {"agent": "a", "file_paths": ["x.py"]}
        assert http.post("/v1/sessions/web/claims", json=claim).status_code == 200

        proxy.hang()
        try:
            # Each limit below only catches a hang (the budget is 2 s; before the breaker this call took 19 s);
            # that the answers come from the breaker, without waiting on Redis, is in what they say.
            first, first_took = _timed(lambda: http.post("/v1/sessions/web/claims", json=claim))
            assert first.status_code == 503, first.text
            assert "coordination unavailable" in first.json()["error"]["message"]
            assert first_took < HANG, f"the first coordination call took {first_took:.2f} s"

            second, second_took = _timed(lambda: http.post("/v1/sessions/web/claims", json=claim))
            assert second.status_code == 503 and "not answering" in second.json()["error"]["message"]
            assert second_took < HANG, f"with the breaker open, a coordination call took {second_took:.2f} s"

            ready, ready_took = _timed(lambda: http.get("/readyz"))
            assert ready.status_code == 200 and ready.json()["status"] == "degraded"
            assert ready.json()["checks"]["coordination"]["status"] == "error"
            assert "not answering" in ready.json()["checks"]["coordination"]["error"], "the breaker's answer"
            assert ready_took < HANG, f"/readyz took {ready_took:.2f} s"

            # Memories do not need Redis: the rate limiter counts in-process, without waiting, and says so.
            fallbacks = _metric(http, 'engram_redis_fallbacks_total{component="quotas"}')
            for _ in range(5):
                found, took = _timed(lambda: http.post("/v1/memories/search", json={"query": "how do we deploy"}))
                assert found.status_code == 200 and found.json()["results"], found.text
                assert took < HANG, f"a search under a hung Redis took {took:.2f} s"
            assert _metric(http, 'engram_redis_fallbacks_total{component="quotas"}') >= fallbacks + 5
            assert _metric(http, "engram_redis_up") == 0
        finally:
            proxy.resume()

        deadline = time.monotonic() + 60
        while (answer := http.post("/v1/sessions/web/claims", json=claim)).status_code == 503:
            assert time.monotonic() < deadline, "coordination did not come back after Redis answered again"
            time.sleep(0.05)
        assert answer.status_code == 200, answer.text
        assert http.get("/readyz").json()["status"] == "ready"
        assert _metric(http, "engram_redis_up") == 1
