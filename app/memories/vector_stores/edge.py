"""mem0 store on Qdrant's own engine, in-process (qdrant-edge)."""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import json
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe
from pydantic import BaseModel

from app.memories import lexical
from app.memories.vector_stores import hybrid, relex
from app.memories.vector_stores.base import (
    KEYWORD_FIELDS,
    SCROLL_PAGE,
    TENANT_FIELD,
    IndexLocked,
    StoredPoint,
    StoreError,
    pack_vector,
    valid_uuid,
    wanted,
)
from app.memories.vector_stores.filters import FilterError, idf_corpus, parse_filters, tenants, to_edge_filter

log = logging.getLogger(__name__)

T = TypeVar("T")


class _SharedExclusiveLock:
    """Many holders in shared mode, or one in exclusive mode (to close or reset the shard under readers' feet)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._exclusive = True
            self._cond.wait_for(lambda: self._shared == 0)
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


# The engine's search pool runs a query's per-segment reads in parallel; ours is one appendable segment (we never
# optimize while serving), so a wider pool only adds hand-offs between threads. Measured on 500 points of a tenant, on
# 2 cores: one pass of a hybrid search took 0.68 ms with one thread against 0.96 ms with the default pool, using 0.6 ms
# of CPU instead of 1.4, and 4 threads querying at once got 687 searches/s against 559.
SEARCH_THREADS = 1

_OPEN_SHARDS: set[Path] = set()
_OPEN_SHARDS_LOCK = threading.Lock()


def _lock_exclusively(shard_path: Path) -> int:
    """Take the shard from every other process before anything reads it; the descriptor holds the lock until closed.

    Checking is not left to the engine: ``EdgeShard.load`` opens (and rewrites) the segments' files before it tries
    its WAL lock, so a second process that merely tried to load a shard in use broke the owner's flushes. Our lock
    file sits beside the shard so that ``reset`` (which deletes the shard's directory) keeps it. The engine's own WAL
    lock (a flock on ``wal/``) is probed too, for an owner that predates our lock file.
    """
    shard_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(shard_path.with_name(shard_path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        wal = shard_path / "wal"
        if wal.is_dir():
            wal_fd = os.open(wal, os.O_RDONLY)
            try:
                fcntl.flock(wal_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(wal_fd)  # releases the probe
    except BlockingIOError:
        os.close(fd)
        raise IndexLocked(shard_path) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _formula() -> qe.Formula:
    """``hybrid``'s fusion: the dense weight is DENSE_WEIGHT, plus the document difference for document sections."""
    is_document = qe.Expression.Condition(
        qe.FieldCondition(key=hybrid.KIND_FIELD, match=qe.MatchValue(lexical.DOCUMENT_KIND))
    )
    weight = qe.Expression.Sum(
        [
            qe.Expression.Constant(hybrid.DENSE_WEIGHT),
            qe.Expression.Mult(
                [qe.Expression.Constant(hybrid.DOCUMENT_DENSE_WEIGHT - hybrid.DENSE_WEIGHT), is_document]
            ),
        ]
    )
    dense = qe.Expression.Max([qe.Expression.Variable("$score[0]"), qe.Expression.Constant(0.0)])
    lexical_term = qe.Expression.Div(
        qe.Expression.Variable("$score[1]"),
        qe.Expression.Sum([qe.Expression.Variable("$score[1]"), qe.Expression.Constant(hybrid.SATURATION)]),
        by_zero_default=0.0,
    )
    rest = qe.Expression.Sum([qe.Expression.Constant(1.0), qe.Expression.Neg(weight)])
    return qe.Formula(
        qe.Expression.Sum([qe.Expression.Mult([weight, dense]), qe.Expression.Mult([rest, lexical_term])]),
        defaults={"$score[0]": 0.0, "$score[1]": 0.0},
    )


_FORMULA = _formula()


def _point(point_id: str, vector: Sequence[float], payload: dict[str, Any]) -> qe.Point:
    sparse = hybrid.sparse_of(payload)
    vectors: dict[str, Any] = {hybrid.DENSE: list(vector)}
    if sparse.indices:
        vectors[hybrid.LEXICAL] = qe.SparseVector(sparse.indices, sparse.values)
    return qe.Point(point_id, vectors, payload)


def _dense_only(shard_path: Path) -> bool:
    """Whether the shard at ``shard_path`` exists and was made without the lexical vector."""
    config_file = shard_path / "edge_config.json"
    if not config_file.is_file():
        return False
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError):
        return False  # let the engine's own load report it
    return hybrid.LEXICAL not in (config.get("sparse_vectors") or {})


class EdgeStoreConfig(BaseModel):
    """What mem0's VectorStoreFactory passes to ``EdgeVectorStore`` (mem0 also deep-copies it for its entity store)."""

    collection_name: str = "engram_memories"
    embedding_model_dims: int = 384
    path: str
    flush_interval: float = 1.0


class EdgeVectorStore:
    """mem0 store on Qdrant's own engine in-process: one shard per collection under ``path``.

    It has every method of mem0's ``VectorStoreBase`` without subclassing it: mem0 only calls them, and the index's own
    process (``edge_process``) imports this module without mem0 (0.7 s of its start).

    One process at a time: opening takes a lock file beside the shard (``IndexLocked`` if another process holds it)
    before reading any of the shard's files, and closing lets it go.

    Concurrency: searches may run alongside each other and alongside writes, which the engine's own segment locks
    make safe; writes are serialised behind one lock; close/reset wait for everything. The engine holds the GIL for
    the whole of every call, so a query is time in which no other Python thread of the process runs (0.85 ms of a
    query at 2,000 points of one tenant left a counting thread 0.54 of its pace): at 50 clients a quarter of the
    server's GIL time went to these queries. So ``engram serve`` runs this store in a child process of its own
    (``edge_process``, ``ENGRAM_INDEX_PROCESS``), where those queries hold the child's GIL instead.

    Durability: an upsert is in the shard's write-ahead log when ``update`` returns, which survives the process being
    killed (SIGKILL) without a flush. ``flush()`` (about 10 ms: it syncs to disk) makes it survive the machine
    losing power as well; a background thread flushes every ``flush_interval`` seconds when something changed
    (0 = flush after every write). While flushes fail, ``ping`` (readiness) fails too.

    No HNSW: ``optimize()`` builds it, but holds the GIL for its whole run (31 s at 63k points, freezing every
    thread of the server), and tenant-filtered searches don't need it, because the planner walks the ``user_id``
    payload index and scores only that tenant's points exactly (0.3 ms for 1k of 100k points, 3 ms for 20k).
    """

    def __init__(
        self,
        collection_name: str = "engram_memories",
        embedding_model_dims: int = 384,
        path: str = "",
        flush_interval: float = 1.0,
    ) -> None:
        if not path:
            raise ValueError("EdgeVectorStore needs a path")
        self.collection_name = collection_name
        self.embedding_model_dims = embedding_model_dims
        self.flush_interval = flush_interval
        self.shard_path = Path(path) / collection_name
        self._gate = _SharedExclusiveLock()
        self._write_lock = threading.Lock()
        self._dirty = False
        self._closed = False
        # The last flush's failure until one succeeds: ``ping`` (readiness) reports it.
        self._flush_failure: StoreError | None = None
        self._lock_fd: int | None = None
        # True when opening found a dense-only index (from before hybrid search) and emptied it to rebuild it.
        self.rebuilt = False
        self._claim()
        try:
            self._shard = self._load_or_create()
        except BaseException:
            self._unclaim()
            raise
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if flush_interval > 0:
            self._flusher = threading.Thread(target=self._flush_loop, name=f"edge-flush-{collection_name}", daemon=True)
            self._flusher.start()

    # mem0's VectorStoreBase ------------------------------------------------------------------------------------

    def create_col(self, name: str, vector_size: int, distance: str = "cosine") -> None:
        """The shard is created on open; nothing to do."""

    def insert(
        self,
        vectors: Sequence[Sequence[float]],
        payloads: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
    ) -> None:
        if ids is None:
            ids = [str(uuid.uuid4()) for _ in vectors]
        points = [
            _point(str(pid), vector, dict(payloads[i]) if payloads else {})
            for i, (pid, vector) in enumerate(zip(ids, vectors, strict=True))
        ]
        self._write(qe.UpdateOperation.upsert_points(points))

    def search(
        self, query: str, vectors: Sequence[float], top_k: int = 5, filters: Mapping[str, Any] | None = None
    ) -> list[StoredPoint]:
        """Hybrid: the dense and the lexical prefetch fused by ``hybrid``'s formula inside the query, in two passes
        (the second with the first's feedback terms added to the lexical query)."""
        limit = wanted(top_k)
        conditions = parse_filters(filters)
        edge_filter = to_edge_filter(conditions)
        corpus = to_edge_filter(idf_corpus(conditions))
        idf = qe.SearchParams(idf=qe.IdfParams(corpus=corpus)) if corpus is not None else None
        dense = list(vectors)
        sparse = lexical.query_vector(query or "", tenants(conditions))
        if sparse.indices:
            first = self._read(
                lambda shard: shard.query(
                    self._hybrid(dense, sparse, hybrid.FEEDBACK_POOL, edge_filter, idf, with_payload=False)
                )
            )
            sparse = hybrid.expand(sparse, [hybrid.lexical_of(h.vector) for h in first])
        request = self._hybrid(dense, sparse, limit, edge_filter, idf, with_payload=True)
        hits = self._read(lambda shard: shard.query(request))
        return [StoredPoint(str(h.id), dict(h.payload or {}), h.score) for h in hits]

    @staticmethod
    def _hybrid(
        dense: builtins.list[float],
        sparse: lexical.Sparse,
        limit: int,
        edge_filter: Any,
        idf: qe.SearchParams | None,
        *,
        with_payload: bool,
    ) -> qe.QueryRequest:
        nearest = qe.Query.Nearest(dense, using=hybrid.DENSE)
        prefetches = [qe.Prefetch(limit=hybrid.dense_prefetch(limit), query=nearest)]
        if sparse.indices:
            vector = qe.SparseVector(sparse.indices, sparse.values)
            lexical_query = qe.Query.Nearest(vector, using=hybrid.LEXICAL)
            # ``idf`` must sit on the prefetch that scores the sparse vector: the outer request's params reach no
            # prefetch.
            prefetches.append(qe.Prefetch(limit=hybrid.lexical_prefetch(limit), query=lexical_query, params=idf))
        return qe.QueryRequest(
            limit=limit,
            prefetches=prefetches,
            query=_FORMULA,
            filter=edge_filter,
            with_payload=with_payload,
            with_vector=None if with_payload else [hybrid.LEXICAL],
        )

    def keyword_search(self, query: str, top_k: int = 5, filters: dict[str, Any] | None = None) -> None:
        """BM25 is fused inside ``search``; mem0 must not add its own on top (same in ``ServerQdrantStore``)."""
        return None

    def search_batch(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("mem0 batches searches only for fact extraction's entity store, which is off")

    def delete(self, vector_id: str) -> None:
        if valid_uuid(vector_id):
            self._write(qe.UpdateOperation.delete_points([str(vector_id)]))

    def update(
        self, vector_id: str, vector: Sequence[float] | None = None, payload: dict[str, Any] | None = None
    ) -> None:
        """Like mem0's Qdrant store: both given -> replace the point; payload only -> merge into it."""
        pid = str(vector_id)
        if vector is not None and payload is not None:
            self._write(qe.UpdateOperation.upsert_points([_point(pid, vector, dict(payload))]))
            return
        if payload is not None:
            self._write(qe.UpdateOperation.set_payload([pid], dict(payload)))
        if vector is not None:
            self._write(qe.UpdateOperation.update_vectors([qe.PointVectors(pid, {hybrid.DENSE: list(vector)})]))

    def get(self, vector_id: str) -> StoredPoint | None:
        if not valid_uuid(vector_id):
            return None
        records = self._read(lambda shard: shard.retrieve([str(vector_id)], True, False))
        return StoredPoint(str(records[0].id), dict(records[0].payload or {})) if records else None

    def list_cols(self) -> list[str]:
        return [self.collection_name]

    def delete_col(self) -> None:
        with self._gate.exclusive(), self._write_lock:
            self._own()  # never delete files another process has open
            if not self._closed:
                self._shard.close()
                self._closed = True
            shutil.rmtree(self.shard_path, ignore_errors=True)
            self._unclaim()

    def col_info(self) -> dict[str, Any]:
        info = self._read(lambda shard: shard.info())
        return {"name": self.collection_name, "points_count": info.points_count, "segments": info.segments_count}

    def list(self, filters: Mapping[str, Any] | None = None, top_k: int | None = 100) -> tuple[list[StoredPoint], Any]:
        request = qe.ScrollRequest(limit=top_k or 100, filter=to_edge_filter(parse_filters(filters)), with_payload=True)
        records, next_offset = self._scroll(request)
        return [StoredPoint(str(r.id), dict(r.payload or {})) for r in records], next_offset

    def reset(self) -> None:
        """Drop every point and start an empty shard at the same place."""
        with self._gate.exclusive(), self._write_lock:
            self._own()  # held throughout: nobody else can open the shard between the delete and the new one
            if not self._closed:
                self._shard.close()
                self._closed = True  # until the new shard is open
            shutil.rmtree(self.shard_path, ignore_errors=True)
            self._shard = self._load_or_create()
            self._closed = False
            self._dirty = False
            self._flush_failure = None

    # Engram's extras -------------------------------------------------------------------------------------------

    def ids(self, filters: Mapping[str, Any] | None = None) -> set[str]:
        edge_filter = to_edge_filter(parse_filters(filters))
        found: set[str] = set()
        offset: Any = None
        while True:
            request = qe.ScrollRequest(offset=offset, limit=SCROLL_PAGE, filter=edge_filter, with_payload=False)
            records, offset = self._scroll(request)
            found.update(str(r.id) for r in records)
            if offset is None:
                return found

    def count(self, filters: Mapping[str, Any] | None = None) -> int:
        request = qe.CountRequest(exact=True, filter=to_edge_filter(parse_filters(filters)))
        return self._read(lambda shard: shard.count(request))

    def vectors(self, ids: Sequence[str]) -> dict[str, tuple[dict[str, Any], builtins.list[float]]]:
        """The payload and vector of each point among ``ids`` (edge sync ships vectors instead of re-embedding)."""
        wanted_ids: builtins.list[int | uuid.UUID | str] = [str(i) for i in ids if valid_uuid(i)]
        if not wanted_ids:
            return {}
        records = self._read(lambda shard: shard.retrieve(wanted_ids, True, True))
        out: dict[str, tuple[dict[str, Any], builtins.list[float]]] = {}
        for r in records:
            dense = hybrid.dense_of(r.vector)
            if dense is not None:
                out[str(r.id)] = (dict(r.payload or {}), dense)
        return out

    def packed_vectors(self, ids: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        """The content and dense vector (``pack_vector``) of each point among ``ids``: what edge sync ships. Reads
        only the content and the dense vector, which costs a fifth of ``vectors`` per point."""
        wanted_ids: builtins.list[int | uuid.UUID | str] = [str(i) for i in ids if valid_uuid(i)]
        if not wanted_ids:
            return {}
        selector = qe.PayloadSelector.Include(["data"])
        records = self._read(lambda shard: shard.retrieve(wanted_ids, selector, [hybrid.DENSE]))
        out: dict[str, tuple[str, bytes]] = {}
        for r in records:
            vectors = r.vector
            packed = pack_vector(vectors.get(hybrid.DENSE) if isinstance(vectors, dict) else vectors)
            if packed is not None:
                out[str(r.id)] = (str((r.payload or {}).get("data", "")), packed)
        return out

    def relex(self) -> int:
        """Rewrite the lexical vectors that ``lexical`` would now make otherwise (``relex``); how many were."""
        return relex.relex(self._relex_page)

    def _relex_page(self, offset: Any, write: bool) -> tuple[int, Any]:
        # Under the write lock: no write to these points can land between reading a payload and rewriting its vector.
        with self._gate.shared(), self._write_lock:
            request = qe.ScrollRequest(
                offset=offset, limit=relex.RELEX_PAGE, with_payload=True, with_vector=[hybrid.LEXICAL]
            )
            records, after = self._call(lambda: self._shard.scroll(request))
            fixes = relex.stale(records)
            if write and fixes:
                vectors = [
                    qe.PointVectors(pid, {hybrid.LEXICAL: qe.SparseVector(sparse.indices, sparse.values)})
                    for pid, sparse in fixes
                ]
                self._call(lambda: self._shard.update(qe.UpdateOperation.update_vectors(vectors)))
                self._dirty = True
                if self.flush_interval <= 0:
                    self._flush_locked()
        return len(fixes), after

    def ping(self) -> None:
        self._read(lambda shard: shard.info())
        if self._flush_failure is not None:
            raise StoreError(f"writes are not reaching disk: {self._flush_failure}")

    def flush(self) -> None:
        """Sync everything written so far to disk."""
        with self._gate.shared(), self._write_lock:
            self._flush_locked()

    def optimize(self) -> bool:
        """Build HNSW and vacuum. Blocks every Python thread while it runs: for maintenance, not a serving process."""
        with self._gate.shared(), self._write_lock:
            return self._call(self._shard.optimize)

    def close(self) -> None:
        self._stop.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join()
        with self._gate.exclusive(), self._write_lock:
            if not self._closed:
                try:
                    self._shard.flush()
                except Exception:
                    log.exception("final flush of %s failed", self.shard_path)
                self._shard.close()
                self._closed = True
            self._unclaim()

    # internals ------------------------------------------------------------------------------------------------

    def _claim(self) -> None:
        """Make the shard this store's alone, in this process and every other, without touching its files."""
        with _OPEN_SHARDS_LOCK:
            # Checked first: our lock file would refuse this process's second store too, but with a misleading reason.
            if self.shard_path.resolve() in _OPEN_SHARDS:
                raise StoreError(f"the vector index at {self.shard_path} is already open in this process")
            self._lock_fd = _lock_exclusively(self.shard_path)
            _OPEN_SHARDS.add(self.shard_path.resolve())

    def _own(self) -> None:
        if self._lock_fd is None:
            self._claim()

    def _unclaim(self) -> None:
        with _OPEN_SHARDS_LOCK:
            if self._lock_fd is None:
                return
            os.close(self._lock_fd)
            self._lock_fd = None
            _OPEN_SHARDS.discard(self.shard_path.resolve())

    def _load_or_create(self) -> qe.EdgeShard:
        config = qe.EdgeConfig(
            vectors={hybrid.DENSE: qe.EdgeVectorParams(size=self.embedding_model_dims, distance=qe.Distance.Cosine)},
            sparse_vectors={hybrid.LEXICAL: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            # We never optimize while serving, so no point may wait for an optimization to become visible.
            optimizers=qe.EdgeOptimizersConfig(prevent_unoptimized=False),
            max_search_threads=SEARCH_THREADS,
        )
        try:
            if _dense_only(self.shard_path):
                # Built before hybrid search: its points lack the lexical vector and the engine cannot add one to a
                # shard. Start empty; start-up repair (or `engram reindex`) refills it from the database.
                log.warning("the vector index at %s predates hybrid search: rebuilding it", self.shard_path)
                shutil.rmtree(self.shard_path)
                self.rebuilt = True
            if self.shard_path.is_dir() and any(self.shard_path.iterdir()):
                shard = qe.EdgeShard.load(str(self.shard_path), config)
            else:
                self.shard_path.mkdir(parents=True, exist_ok=True)
                shard = qe.EdgeShard.create(str(self.shard_path), config)
            # Idempotent: re-creating an existing index is accepted, so this also upgrades older shards.
            shard.update(qe.UpdateOperation.create_field_index(TENANT_FIELD, qe.KeywordIndexParams(is_tenant=True)))
            for field in KEYWORD_FIELDS:
                shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
        except Exception as exc:
            raise StoreError(f"cannot open the vector index at {self.shard_path}: {exc}") from exc
        return shard

    def _call(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise StoreError("the vector index is closed")
        try:
            return fn()
        except (FilterError, StoreError):
            raise
        except Exception as exc:
            raise StoreError(f"vector index failure: {exc}") from exc

    def _read(self, fn: Callable[[qe.EdgeShard], T]) -> T:
        with self._gate.shared():
            return self._call(lambda: fn(self._shard))

    def _scroll(self, request: qe.ScrollRequest) -> tuple[builtins.list[qe.Record], Any]:
        return self._read(lambda shard: shard.scroll(request))

    def _write(self, operation: qe.UpdateOperation) -> None:
        with self._gate.shared(), self._write_lock:
            self._call(lambda: self._shard.update(operation))
            self._dirty = True
            if self.flush_interval <= 0:
                self._flush_locked()

    def _flush_locked(self) -> None:
        if self._dirty and not self._closed:
            try:
                self._call(self._shard.flush)
            except StoreError as exc:
                self._flush_failure = exc
                raise
            self._dirty = False
            self._flush_failure = None

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.flush_interval):
            try:
                self.flush()
            except Exception:
                log.exception("background flush of %s failed", self.shard_path)
