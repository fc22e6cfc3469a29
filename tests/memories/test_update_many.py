"""MemoryService.update_many: many memories changed as one write, all or none, with the rules of a single update."""

from __future__ import annotations

import pytest

from app.accounts.principal import Principal, scopes_for
from app.errors import Conflict, NotFound
from app.memories.schemas import MemoryIn, MemoryPatch, SearchIn
from tests.harness import RunningServer, make_account


def _principal(server: RunningServer) -> Principal:
    return Principal(make_account(server).user_id, scopes_for("write"))


def test_update_many_changes_every_memory_or_none(api: RunningServer) -> None:
    service = api.container.memories
    me, other = _principal(api), _principal(api)

    async def add(who: Principal, *items: MemoryIn) -> list[str]:
        return [m.id for m in await service.add(who, None, list(items))]

    ids = api.run(
        add(
            me,
            MemoryIn(content="ferry leaves at nine", tags=["old"]),
            MemoryIn(content="ferry returns at six", tags=["old"], session="trip", agent="a"),
            MemoryIn(content="ferry tickets are online", tags=["old"], scope="user"),
        )
    )
    (theirs,) = api.run(add(other, MemoryIn(content="ferry of another account", tags=["old"])))
    retag = MemoryPatch(tags=["old", "boats"])

    def state() -> tuple[list[list[str]], list[str]]:
        """The tags as the database has them, and the memories the index finds by the new tag."""
        stored = [api.run(service.get(me, None, i)).tags for i in ids]
        hits = api.run(service.search(me, None, SearchIn(query="ferry", tags=["boats"], threshold=0), owner_view=True))
        return stored, sorted(h.id for h in hits)

    untouched = ([["old"]] * 3, [])
    with pytest.raises(NotFound, match=f"no memory {theirs}"):  # another account's id is unknown here
        api.run(service.update_many(me, None, {ids[0]: retag, ids[1]: retag, theirs: retag}))
    assert state() == untouched
    assert api.run(service.get(other, None, theirs)).tags == ["old"]
    # The last patch narrows a scope: refused, and the patches before it are not written either.
    narrowing = MemoryPatch(tags=["old", "boats"], scope="session")
    with pytest.raises(Conflict, match="narrowing"):
        api.run(service.update_many(me, None, {ids[0]: retag, ids[1]: retag, ids[2]: narrowing}))
    assert state() == untouched

    widening = MemoryPatch(tags=["old", "boats"], scope="user")
    changed = api.run(service.update_many(me, None, {ids[0]: retag, ids[1]: widening, ids[2]: retag}))
    assert [(m.id, m.tags) for m in changed] == [(i, ["old", "boats"]) for i in ids]
    assert state() == ([["old", "boats"]] * 3, sorted(ids))
    events = [[e.event for e in api.run(service.history(me, None, i)).history] for i in ids]
    assert events == [["ADD", "UPDATE"], ["ADD", "UPDATE", "PROMOTE"], ["ADD", "UPDATE"]]


def test_widening_a_memory_keeps_its_vector_and_runs_no_model(api: RunningServer) -> None:
    """A PROMOTE writes the whole point again under its new reach; its text has not changed, so neither has its
    vector: the model does not run (``engram_stage_batch_size{stage="embedder"}`` counts every text it embeds)."""
    service = api.container.memories
    me = _principal(api)
    texts = api.container.metrics.stage_batch_size.labels("embedder")._sum
    (memory,) = api.run(service.add(me, None, [MemoryIn(content="ferry leaves at nine", session="trip", agent="a")]))
    before = api.run(api.container.memories.engine.vectors([memory.id]))[memory.id][1]
    embedded = texts.get()

    widened = api.run(service.update(me, None, memory.id, MemoryPatch(scope="user")))

    assert texts.get() == embedded
    assert widened.scope == "user"
    assert api.run(api.container.memories.engine.vectors([memory.id]))[memory.id][1] == before
    hits = api.run(service.search(me, None, SearchIn(query="ferry", threshold=0)))
    assert [h.id for h in hits] == [memory.id]  # found from outside the session now
    # Widened with a new text, it is embedded once.
    (other,) = api.run(service.add(me, None, [MemoryIn(content="ferry returns at six", session="trip", agent="a")]))
    embedded = texts.get()
    api.run(service.update(me, None, other.id, MemoryPatch(scope="user", content="ferry returns at seven")))
    assert texts.get() == embedded + 1
