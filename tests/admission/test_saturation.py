"""A saturated server, driven over real HTTP and MCP: it refuses with 503 or 429 and Retry-After, never a 500; what
it refuses stores nothing, what it admits is committed, and a quiet tenant is served through another's flood."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from sqlalchemy import func, select

from app.memories.models import MemoryRecord
from app.migrate import upgrade_to_head
from tests.conftest import _settings
from tests.harness import Account, RunningServer, make_account, serve
from tests.mcp.conftest import connect

REFUSALS = {429: "over_fair_share", 503: "overloaded"}


def _server(tmp: Any, embedder: object, **admission: Any) -> Iterator[RunningServer]:
    url = f"sqlite+aiosqlite:///{tmp / 'engram.db'}"
    upgrade_to_head(url)
    settings = _settings(tmp, url, **{f"admission_{name}": value for name, value in admission.items()})
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


@pytest.fixture
def one_at_a_time(tmp_path: Any, embedder: object) -> Iterator[RunningServer]:
    """One request in service at a time, and almost no patience for the rest: saturated by a handful of clients."""
    yield from _server(
        tmp_path,
        embedder,
        initial_limit=1,
        min_limit=1,
        max_limit=1,
        queue_timeout_seconds=0.005,
        overloaded_wait_seconds=0.005,
    )


@pytest.fixture
def fair(tmp_path: Any, embedder: object) -> Iterator[RunningServer]:
    """One request in service at a time; a tenant may hold two; the patient queue serves the others in turn."""
    yield from _server(
        tmp_path, embedder, initial_limit=1, min_limit=1, max_limit=1, queue_timeout_seconds=30.0, min_share=2
    )


async def _burst(server: RunningServer, account: Account, n: int, path: str, body: Any) -> list[httpx.Response]:
    headers = {"Authorization": f"Bearer {account.key}"}
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60) as http:
        return list(await asyncio.gather(*(http.post(path, json=body(i)) for i in range(n))))


def _check_refusal(response: httpx.Response) -> None:
    assert response.status_code in REFUSALS, response.text
    assert int(response.headers["retry-after"]) >= 1
    assert response.json()["error"]["code"] == REFUSALS[response.status_code]


def _stored(server: RunningServer, user_id: str) -> int:
    async def count() -> int:
        async with server.container.db.session() as session:
            query = select(func.count()).select_from(MemoryRecord).where(MemoryRecord.user_id == user_id)
            return int((await session.execute(query)).scalar_one())

    result: int = server.run(count())
    return result


def test_a_saturated_server_refuses_with_503_and_retry_after_and_stores_only_what_it_admitted(
    one_at_a_time: RunningServer,
) -> None:
    server = one_at_a_time
    alice = make_account(server)
    responses = asyncio.run(_burst(server, alice, 30, "/v1/memories", lambda i: {"content": f"fact number {i}"}))
    admitted = [r for r in responses if r.status_code == 201]
    refused = [r for r in responses if r.status_code != 201]
    assert refused, "thirty adds at once with one slot and 5 ms of patience: some must be refused"
    for response in refused:
        _check_refusal(response)
        assert response.status_code == 503  # alone, alice is never over her share: the server is full
    # What was admitted is committed; what was refused left nothing behind.
    assert _stored(server, alice.user_id) == len(admitted)
    with server.client(alice.key) as http:
        for response in admitted:
            memory = response.json()
            assert http.get(f"/v1/memories/{memory['id']}").json()["content"] == memory["content"]


def test_a_quiet_tenant_is_served_through_another_tenants_flood(fair: RunningServer) -> None:
    server = fair
    flood, quiet = make_account(server), make_account(server)

    async def scenario() -> tuple[list[httpx.Response], list[httpx.Response]]:
        flood_over = asyncio.Event()

        async def flooding() -> list[httpx.Response]:
            out: list[httpx.Response] = []
            try:
                for _ in range(3):
                    out += await _burst(server, flood, 20, "/v1/memories/search", lambda i: {"query": f"deploy {i}"})
            finally:
                flood_over.set()
            return out

        async def quietly() -> list[httpx.Response]:
            # Searching until the flood is over (ten at least): a quiet tenant that finished first would leave the
            # flood alone on the server, where nobody else waits and it is never over its share.
            out: list[httpx.Response] = []
            headers = {"Authorization": f"Bearer {quiet.key}"}
            async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60) as http:
                while len(out) < 10 or not flood_over.is_set():
                    query = f"who owns billing {len(out)}"
                    out.append(await http.post("/v1/memories/search", json={"query": query}))
            return out

        return await asyncio.gather(flooding(), quietly())  # type: ignore[return-value]

    flooded, served = asyncio.run(scenario())
    assert [r.status_code for r in served] == [200] * len(served)
    over = [r for r in flooded if r.status_code == 429]
    assert over, "twenty at once from one tenant, with a share of two: the rest are over its share"
    for response in flooded:
        if response.status_code != 200:
            _check_refusal(response)


def test_streams_never_hold_a_slot(one_at_a_time: RunningServer) -> None:
    server = one_at_a_time
    alice = make_account(server)
    with server.client(alice.key) as http, http.stream("GET", "/v1/sessions/s1/events") as stream:
        assert stream.status_code == 200
        # The only slot is free: a request goes straight in (it could not wait even 5 ms for one).
        for _ in range(3):
            assert http.post("/v1/memories/search", json={"query": "anything"}).status_code == 200


@pytest.mark.anyio
async def test_mcp_tool_calls_are_refused_in_the_json_rpc_shape(one_at_a_time: RunningServer) -> None:
    server = one_at_a_time
    alice = make_account(server)
    async with connect(server, alice.key, alice.user_id) as client:
        calls = [client.call_tool("add_memories", {"memories": [{"content": f"fact {i}"}]}) for i in range(20)]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
    refused = [o for o in outcomes if isinstance(o, MCPError)]
    assert refused, "twenty tool calls at once with one slot and 5 ms of patience: some must be refused"
    for error in refused:
        assert error.error.data["code"] == "overloaded" and error.error.data["retry_after_seconds"] >= 1
    others = [o for o in outcomes if not isinstance(o, MCPError)]
    assert not [o for o in others if isinstance(o, BaseException)], others
    assert _stored(server, alice.user_id) == len(others)


def test_sync_pushes_take_a_slot_and_long_polls_do_not(one_at_a_time: RunningServer) -> None:
    from tests.sync.test_protocol import pull, push, token_for, wire

    server = one_at_a_time
    alice = make_account(server)
    token = token_for(server, alice.user_id)
    # A long poll waits for news without a slot: the only slot stays free for the pushes below.
    waiting: dict[str, httpx.Response] = {}
    poller = threading.Thread(target=lambda: waiting.setdefault("r", pull(server, token, node="n_waiter", wait=5)))
    poller.start()

    async def pushes() -> list[httpx.Response]:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60) as http:
            batches = [{"node_id": "n_laptop", "changes": [wire(str(uuid.uuid4()), f"pushed {i}")]} for i in range(30)]
            return list(await asyncio.gather(*(http.post("/sync/v1/push", json=b) for b in batches)))

    responses = asyncio.run(pushes())
    admitted = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code != 200]
    assert admitted and refused, [r.status_code for r in responses]
    for response in refused:
        _check_refusal(response)
    assert _stored(server, alice.user_id) == len(admitted), "a refused push stores nothing"
    assert push(server, token, [wire(str(uuid.uuid4()), "alone")]).status_code == 200
    poller.join(timeout=60)
    assert waiting["r"].status_code == 200


@pytest.fixture
def impatient_database(tmp_path: Any, embedder: object) -> Iterator[RunningServer]:
    """A server that waits at most 0.2 s for SQLite's write lock, and checks every key in the database each time."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    upgrade_to_head(url)
    settings = _settings(tmp_path, url, database_busy_timeout_seconds=0.2, verified_key_seconds=0)
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def test_a_write_that_cannot_get_the_database_lock_in_time_hears_503_and_stores_nothing(
    impatient_database: RunningServer, tmp_path: Any
) -> None:
    server = impatient_database
    alice = make_account(server)
    with server.client(alice.key) as http:
        kept = http.post("/v1/memories", json={"content": "written before the lock was taken"}).json()
        # Another process holds the write lock (a stuck writer, a long migration): writes wait 0.2 s, then are told.
        holder = sqlite3.connect(tmp_path / "engram.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            started = time.monotonic()
            refused = [
                http.post("/v1/memories", json={"content": "written while the database is locked"}),
                http.patch(f"/v1/memories/{kept['id']}", json={"content": "edited while the database is locked"}),
            ]
            # Hang-only: each waited 0.2 s for the lock; SQLite's default patience would be 30 s apiece.
            assert time.monotonic() - started < 20
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        for response in refused:
            assert response.status_code == 503, response.text
            _check_refusal(response)
        assert _stored(server, alice.user_id) == 1, "the refused add left nothing behind"
        assert http.get(f"/v1/memories/{kept['id']}").json()["content"] == "written before the lock was taken"
        assert http.post("/v1/memories", json={"content": "written once the lock is free"}).status_code == 201


def test_a_key_first_used_while_the_database_is_locked_still_reads_and_its_use_is_recorded_later(
    impatient_database: RunningServer, tmp_path: Any
) -> None:
    """When a key was last used is for its owner's eyes: a database too busy to record it never fails the request
    (it did, as a 500, under 200 clients: the write starved on SQLite's lock, outside the group commit)."""
    server = impatient_database
    alice = make_account(server)
    holder = sqlite3.connect(tmp_path / "engram.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with server.client(alice.key) as http:
            listed = http.get("/v1/memories")  # the key's first use: its time cannot be written now
        assert listed.status_code == 200, listed.text
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert _last_used(server, alice.key_id) is None  # nothing recorded while locked, and nothing broken
    with server.client(alice.key) as http:
        assert http.get("/v1/memories").status_code == 200
    assert _last_used(server, alice.key_id) is not None


def _last_used(server: RunningServer, key_id: str) -> object:
    from sqlalchemy import select

    from app.accounts.models import ApiKey

    async def read() -> object:
        async with server.container.db.session() as session:
            return (await session.execute(select(ApiKey.last_used_at).where(ApiKey.id == key_id))).scalar_one()

    return server.run(read())
