"""An open REST SSE stream through a Redis outage: it is told (a ``reset`` event) or it ends, never silent for good.

The server reaches the shared Redis through the outage tests' proxy, which this test cuts (connections refused, as a
stopped Redis), hangs (connections open, nothing answered, as under SIGSTOP), or strands: every connection open at
that moment is black-holed for good while new ones work, as after a Redis restarted behind a NAT or a failover. A
stranded subscriber hears no error at all, and the breaker may open and close again between two looks at it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pytest

from tests.accounts.test_revocation_reaches_streams import SseReader
from tests.conftest import _settings
from tests.coordination.test_hung_redis_server import ThreadedProxy
from tests.coordination.test_redis_outage import Proxy
from tests.harness import RunningServer, make_account, serve

pytestmark = [pytest.mark.redis]

# Generous: the stream must react to Redis answering again (the breaker probes every 0.25 s), not merely someday.
WITHIN = 15.0


@dataclass(eq=False)
class _Connection:
    subscriber: bool = False
    stranded: bool = False


class StrandingProxy(Proxy):
    """The outage proxy, able to black-hole the connections open now (or only the subscribers') while new ones flow."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self.connections: set[_Connection] = set()

    def strand(self, *, subscribers_only: bool = False) -> None:
        for connection in self.connections:
            connection.stranded |= connection.subscriber or not subscribers_only

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        connection = _Connection()
        self.connections.add(connection)
        self._writers |= {writer, up_writer}
        await asyncio.gather(
            self._carry(reader, up_writer, connection, upstream=True), self._carry(up_reader, writer, connection)
        )
        self._writers -= {writer, up_writer}
        self.connections.discard(connection)

    async def _carry(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connection: _Connection,
        upstream: bool = False,
    ) -> None:
        try:
            while data := await reader.read(65536):
                await self._flowing.wait()
                connection.subscriber |= upstream and b"SUBSCRIBE" in data.upper()
                if connection.stranded:
                    continue  # read and dropped, as packets lost on the way
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.transport.abort()


class ThreadedStrandingProxy(ThreadedProxy):
    async def _make(self, host: str, port: int) -> Proxy:
        proxy = StrandingProxy(host, port)
        await proxy.start()
        return proxy

    def strand(self, *, subscribers_only: bool = False) -> None:
        assert isinstance(self.proxy, StrandingProxy)
        self.loop.call_soon_threadsafe(lambda: self.proxy.strand(subscribers_only=subscribers_only))


@pytest.fixture(scope="module")
def proxied(
    pg_database_url: str, redis_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, ThreadedStrandingProxy]]:
    proxy = ThreadedStrandingProxy(redis_url)
    db = urlparse(redis_url).path or "/0"
    settings = _settings(
        tmp_path_factory.mktemp("sse-outage"), pg_database_url, redis_url=f"redis://127.0.0.1:{proxy.proxy.port}{db}"
    )
    try:
        with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
            yield server, proxy
    finally:
        proxy.close()


def _cut(proxy: ThreadedProxy) -> None:
    proxy._run(proxy.proxy.stop())


def _restore(proxy: ThreadedProxy) -> None:
    proxy._run(proxy.proxy.start())


@pytest.mark.parametrize("outage", ["refused", "hung"])
def test_an_open_sse_stream_is_reset_or_ended_after_a_redis_outage(
    proxied: tuple[RunningServer, ThreadedStrandingProxy], outage: str
) -> None:
    server, proxy = proxied
    me = make_account(server)
    stream = SseReader(server, me.key, "outage")
    with server.client(me.key) as http:
        change = {"agent": "a", "changes_summary": "before"}
        assert http.post("/v1/sessions/outage/changes", json=change).status_code == 200
        deadline = time.monotonic() + WITHIN
        while "change" not in [kind for _, kind in stream.events]:
            assert time.monotonic() < deadline, stream.events
            time.sleep(0.05)

        _cut(proxy) if outage == "refused" else proxy.hang()
        try:
            # Redis is gone long enough for the breaker and every retry to notice.
            deadline = time.monotonic() + WITHIN
            while http.post("/v1/sessions/outage/changes", json=change).status_code != 503:
                assert time.monotonic() < deadline, "the outage was never noticed"
                time.sleep(0.1)
            time.sleep(1.5)
        finally:
            _restore(proxy) if outage == "refused" else proxy.resume()

        deadline = time.monotonic() + WITHIN
        after = {"agent": "a", "changes_summary": "after"}
        while http.post("/v1/sessions/outage/changes", json=after).status_code != 200:
            assert time.monotonic() < deadline, "coordination did not come back"
            time.sleep(0.1)
        deadline = time.monotonic() + WITHIN
        while stream.ended_at is None and "reset" not in [kind for _, kind in stream.events]:
            assert time.monotonic() < deadline, f"the stream went silent: {stream.events}"
            time.sleep(0.1)
    if stream.ended_at is None:
        # Told, then live again: the broadcasts made since reach it.
        kinds = [kind for _, kind in stream.events]
        assert kinds.index("reset") > kinds.index("change")


@pytest.mark.parametrize("stranded", ["every connection", "only the subscriber"])
def test_an_sse_stream_whose_subscription_was_stranded_is_reset_or_ended(
    proxied: tuple[RunningServer, ThreadedStrandingProxy], stranded: str
) -> None:
    """Only the subscriber: nothing else fails and the breaker stays closed; only its own connection can tell."""
    server, proxy = proxied
    me = make_account(server)
    stream = SseReader(server, me.key, "stranded")
    with server.client(me.key) as http:
        change = {"agent": "a", "changes_summary": "before"}
        assert http.post("/v1/sessions/stranded/changes", json=change).status_code == 200
        deadline = time.monotonic() + WITHIN
        while "change" not in [kind for _, kind in stream.events]:
            assert time.monotonic() < deadline, stream.events
            time.sleep(0.05)

        proxy.strand(subscribers_only=stranded == "only the subscriber")
        deadline = time.monotonic() + WITHIN
        after = {"agent": "a", "changes_summary": "after"}
        while http.post("/v1/sessions/stranded/changes", json=after).status_code != 200:
            assert time.monotonic() < deadline, "coordination did not come back"
            time.sleep(0.1)
        deadline = time.monotonic() + WITHIN
        while stream.ended_at is None and "reset" not in [kind for _, kind in stream.events]:
            assert time.monotonic() < deadline, f"the stream went silent: {stream.events}"
            http.post("/v1/sessions/stranded/changes", json=after)
            time.sleep(0.2)
