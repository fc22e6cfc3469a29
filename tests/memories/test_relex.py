"""An index whose lexical vectors an older ``lexical.SCHEME`` wrote is rewritten in place, page by page, and a run cut
off half-way is finished by the next one: the first page, which decides whether to walk at all, is rewritten last."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.memories import lexical
from app.memories.vector_stores import EdgeVectorStore, ServerQdrantStore, relex
from tests.memories.legacy_index import shared_token_ids, with_shared_token_ids

Store = EdgeVectorStore | ServerQdrantStore
TEXTS = [f"Note {n}: the deploy of service {n} needs the {word} runbook" for n, word in enumerate("abcdefghijk")]


@pytest.fixture(params=["edge", "local"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    def opener() -> Store:
        if request.param == "edge":
            return EdgeVectorStore(path=str(tmp_path / "edge"), flush_interval=0, embedding_model_dims=4)
        return ServerQdrantStore(path=str(tmp_path / "local"), embedding_model_dims=4)

    return opener


def _legacy(open_store: Callable[[], Store], tmp_path: Path) -> list[str]:
    """A store of two tenants whose points all carry the lexical vectors of before tenant-scoped ids."""
    store = open_store()
    ids = [str(uuid.uuid4()) for _ in TEXTS]
    payloads = [{"data": text, "user_id": f"u_{n % 2}", "visibility": "user"} for n, text in enumerate(TEXTS)]
    store.insert([[1.0, 0.0, 0.0, float(n)] for n in range(len(TEXTS))], payloads=payloads, ids=ids)
    store.close()
    edge = isinstance(store, EdgeVectorStore)
    with_shared_token_ids(tmp_path / "edge" / "engram_memories" if edge else None, tmp_path / "local")
    return ids


def _lexical_vectors(store: Store) -> dict[str, tuple[dict[str, Any], lexical.Sparse | None]]:
    found: dict[str, tuple[dict[str, Any], lexical.Sparse | None]] = {}
    offset: Any = None
    while True:
        if isinstance(store, EdgeVectorStore):
            import qdrant_edge as qe

            request = qe.ScrollRequest(offset=offset, limit=100, with_payload=True, with_vector=["lexical"])
            records, offset = store._shard.scroll(request)
        else:
            records, offset = store.client.scroll(
                "engram_memories", limit=100, offset=offset, with_payload=True, with_vectors=["lexical"]
            )
        for r in records:
            vector = r.vector.get("lexical") if isinstance(r.vector, dict) else None
            found[str(r.id)] = (r.payload, None if vector is None else lexical.Sparse(vector.indices, vector.values))
        if offset is None:
            return found


def test_every_page_is_rewritten_and_a_second_run_finds_nothing(
    open_store: Callable[[], Store], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relex, "RELEX_PAGE", 3)  # four pages
    ids = _legacy(open_store, tmp_path)
    store = open_store()
    try:
        before = _lexical_vectors(store)
        assert all(relex.same(vector, shared_token_ids(payload)) for payload, vector in before.values())
        assert store.relex() == len(ids)
        after = _lexical_vectors(store)
        assert set(after) == set(ids)
        for payload, vector in after.values():
            assert relex.same(vector, lexical.payload_vector(payload))
            assert not relex.same(vector, shared_token_ids(payload)), "in the tenant's own token ids"
        assert store.relex() == 0
    finally:
        store.close()


def test_a_run_cut_off_half_way_is_finished_by_the_next(
    open_store: Callable[[], Store], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relex, "RELEX_PAGE", 3)
    ids = _legacy(open_store, tmp_path)
    store = open_store()
    try:
        fix_page = store._relex_page
        written: list[int] = []

        def dies_after_two_pages(offset: Any, write: bool) -> tuple[int, Any]:
            if write and len(written) == 2:
                raise RuntimeError("the machine lost power")
            found = fix_page(offset, write)
            if write:
                written.append(found[0])
            return found

        monkeypatch.setattr(store, "_relex_page", dies_after_two_pages)
        with pytest.raises(RuntimeError):
            store.relex()
        assert sum(written) == 6
        monkeypatch.setattr(store, "_relex_page", fix_page)
        # The first page was to be rewritten last, so it is still stale and the next run walks everything again.
        assert store.relex() == len(ids) - 6
        vectors = _lexical_vectors(store)
        assert all(relex.same(vector, lexical.payload_vector(payload)) for payload, vector in vectors.values())
        assert store.relex() == 0
    finally:
        store.close()
