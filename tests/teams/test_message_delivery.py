"""Each message reaches each addressee's inbox once: across a server restart, and under concurrent inbox calls."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from app.migrate import upgrade_to_head
from tests.conftest import _settings
from tests.harness import RunningServer, make_account, serve
from tests.teams.conftest import Agent


def contents(inbox: dict[str, Any]) -> list[str]:
    return [m["content"] for m in inbox["messages"]]


def test_unread_messages_survive_a_restart_and_read_ones_do_not_come_back(
    tmp_path: Path, embedder: object, redis_url: str
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    upgrade_to_head(url)
    settings = _settings(tmp_path, url, redis_url=redis_url)
    with serve(settings, embedder=embedder) as first:  # type: ignore[arg-type]
        me = make_account(first)
        with first.client(me.key) as http:
            a, b, c = (Agent(http, "durable", name) for name in ("a", "b", "c"))
            b.join("backend")
            c.inbox()
            for i in range(3):
                a.send("*", f"all {i}", kind="status")
            a.send("b", "b only")
            a.send("role:backend", "backend only")
            assert contents(b.inbox(limit=2)) == ["all 0", "all 1"]

    with serve(settings, embedder=embedder) as second, second.client(me.key) as http:  # type: ignore[arg-type]
        a, b, c = (Agent(http, "durable", name) for name in ("a", "b", "c"))
        assert contents(b.inbox()) == ["all 2", "b only", "backend only"]
        assert b.inbox()["messages"] == []
        assert contents(c.inbox()) == ["all 0", "all 1", "all 2"]
        assert c.inbox()["messages"] == []
        read = b.inbox(unread_only="false")["messages"]
        assert len(read) == 5 and all(m["read"] for m in read)


@pytest.mark.parametrize("name", ["api", "sqlite_api"])
def test_concurrent_inbox_calls_of_one_agent_deliver_each_message_once(
    request: pytest.FixtureRequest, name: str
) -> None:
    server: RunningServer = request.getfixturevalue(name)
    me = make_account(server)
    sender = Agent(server.client(me.key), "once", "sender")
    Agent(server.client(me.key), "once", "reader").inbox()
    for i in range(30):
        sender.send("reader", f"m{i}", kind="status")

    def drain(_: int) -> list[str]:
        # A client of its own per caller, as two processes of the same agent would be.
        with server.client(me.key) as http:
            return contents(Agent(http, "once", "reader").inbox(limit=7))

    with ThreadPoolExecutor(8) as pool:
        batches = list(pool.map(drain, range(8)))
    delivered = [m for batch in batches for m in batch]
    assert len(delivered) == len(set(delivered)), "a message was delivered twice"
    while batch := drain(0):  # what lost every race is still unread, and comes now
        delivered += batch
    assert sorted(delivered, key=lambda m: int(m[1:])) == [f"m{i}" for i in range(30)]
