"""The embedded index (qdrant-edge) belongs to one process at a time, and says so when writes stop reaching disk."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import qdrant_edge

from app.memories.vector_stores import EdgeVectorStore, StoreError

ROOT = Path(__file__).resolve().parents[2]

# Exit 3 when refused because another process has the index, 0 when it opened.
_OPENER = """
import sys
from app.memories.vector_stores import EdgeVectorStore, IndexLocked
try:
    EdgeVectorStore(path=sys.argv[1], flush_interval=0).close()
except IndexLocked as exc:
    print(exc)
    sys.exit(3)
"""

# What `engram reindex` used to do to a running server's index: the engine's own load, which opens the segments'
# files before it finds the write-ahead log locked.
_RAW_LOAD = """
import sys
import qdrant_edge
try:
    qdrant_edge.EdgeShard.load(sys.argv[1])
except Exception as exc:
    print(exc)
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )


def _put(store: EdgeVectorStore, n: int) -> list[str]:
    ids = [str(uuid.uuid4()) for _ in range(n)]
    payloads = [
        {"user_id": "u_1", "data": f"point {i}", "visibility": "user", "scope": "user", "tags": [f"t{i}"]}
        for i in range(n)
    ]
    store.insert([[1.0, float(i)] + [0.0] * 382 for i in range(n)], payloads, ids)
    return ids


def test_another_process_is_refused_before_it_touches_an_index_in_use(tmp_path: Path) -> None:
    store = EdgeVectorStore(path=str(tmp_path), flush_interval=0)  # flush after every write: a broken flush raises
    try:
        ids = _put(store, 5)
        refused = _python(_OPENER, str(tmp_path))
        ids += _put(store, 5)  # the owner still writes and flushes
        store.ping()
        assert refused.returncode == 3, refused.stderr
        assert refused.stdout == f"the vector index at {tmp_path / 'engram_memories'} is in use by another process\n"
    finally:
        store.close()

    assert _python(_OPENER, str(tmp_path)).returncode == 0  # closing let it go
    reopened = EdgeVectorStore(path=str(tmp_path), flush_interval=0)
    try:
        assert reopened.ids() == set(ids)
    finally:
        reopened.close()


def test_a_second_store_in_the_same_process_is_refused(tmp_path: Path) -> None:
    store = EdgeVectorStore(path=str(tmp_path), flush_interval=0)
    try:
        with pytest.raises(StoreError, match="already open in this process"):
            EdgeVectorStore(path=str(tmp_path), flush_interval=0)
        store.reset()  # keeps the index this store's
        assert _python(_OPENER, str(tmp_path)).returncode == 3
    finally:
        store.close()
    EdgeVectorStore(path=str(tmp_path), flush_interval=0).close()


def test_ping_fails_while_flushes_fail(tmp_path: Path) -> None:
    store = EdgeVectorStore(path=str(tmp_path), flush_interval=3600)  # flushed by hand below
    try:
        _put(store, 5)
        store.flush()
        store.ping()
        damaged = _python(_RAW_LOAD, str(tmp_path / "engram_memories"))
        assert "WouldBlock" in damaged.stdout, damaged
        _put(store, 5)  # the write-ahead log still takes it
        with pytest.raises(StoreError):
            store.flush()
        with pytest.raises(StoreError, match="writes are not reaching disk"):
            store.ping()
    finally:
        store.close()


def test_an_index_from_before_the_kind_index_gets_it_when_opened(tmp_path: Path) -> None:
    """The fused score reads ``meta.kind`` for every candidate; an index made before it was indexed is upgraded."""
    store = EdgeVectorStore(path=str(tmp_path), flush_interval=0)
    _put(store, 3)
    store._shard.update(qdrant_edge.UpdateOperation.delete_field_index("meta.kind"))
    assert "meta.kind" not in store._shard.info().payload_schema
    store.close()

    reopened = EdgeVectorStore(path=str(tmp_path), flush_interval=0)
    try:
        assert "meta.kind" in reopened._shard.info().payload_schema
        assert reopened.count() == 3
    finally:
        reopened.close()


def test_the_kind_index_changes_no_score_whatever_the_kind_holds(tmp_path: Path) -> None:
    """``kind`` is the user's own metadata (a number, a list, an object): every point is stored as it is, and the
    fused score is the one the same index gives without the kind index (a list holding "document" counts, as Qdrant
    matches any element)."""

    def scores(path: Path, *, indexed: bool) -> dict[object, float]:
        store = EdgeVectorStore(path=str(path), flush_interval=0)
        try:
            if not indexed:
                store._shard.update(qdrant_edge.UpdateOperation.delete_field_index("meta.kind"))
            kinds: list[object] = [5, ["document", "x"], ["x"], {"a": 1}, "document", "Document", None]
            payloads = [
                {
                    "user_id": "u_1",
                    "data": "same",
                    "visibility": "user",
                    "scope": "user",
                    "tags": [],
                    "meta": {"kind": k},
                }
                for k in kinds
            ]
            store.insert([[1.0] + [0.0] * 383 for _ in kinds], payloads, [str(uuid.uuid4()) for _ in kinds])
            hits = store.search("", [1.0] + [0.0] * 383, top_k=10, filters={"user_id": "u_1"})
            return {repr(h.payload["meta"]["kind"]): round(h.score, 4) for h in hits}
        finally:
            store.close()

    with_index = scores(tmp_path / "indexed", indexed=True)
    assert with_index == scores(tmp_path / "plain", indexed=False)
    # A section weighs meaning twice (0.5 against 0.25; the query has no words).
    assert with_index == {
        "5": 0.25,
        "['document', 'x']": 0.5,
        "['x']": 0.25,
        "{'a': 1}": 0.25,
        "'document'": 0.5,
        "'Document'": 0.25,
        "None": 0.25,
    }
