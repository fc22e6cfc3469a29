"""Every memory write appends its version to the change log, in the transaction that writes the memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError

from app.accounts.principal import Principal, scopes_for
from app.errors import NotFound
from app.memories.schemas import MemoryIn, MemoryPatch
from tests.sync.conftest import node_settings, open_node


@pytest.mark.anyio
async def test_add_update_and_delete_each_append_the_version_they_wrote(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        who = await node.user()
        first = await node.add(who, "we deploy with fly", tags=["ops"])
        second = await node.add(who, "the API pages with cursors")
        await node.container.memories.update(who, None, first, MemoryPatch(content="we deploy with fly.io"))
        await node.container.memories.delete(who, None, [second])

        log = await node.log(who.user_id)
        assert [(c.memory_id, c.op) for c in log] == [
            (first, "upsert"),
            (second, "upsert"),
            (first, "upsert"),
            (second, "delete"),
        ]
        assert [c.seq for c in log] == sorted(c.seq for c in log)
        hlcs = [c.hlc for c in log]
        assert hlcs == sorted(hlcs) and len(set(hlcs)) == len(hlcs), "every write gets a newer version"
        assert {c.origin for c in log} == {node.sync.node_id}
        records = {r.id: r for r in await node.records(who.user_id)}
        # The record carries the version of its last write.
        assert (records[first].hlc, records[first].origin) == (log[2].hlc, log[2].origin)
        assert (records[second].hlc, records[second].deleted_at is not None) == (log[3].hlc, True)


@pytest.mark.anyio
async def test_a_write_that_fails_appends_nothing(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        who = await node.user()
        kept = await node.add(who, "kept")
        with pytest.raises(NotFound):  # the second id does not exist: all or none, so nothing is deleted
            await node.container.memories.delete(who, None, [kept, "7b0e3a52-4a5c-4f0e-9d0e-000000000000"])
        nobody = Principal("u_nobody", scopes_for("write"))
        with pytest.raises(IntegrityError):  # no such user: the memory row is refused, and its log row with it
            await node.container.memories.add(nobody, None, [MemoryIn(content="orphan")])
        assert [(c.memory_id, c.op) for c in await node.log()] == [(kept, "upsert")]


@pytest.mark.anyio
async def test_the_clock_resumes_above_every_version_after_a_restart(tmp_path: Path, embedder: Any) -> None:
    settings = node_settings(tmp_path)
    async with open_node(settings, embedder) as node:
        who = await node.user()
        memory = await node.add(who, "first")
        node_id = node.sync.node_id
        # A version from a clock far ahead, as a change pulled from elsewhere could bring.
        ahead = node.sync.changes.clock.last + (10**9 << 16)
        async with node.container.db.session() as session:
            record = (await node.records(who.user_id))[0]
            record.hlc = ahead
            session.add(record)
    async with open_node(settings, embedder) as node:
        assert node.sync.node_id == node_id, "the node keeps its id"
        await node.container.memories.update(who, None, memory, MemoryPatch(content="second"))
        assert (await node.log())[-1].hlc > ahead
