"""Three nodes and an edge converge, whatever happens: random concurrent writes everywhere (REST and MCP), the edge
stopped and started again, a node killed with SIGKILL in the middle of a push, batches sent twice and out of order.

At the end every node and the edge hold exactly the same memories (by a digest over content, tags, metadata,
scope, session, agent and deletions), and every acknowledged write is there. A memory made and deleted on a node
while the edge was away is the one exception: the edge keeps nothing of it (app.sync.apply), so it is a tombstone on
that node and absent elsewhere, which is the same thing. The numbers are kept small enough to
run in about a minute; bench/sync.py runs the big ones.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.sync.processes import Deployment, HostedEdge, link_with_client, search

OPS_PER_PHASE = 8
CONVERGE_SECONDS = 120.0


@dataclass
class Ack:
    """An acknowledged write: what the API answered 2xx to."""

    where: str
    op: str
    memory_id: str
    content: str | None = None


@dataclass
class Writer:
    """Writes at random on one deployment, as its user, over REST and MCP, and keeps what was acknowledged."""

    name: str
    base_url: str
    user_id: str
    key: str
    rng: random.Random
    acks: list[Ack] = field(default_factory=list)
    known: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, ops: int) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=self.base_url, headers=headers, timeout=30) as http:
            for n in range(ops):
                roll = self.rng.random()
                if roll < 0.15:
                    self._mcp(n)
                elif roll < 0.55 or not self.known:
                    self._add(http, n)
                elif roll < 0.85:
                    self._update(http, n)
                else:
                    self._delete(http)
                if self.rng.random() < 0.2:
                    self._learn(http)

    def _record(self, ack: Ack) -> None:
        with self.lock:
            self.acks.append(ack)

    def _body(self, n: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "content": f"{self.name} note {n} {uuid.uuid4().hex[:8]} about {self.rng.choice(TOPICS)}",
            "tags": self.rng.sample(["ops", "api", "db", "ui"], self.rng.randrange(0, 3)),
            "metadata": {"n": n, "by": self.name},
        }
        if self.rng.random() < 0.3:
            body.update(session="proj", agent=self.rng.choice(["ada", "bob"]), scope=self.rng.choice(SCOPES))
        return body

    def _add(self, http: httpx.Client, n: int) -> None:
        body = self._body(n)
        response = http.post("/v1/memories", json=body)
        if response.status_code == 201:
            memory = response.json()
            self.known.append(memory["id"])
            self._record(Ack(self.name, "add", memory["id"], body["content"]))

    def _update(self, http: httpx.Client, n: int) -> None:
        memory_id = self.rng.choice(self.known)
        content = f"{self.name} edit {n} {uuid.uuid4().hex[:8]} about {self.rng.choice(TOPICS)}"
        response = http.patch(f"/v1/memories/{memory_id}", json={"content": content, "tags": ["edited"]})
        if response.status_code == 200:
            self._record(Ack(self.name, "update", memory_id, content))

    def _delete(self, http: httpx.Client) -> None:
        memory_id = self.rng.choice(self.known)
        if http.delete(f"/v1/memories/{memory_id}").status_code == 200:
            self._record(Ack(self.name, "delete", memory_id))
            self.known.remove(memory_id)

    def _learn(self, http: httpx.Client) -> None:
        """Writes of the others, as far as they have arrived here: updates and deletes of them race."""
        page = http.get("/v1/memories", params={"limit": 20}).json().get("memories", [])
        for memory in page:
            if memory["id"] not in self.known:
                self.known.append(memory["id"])

    def _mcp(self, n: int) -> None:
        asyncio.run(self._mcp_ops(n))

    async def _mcp_ops(self, n: int) -> None:
        import httpx2
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.key}"}, timeout=httpx2.Timeout(30))
        async with http:
            url = f"{self.base_url}/mcp/v2/convergence/{self.user_id}"
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                body = self._body(n)
                body.pop("session", None), body.pop("agent", None), body.pop("scope", None)
                added = await client.call_tool("add_memories", {"memories": [body]})
                if added.is_error or added.structured_content is None:
                    return
                memory_id = added.structured_content["results"][0]["id"]
                self.known.append(memory_id)
                self._record(Ack(self.name, "add", memory_id, body["content"]))
                if self.rng.random() < 0.5:
                    content = f"{self.name} mcp edit {n} {uuid.uuid4().hex[:8]}"
                    updated = await client.call_tool("update_memory", {"memory_id": memory_id, "content": content})
                    if not updated.is_error:
                        self._record(Ack(self.name, "update", memory_id, content))


TOPICS = ["deploys", "caching", "the schema", "billing", "retries", "the release train", "feature flags"]
SCOPES = ["user", "session", "agent"]


def _node_state(node: Deployment, user_id: str) -> dict[str, tuple[Any, ...]]:
    with sqlite3.connect(f"file:{node.data_dir / 'engram.db'}?mode=ro", uri=True, timeout=30) as db:
        rows = db.execute(
            "SELECT id, content, tags, metadata, scope, session, agent, deleted_at IS NOT NULL FROM memories "
            "WHERE user_id = ?",
            (user_id,),
        ).fetchall()
    return {r[0]: (r[1], json.loads(r[2]), json.loads(r[3]), r[4], r[5], r[6], bool(r[7])) for r in rows}


def _edge_state(edge: HostedEdge, user_id: str) -> dict[str, tuple[Any, ...]]:
    from sqlalchemy import select

    from app.memories.models import MemoryRecord

    async def read() -> dict[str, tuple[Any, ...]]:
        async with edge.container.db.session() as session:
            rows = (await session.execute(select(MemoryRecord).where(MemoryRecord.user_id == user_id))).scalars()
            return {
                r.id: (r.content, r.tags, r.metadata_, r.scope, r.session, r.agent, r.deleted_at is not None)
                for r in rows
            }

    result: dict[str, tuple[Any, ...]] = edge.run(read())
    return result


def _replay(edge: HostedEdge, token: str) -> int:
    """Everything the edge holds, pushed back to it twice, in reverse and in odd batches: applied never again."""
    changes: list[dict[str, Any]] = []
    cursor = ""
    headers = {"Authorization": f"Bearer {token}"}
    while True:
        page = httpx.get(f"{edge.url}/sync/v1/pull", params={"cursor": cursor, "node": "n_replay"}, headers=headers)
        page.raise_for_status()
        changes += page.json()["changes"]
        cursor = page.json()["cursor"]
        if not page.json()["more"]:
            break
    applied = 0
    for batch in (changes[::-1], changes):
        for start in range(0, len(batch), 7):
            pushed = httpx.post(
                f"{edge.url}/sync/v1/push",
                json={"node_id": "n_replay", "changes": batch[start : start + 7]},
                headers=headers,
                timeout=60,
            )
            pushed.raise_for_status()
            applied += pushed.json()["applied"]
    return applied


@pytest.fixture
def edge_settings(tmp_path: Path, fresh_pg_url: str) -> Any:
    from tests.conftest import _settings

    return _settings(tmp_path / "edge", fresh_pg_url, sync_retry_max_seconds=0.5)


@pytest.mark.slow
def test_three_nodes_and_an_edge_converge_through_restarts_kills_and_replays(
    tmp_path: Path, edge_settings: Any, embedder: Any
) -> None:
    from tests.harness import serve
    from tests.oauth.conftest import make_sync_client, sync_token

    rng = random.Random(20261123)
    nodes = [Deployment(tmp_path / f"node{i}") for i in range(3)]
    with ExitStack() as stack:
        for node in nodes:
            node.setup()
            stack.callback(node.stop)
        edge_stack = ExitStack()
        edge = HostedEdge(edge_stack.enter_context(serve(edge_settings, embedder=embedder)))
        edge_user, edge_key = edge.user()
        locals_ = [node.user() for node in nodes]
        _parallel(node.start for node in nodes)
        _parallel(
            (lambda n=n, i=i: link_with_client(n, edge, locals_[i][0], edge_user, f"node {i}"))
            for i, n in enumerate(nodes)
        )
        writers = [
            Writer(f"node{i}", n.url, locals_[i][0], locals_[i][1], random.Random(rng.random()))
            for i, n in enumerate(nodes)
        ]
        # The edge comes back on the same port: its writer keeps the URL.
        edge_writer = Writer("edge", edge.url, edge_user, edge_key, random.Random(rng.random()))
        everyone = [*writers, edge_writer]

        _parallel((lambda w=w: w.run(OPS_PER_PHASE)) for w in everyone)  # everyone, at once
        edge_stack.close()  # the edge goes away...
        _parallel((lambda w=w: w.run(OPS_PER_PHASE)) for w in writers)  # ...the nodes go on writing...
        edge = HostedEdge(edge_stack.enter_context(serve(edge_settings, embedder=embedder)))  # ...it comes back
        stack.callback(edge_stack.close)

        # A burst on one node, and SIGKILL while it pushes: what it acknowledged must still get everywhere.
        victim = writers[1]
        with httpx.Client(base_url=nodes[1].url, headers={"Authorization": f"Bearer {victim.key}"}) as http:
            for n in range(6):
                victim._add(http, 100 + n)
        nodes[1].kill()
        nodes[1].start()

        token = sync_token(edge.server, make_sync_client(edge.server, edge_user, "replayer")).json()["access_token"]
        assert _replay(edge, token) == 0, "versions the edge has are never applied again"
        _parallel((lambda w=w: w.run(OPS_PER_PHASE)) for w in everyone)

        deadline = time.monotonic() + CONVERGE_SECONDS
        while True:
            states = [_edge_state(edge, edge_user), *(_node_state(n, locals_[i][0]) for i, n in enumerate(nodes))]
            if all(_same(states[0], s) for s in states[1:]):
                break
            assert time.monotonic() < deadline, _difference(states)
            time.sleep(0.5)

        final = states[0]
        acks = [a for w in everyone for a in w.acks]
        assert len(acks) > 40
        _every_acknowledged_write_is_there(final, acks)
        for node in nodes:
            [link] = node.status()["links"]
            assert (link["pending"], link["state"], link["error"]) == (0, "ok", None), link
        # Searchable where it arrived, on every node.
        live = [(mid, s[0]) for mid, s in final.items() if not s[6] and s[3] == "user"]
        for mid, content in rng.sample(live, min(3, len(live))):
            for i, node in enumerate(nodes):
                assert mid in {r["id"] for r in search(node, locals_[i][1], content, limit=5)}


def _every_acknowledged_write_is_there(final: dict[str, tuple[Any, ...]], acks: list[Ack]) -> None:
    by_memory: dict[str, list[Ack]] = {}
    for ack in acks:
        by_memory.setdefault(ack.memory_id, []).append(ack)
    for memory_id, its in by_memory.items():
        if memory_id not in final:
            assert any(a.op == "delete" for a in its), f"acknowledged memory {memory_id} is missing"
            continue
        content, deleted = final[memory_id][0], final[memory_id][6]
        written = {a.content for a in its if a.op in ("add", "update")}
        if deleted:
            assert any(a.op == "delete" for a in its), f"{memory_id} is deleted, but no delete was acknowledged"
        else:
            assert content in written or not written, f"{memory_id} holds content nobody wrote"
        if len({a.where for a in its}) == 1:  # one writer, in order: its last write wins
            last = its[-1]
            assert deleted == (last.op == "delete"), f"{memory_id}: not as its only writer left it"
            if not deleted:
                assert content == last.content, f"{memory_id}: not its only writer's last version"


def _same(one: dict[str, tuple[Any, ...]], other: dict[str, tuple[Any, ...]]) -> bool:
    """The same memories: equal where both hold one, and a memory only one of them holds is deleted there."""
    both = one.keys() & other.keys()
    return all(one[k] == other[k] for k in both) and all(s[k][6] for s in (one, other) for k in s.keys() - both)


def _difference(states: list[dict[str, tuple[Any, ...]]]) -> str:
    first = states[0]
    lines = []
    for i, state in enumerate(states[1:], 1):
        missing = {k for s in (first, state) for k in s.keys() - (first.keys() & state.keys()) if not s[k][6]}
        differ = [k for k in set(first) & set(state) if first[k] != state[k]]
        lines.append(f"state {i}: {len(missing)} live ids not in both, {len(differ)} differ, e.g. {differ[:2]}")
    return "not converged: " + "; ".join(lines)


def _parallel(jobs: Iterator[Any] | Any) -> None:
    """Run the callables at once on threads; re-raise the first failure."""
    errors: list[BaseException] = []

    def guard(job: Any) -> None:
        try:
            job()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guard, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
