"""Applying changes from elsewhere: last writer wins by version, the same result in any order, history kept."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from app.errors import Conflict, Forbidden, MemoryTooLarge, ValidationFailed
from app.memories.schemas import MemoryPatch, SearchIn
from app.sync import hlc
from app.sync.outbox import with_vectors
from app.sync.protocol import ChangeWire, Incoming, RecordWire, change_id, encode_vector, incoming
from tests.sync.conftest import Node, node_settings, open_node

T0 = datetime(2026, 11, 1, tzinfo=UTC)
BASE_MS = hlc.wall_ms() - 3_600_000  # versions an hour old, one millisecond apart


def change(
    memory_id: str,
    version: int,
    origin: str,
    op: str = "upsert",
    content: str = "text",
    *,
    vector: list[float] | None = None,
    model: str = "",
    **fields: Any,
) -> ChangeWire:
    stamp = BASE_MS + version
    record = {
        "content": content,
        "scope": "user",
        "tags": [],
        "metadata": {},
        "created_at": T0.isoformat(),
        "updated_at": T0.isoformat(),
        **fields,
    }
    return ChangeWire(
        change_id=change_id(memory_id, stamp << 16, origin, op),
        memory_id=memory_id,
        hlc=hlc.encode(stamp << 16),
        origin=origin,
        op=op,  # type: ignore[arg-type]
        record=RecordWire.model_validate(record),
        vector=encode_vector(model, vector) if vector is not None else None,
    )


def received(node: Node, changes: list[ChangeWire]) -> list[Incoming]:
    return [incoming(c, node.container.engine.model_id, 384) for c in changes]


async def state(node: Node, user_id: str) -> list[tuple[Any, ...]]:
    return [
        (r.id, r.content, r.scope, r.session, r.agent, r.tags, r.metadata_, r.deleted_at is not None, r.hlc, r.origin)
        for r in await node.records(user_id)
    ]


@pytest.mark.anyio
async def test_nodes_converge_whatever_the_order_batches_and_repeats(tmp_path: Path, embedder: Any) -> None:
    rng = random.Random(7)
    memories = [str(uuid.uuid4()) for _ in range(12)]
    origins = ["n_a", "n_b", "n_c"]
    versions: list[ChangeWire] = []
    # Equal clocks on different nodes on purpose (ties are broken by origin); a node never reuses its own.
    stamps = rng.sample([(v, o) for v in range(1, 40) for o in origins], 80)
    for i, (stamp, origin) in enumerate(stamps):
        op = "delete" if rng.random() < 0.25 else "upsert"
        versions.append(
            change(
                rng.choice(memories),
                stamp,
                origin,
                op,
                f"version {i}",
                tags=[f"t{i % 3}"],
                metadata={"i": i},
                scope="session" if i % 2 else "user",
                session="s1" if i % 2 else None,
            )
        )
    async with (
        open_node(node_settings(tmp_path / "one"), embedder) as one,
        open_node(node_settings(tmp_path / "two"), embedder) as two,
    ):
        alice_one, alice_two = await one.user(), await two.user()
        forward = list(versions)
        await one.sync.applier.apply(alice_one.user_id, received(one, forward[:40]))
        await one.sync.applier.apply(alice_one.user_id, received(one, forward[40:]))
        shuffled = versions + rng.sample(versions, 30)  # some sent twice
        rng.shuffle(shuffled)
        for start in range(0, len(shuffled), 7):
            await two.sync.applier.apply(alice_two.user_id, received(two, shuffled[start : start + 7]))
        state_one, state_two = await state(one, alice_one.user_id), await state(two, alice_two.user_id)
        assert state_one == state_two
        # And it is the last writer by (hlc, origin), a delete being a version like any other.
        winners: dict[str, ChangeWire] = {}
        for c in versions:
            if c.memory_id not in winners or c.version > winners[c.memory_id].version:
                winners[c.memory_id] = c
        expected = sorted(
            (mid, c.record.content, c.op == "delete", hlc.decode(c.hlc), c.origin) for mid, c in winners.items()
        )
        assert [(s[0], s[1], s[7], s[8], s[9]) for s in state_one] == expected


@pytest.mark.anyio
async def test_a_losing_concurrent_edit_stays_in_history_naming_the_winner(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        who = await node.user()
        memory = str(uuid.uuid4())
        await node.sync.applier.apply(who.user_id, received(node, [change(memory, 1, "n_a", content="original")]))
        later = change(memory, 5, "n_b", content="edited on b")
        earlier = change(memory, 4, "n_c", content="edited on c")
        await node.sync.applier.apply(who.user_id, received(node, [later]))
        result = await node.sync.applier.apply(who.user_id, received(node, [earlier]))
        assert (result.applied, result.conflicts) == (0, 1)
        again = await node.sync.applier.apply(who.user_id, received(node, [earlier, later]))
        assert (again.applied, again.unchanged) == (0, 1)

        history = (await node.container.memories.history(who, None, memory)).history
        assert [h.event for h in history] == ["ADD", "UPDATE", "CONFLICT"], "the loss is recorded once"
        conflict = history[-1]
        assert conflict.old_content == "edited on c" and conflict.new_content == "edited on b"
        assert conflict.actor is not None and "n_c" in conflict.actor and "lost to" in conflict.actor
        assert "n_b" in conflict.actor
        record = (await node.records(who.user_id))[0]
        assert record.content == "edited on b"


@pytest.mark.anyio
async def test_a_delete_beats_older_writes_and_a_newer_write_restores(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        who = await node.user()
        memory = str(uuid.uuid4())
        await node.sync.applier.apply(who.user_id, received(node, [change(memory, 10, "n_a", "delete", "gone")]))
        await node.sync.applier.apply(who.user_id, received(node, [change(memory, 3, "n_b", content="older write")]))
        [record] = await node.records(who.user_id)
        assert record.deleted_at is not None and record.hlc == hlc.decode(change(memory, 10, "n_a").hlc)
        page = await node.container.memories.list(who, None)
        assert page.memories == []
        await node.sync.applier.apply(who.user_id, received(node, [change(memory, 11, "n_b", content="rewritten")]))
        page = await node.container.memories.list(who, None)
        assert [m.content for m in page.memories] == ["rewritten"]


@pytest.mark.anyio
async def test_a_change_to_another_tenants_memory_refuses_the_whole_batch(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        alice, mallory = await node.user(), await node.user()
        alices = await node.add(alice, "alice's secret")
        innocent = str(uuid.uuid4())
        batch = [change(innocent, 1, "n_m", content="harmless"), change(alices, 10**6, "n_m", content="overwritten")]
        with pytest.raises(Forbidden):
            await node.sync.applier.apply(mallory.user_id, received(node, batch))
        for delete in (change(alices, 10**6, "n_m", "delete"),):
            with pytest.raises(Forbidden):
                await node.sync.applier.apply(mallory.user_id, received(node, [delete]))
        assert await node.records(mallory.user_id) == [], "nothing of the batch was applied"
        [record] = await node.records(alice.user_id)
        assert record.content == "alice's secret" and record.deleted_at is None
        found = await node.container.memories.search(alice, None, SearchIn(query="alice's secret"))
        assert [r.id for r in found] == [alices]


@pytest.mark.anyio
async def test_bad_changes_are_refused_like_bad_local_writes(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path, max_memory_chars=50), embedder) as node:
        who = await node.user()
        memory = str(uuid.uuid4())
        with pytest.raises(MemoryTooLarge):
            await node.sync.applier.apply(who.user_id, received(node, [change(memory, 1, "n_a", content="x" * 51)]))
        future = hlc.encode((hlc.wall_ms() + 3_600_000) << 16)
        ahead = change(memory, 1, "n_a").model_copy(update={"hlc": future})
        with pytest.raises(ValidationFailed, match="ahead"):
            await node.sync.applier.apply(who.user_id, received(node, [ahead]))
        for bad in (
            {"content": "a\x00b"},
            {"content": "\ud800"},
            {"scope": "session"},  # a session scope without a session
            # An agent without a session writes only scope user (Mem0's agent_id without a run_id).
            {"agent": "x", "scope": "agent"},
            {"tags": [""]},
            {"metadata": {"a.b": 1}},
            {"created_at": "2026-11-01T00:00:00"},  # no time zone
        ):
            with pytest.raises(ValueError):
                change(memory, 1, "n_a", **bad)
        assert await node.records(who.user_id) == []


@pytest.mark.anyio
async def test_a_shipped_vector_of_the_same_model_is_used_and_another_models_is_not(
    tmp_path: Path, embedder: Any
) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        who = await node.user()
        model = node.container.engine.model_id
        # The vector of quite another text: found by that text proves the shipped vector was used as it is.
        elsewhere = embedder.embed("the kitchen sink is leaking water")
        shipped, foreign = str(uuid.uuid4()), str(uuid.uuid4())
        batch = [
            change(shipped, 1, "n_a", content="release notes for version two", vector=elsewhere, model=model),
            change(foreign, 1, "n_a", content="release notes for version three", vector=elsewhere, model="other/384"),
        ]
        await node.sync.applier.apply(who.user_id, received(node, batch))
        by_plumbing = await node.container.memories.search(who, None, SearchIn(query="leaking kitchen sink", limit=1))
        assert [r.id for r in by_plumbing] == [shipped]
        by_release = await node.container.memories.search(who, None, SearchIn(query="release notes version three"))
        assert by_release[0].id == foreign, "embedded again from its content"


@pytest.mark.anyio
async def test_applied_changes_enter_the_log_as_theirs_and_local_writes_follow_them(
    tmp_path: Path, embedder: Any
) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        who = await node.user()
        memory = str(uuid.uuid4())
        remote = change(memory, 100, "n_far", content="from afar")
        await node.sync.applier.apply(who.user_id, received(node, [remote]), source="lnk_1")
        [logged] = await node.log(who.user_id)
        assert (logged.origin, logged.hlc, logged.source) == ("n_far", hlc.decode(remote.hlc), "lnk_1")
        await node.container.memories.update(who, None, memory, MemoryPatch(content="edited here"))
        local = (await node.log(who.user_id))[-1]
        assert local.origin == node.sync.node_id and local.source is None
        assert local.hlc > hlc.decode(remote.hlc), "a local write orders after what it replaced"


@pytest.mark.anyio
async def test_role_and_private_memories_keep_their_reach_through_sync(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        who = await node.user()
        memory = str(uuid.uuid4())
        private_role = change(
            memory,
            1,
            "n_a",
            content="review checklist",
            scope="role",
            role="reviewer",
            session="s1",
            agent="a1",
            visibility="private",
        )
        await node.sync.applier.apply(who.user_id, received(node, [private_role]))
        [record] = await node.records(who.user_id)
        assert (record.scope, record.role, record.visibility) == ("role", "reviewer", "p:s1:a1")
        [sent] = [ChangeWire.model_validate(c) for c in await with_vectors(node.container.engine, [record])]
        assert (sent.record.scope, sent.record.role, sent.record.visibility) == ("role", "reviewer", "private")
        with pytest.raises(ValueError):  # a role scope names its role
            change(memory, 2, "n_a", scope="role", session="s1", agent="a1")


@pytest.mark.anyio
async def test_a_synced_memory_is_indexed_with_its_neighbour_like_a_local_write(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        here, there = await node.user(), await node.user()
        question = await node.add(here, "Which database do we use in production?")
        answer = await node.add(here, "PostgreSQL 16, on a managed instance")
        local = {r.id: r for r in await node.records(here.user_id)}
        synced = {question: str(uuid.uuid4()), answer: str(uuid.uuid4())}
        batch = [
            change(
                synced[mid],
                n + 1,
                "n_a",
                content=local[mid].content,
                created_at=local[mid].created_at.isoformat(),
                updated_at=local[mid].updated_at.isoformat(),
            )
            for n, mid in enumerate((question, answer))
        ]
        await node.sync.applier.apply(there.user_id, received(node, batch))
        held = await node.container.engine.vectors([answer, synced[answer]])
        assert held[answer][0].context == "Which database do we use in production?"
        assert held[synced[answer]][0].context == held[answer][0].context


@pytest.mark.anyio
async def test_a_batch_the_database_refuses_leaves_the_index_as_it_was(tmp_path: Path, embedder: Any) -> None:
    # The index is written while the rows go in; a failure of the rows must take the index back too.
    async with open_node(node_settings(tmp_path), embedder) as node:
        who = await node.user()
        model = node.container.engine.model_id
        kept, never = str(uuid.uuid4()), str(uuid.uuid4())
        await node.sync.applier.apply(who.user_id, received(node, [change(kept, 1, "n_a", content="builds on linux")]))
        before = await state(node, who.user_id)
        async with node.container.db.session() as session:  # a real refusal, from the database itself
            await session.execute(
                text(
                    "CREATE TRIGGER refuse_boom BEFORE INSERT ON memory_events WHEN NEW.actor LIKE '%n_boom%' "
                    "BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
            )
        batch = [
            change(kept, 2, "n_boom", content="builds on windows", vector=embedder.embed("windows"), model=model),
            change(never, 1, "n_boom", content="a memory that never was", vector=embedder.embed("never"), model=model),
        ]
        with pytest.raises(Conflict):
            await node.sync.applier.apply(who.user_id, received(node, batch))

        assert await state(node, who.user_id) == before
        indexed = await node.container.engine.vectors([kept, never])
        assert set(indexed) == {kept} and indexed[kept][0].content == "builds on linux"
        found = await node.container.memories.search(who, None, SearchIn(query="builds on windows", limit=5))
        assert [(r.id, r.content) for r in found] == [(kept, "builds on linux")]


@pytest.mark.anyio
async def test_many_versions_of_a_memory_in_one_batch_write_one_update_and_lose_to_the_newest(
    tmp_path: Path, embedder: Any
) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        who = await node.user()
        memory = str(uuid.uuid4())
        await node.sync.applier.apply(who.user_id, received(node, [change(memory, 1, "n_a", content="original")]))
        versions = [change(memory, v, "n_b", content=f"draft {v}") for v in range(2, 7)]
        result = await node.sync.applier.apply(who.user_id, received(node, versions[::-1]))
        assert (result.applied, result.unchanged, result.conflicts) == (1, 0, 4)

        history = (await node.container.memories.history(who, None, memory)).history
        assert [h.event for h in history] == ["ADD", "UPDATE", *["CONFLICT"] * 4]
        assert (history[1].old_content, history[1].new_content) == ("original", "draft 6")
        assert [h.old_content for h in history[2:]] == ["draft 2", "draft 3", "draft 4", "draft 5"]
        assert all(h.new_content == "draft 6" for h in history[2:])
        [record] = await node.records(who.user_id)
        assert record.content == "draft 6"
