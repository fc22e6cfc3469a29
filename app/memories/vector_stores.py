"""mem0 vector-store adapters: Qdrant's engine in-process (qdrant-edge) and a Qdrant server (qdrant-client).

Both accept the same filter dict and give it the same meaning (see ``parse_filters``). Neither offers BM25 keyword
search, so mem0 scores hits by cosine similarity alone on either backend.
"""

from __future__ import annotations

import os

# mem0 reads these when it is first imported; this module is the first to import it.
os.environ.setdefault("MEM0_TELEMETRY", "False")

import builtins
import contextlib
import fcntl
import logging
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import qdrant_edge as qe
from mem0.vector_stores.base import VectorStoreBase
from mem0.vector_stores.qdrant import Qdrant
from pydantic import BaseModel, ConfigDict
from qdrant_client import QdrantClient, models

log = logging.getLogger(__name__)

Scalar = str | int | float | bool
T = TypeVar("T")

# How many hits the caller of a search wants. mem0 over-fetches (max(4 x limit, 60)) to fuse BM25 and entity scores,
# which these stores do not provide, so anything past the caller's limit would only cost payload reads. The engine
# sets it around each search; the stores honour it (same thread: mem0 calls the store synchronously).
SEARCH_LIMIT: ContextVar[int | None] = ContextVar("engram_search_limit", default=None)


def wanted(top_k: int) -> int:
    hint = SEARCH_LIMIT.get()
    return min(top_k, hint) if hint else top_k


# Payload fields every read filters on; user_id is the tenant.
TENANT_FIELD = "user_id"
KEYWORD_FIELDS = ("visibility", "tags", "scope")
SCROLL_PAGE = 1000


class FilterError(ValueError):
    """The caller's filter dict cannot be expressed."""


class StoreError(RuntimeError):
    """The vector store itself failed (I/O, closed, unreachable)."""


class IndexLocked(StoreError):
    """Another process has the embedded index open (qdrant-edge: one process per data path)."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"the vector index at {path} is in use by another process")
        self.path = path


@dataclass(frozen=True, slots=True)
class StoredPoint:
    """What the adapters hand back to mem0: it reads ``id``, ``score`` and ``payload``."""

    id: str
    payload: dict[str, Any]
    score: float | None = None


# --- filters ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Condition:
    """``key`` (a dotted payload path) equals one of ``values``; all conditions of a filter must hold."""

    key: str
    op: Literal["eq", "in"]
    values: tuple[Scalar, ...]


def _scalar(key: str, value: Any) -> Scalar:
    if isinstance(value, str | bool | int | float):
        return value
    raise FilterError(f"filter value for {key!r} must be a string, number or boolean")


def parse_filters(filters: Mapping[str, Any] | None) -> list[Condition]:
    """The one filter grammar both stores accept.

    ``{"k": v}`` is equality, ``{"k": {"eq": v}}`` too, ``{"k": {"in": [...]}}`` is membership, ``{"AND": [f, ...]}``
    requires every sub-filter. A dotted key is a nested payload path. On an array field (``tags``) equality means
    "contains", so ``AND`` of equalities on ``tags`` means "has all of these tags". Anything else is rejected rather
    than guessed at.
    """
    conditions: list[Condition] = []
    for key, value in (filters or {}).items():
        if key == "AND":
            if not isinstance(value, list) or not all(isinstance(sub, Mapping) for sub in value):
                raise FilterError("AND takes a list of filter objects")
            for sub in value:
                conditions.extend(parse_filters(sub))
            continue
        if not isinstance(key, str) or not key or key.startswith("$") or key in ("OR", "NOT"):
            raise FilterError(f"unsupported filter key {key!r}")
        if any(not part for part in key.split(".")):
            raise FilterError(f"invalid filter path {key!r}")
        if isinstance(value, Mapping):
            if len(value) != 1:
                raise FilterError(f"filter on {key!r} takes exactly one operator")
            ((op, operand),) = value.items()
            if op == "eq":
                conditions.append(Condition(key, "eq", (_scalar(key, operand),)))
            elif op == "in":
                if not isinstance(operand, list) or not operand:
                    raise FilterError(f"'in' on {key!r} takes a non-empty list")
                conditions.append(Condition(key, "in", tuple(_scalar(key, v) for v in operand)))
            else:
                raise FilterError(f"unsupported filter operator {op!r} on {key!r}")
        else:
            conditions.append(Condition(key, "eq", (_scalar(key, value),)))
    return conditions


def _homogeneous(values: tuple[Scalar, ...], kind: type) -> bool:
    return all(isinstance(v, kind) and not isinstance(v, bool) for v in values)


def to_edge_filter(conditions: Sequence[Condition]) -> qe.Filter | None:
    """Render for qdrant-edge."""

    def one(key: str, value: Scalar) -> qe.FieldCondition:
        if isinstance(value, float):  # MatchValue takes str, int and bool only
            return qe.FieldCondition(key=key, range=qe.RangeFloat(gte=value, lte=value))
        if isinstance(value, bool):
            # qdrant-edge 0.9.0 reads a Python bool as the integer 1/0, which never matches a JSON true/false;
            # numpy's bool is not an int subclass, so it arrives as a bool.
            return qe.FieldCondition(key=key, match=qe.MatchValue(np.bool_(value)))  # type: ignore[arg-type]
        return qe.FieldCondition(key=key, match=qe.MatchValue(value))

    must: list[Any] = []
    for c in conditions:
        if c.op == "eq":
            must.append(one(c.key, c.values[0]))
        elif _homogeneous(c.values, str) or _homogeneous(c.values, int):
            must.append(qe.FieldCondition(key=c.key, match=qe.MatchAny(list(c.values))))  # type: ignore[arg-type]
        else:
            must.append(qe.Filter(should=[one(c.key, v) for v in c.values]))
    return qe.Filter(must=must) if must else None


def to_client_filter(conditions: Sequence[Condition]) -> models.Filter | None:
    """Render for qdrant-client, condition for condition the same as ``to_edge_filter``."""

    def one(key: str, value: Scalar) -> models.FieldCondition:
        if isinstance(value, float):
            return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))

    must: list[Any] = []
    for c in conditions:
        if c.op == "eq":
            must.append(one(c.key, c.values[0]))
        elif _homogeneous(c.values, str) or _homogeneous(c.values, int):
            must.append(models.FieldCondition(key=c.key, match=models.MatchAny(any=list(c.values))))
        else:
            must.append(models.Filter(should=[one(c.key, v) for v in c.values]))
    return models.Filter(must=must) if must else None


def _valid_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


# --- qdrant-edge --------------------------------------------------------------------------------------------------


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


class EdgeStoreConfig(BaseModel):
    """What mem0's VectorStoreFactory passes to ``EdgeVectorStore`` (mem0 also deep-copies it for its entity store)."""

    collection_name: str = "engram_memories"
    embedding_model_dims: int = 384
    path: str
    flush_interval: float = 1.0


class EdgeVectorStore(VectorStoreBase):
    """mem0 store on Qdrant's own engine in-process: one shard per collection under ``path``.

    One process at a time: opening takes a lock file beside the shard (``IndexLocked`` if another process holds it)
    before reading any of the shard's files, and closing lets it go.

    Concurrency: searches run in parallel (the engine releases the GIL while querying) and alongside writes, which
    the engine's own segment locks make safe; writes are serialised behind one lock; close/reset wait for everything.

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
            qe.Point(str(pid), list(vector), dict(payloads[i]) if payloads else {})
            for i, (pid, vector) in enumerate(zip(ids, vectors, strict=True))
        ]
        self._write(qe.UpdateOperation.upsert_points(points))

    def search(
        self, query: str, vectors: Sequence[float], top_k: int = 5, filters: Mapping[str, Any] | None = None
    ) -> list[StoredPoint]:
        request = qe.QueryRequest(
            limit=wanted(top_k),
            query=qe.Query.Nearest(list(vectors)),
            filter=to_edge_filter(parse_filters(filters)),
            with_payload=True,
        )
        hits = self._read(lambda shard: shard.query(request))
        return [StoredPoint(str(h.id), dict(h.payload or {}), h.score) for h in hits]

    def keyword_search(self, query: str, top_k: int = 5, filters: dict[str, Any] | None = None) -> None:
        """No BM25 here (nor in ``ServerQdrantStore``): scores stay comparable across backends."""
        return None

    def delete(self, vector_id: str) -> None:
        if _valid_uuid(vector_id):
            self._write(qe.UpdateOperation.delete_points([str(vector_id)]))

    def update(
        self, vector_id: str, vector: Sequence[float] | None = None, payload: dict[str, Any] | None = None
    ) -> None:
        """Like mem0's Qdrant store: both given -> replace the point; payload only -> merge into it."""
        pid = str(vector_id)
        if vector is not None and payload is not None:
            self._write(qe.UpdateOperation.upsert_points([qe.Point(pid, list(vector), dict(payload))]))
            return
        if payload is not None:
            self._write(qe.UpdateOperation.set_payload([pid], dict(payload)))
        if vector is not None:
            self._write(qe.UpdateOperation.update_vectors([qe.PointVectors(pid, list(vector))]))

    def get(self, vector_id: str) -> StoredPoint | None:
        if not _valid_uuid(vector_id):
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
            vectors=qe.EdgeVectorParams(size=self.embedding_model_dims, distance=qe.Distance.Cosine),
            # We never optimize while serving, so no point may wait for an optimization to become visible.
            optimizers=qe.EdgeOptimizersConfig(prevent_unoptimized=False),
        )
        try:
            if self.shard_path.is_dir() and any(self.shard_path.iterdir()):
                shard = qe.EdgeShard.load(str(self.shard_path))
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


# --- qdrant-client ------------------------------------------------------------------------------------------------


class ServerQdrantConfig(BaseModel):
    """What mem0's VectorStoreFactory passes to ``ServerQdrantStore``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    collection_name: str = "engram_memories"
    embedding_model_dims: int = 384
    url: str | None = None
    api_key: str | None = None
    path: str | None = None


def _locked(method: Callable[..., T]) -> Callable[..., T]:
    def wrapper(self: ServerQdrantStore, *args: Any, **kwargs: Any) -> T:
        with self._lock:
            try:
                return method(self, *args, **kwargs)
            except (FilterError, StoreError):
                raise
            except Exception as exc:
                raise StoreError(f"qdrant failure: {exc}") from exc

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class ServerQdrantStore(Qdrant):
    """mem0's own Qdrant store with Engram's payload indexes and filter grammar.

    On a server (``url``) calls run concurrently. In qdrant-client's local mode (``path``, tests and small installs)
    every call is serialised: concurrent local-mode calls crash with ``sqlite3.OperationalError``.
    """

    def __init__(
        self,
        collection_name: str = "engram_memories",
        embedding_model_dims: int = 384,
        url: str | None = None,
        api_key: str | None = None,
        path: str | None = None,
    ) -> None:
        if not url and not path:
            raise ValueError("ServerQdrantStore needs a url or a path")
        local = not url
        self._lock: contextlib.AbstractContextManager[Any] = threading.RLock() if local else contextlib.nullcontext()
        try:
            with self._lock:
                if local:
                    super().__init__(collection_name, embedding_model_dims, path=path, on_disk=True)
                else:
                    client = QdrantClient(url=url, api_key=api_key)
                    super().__init__(collection_name, embedding_model_dims, client=client, on_disk=True)
        except Exception as exc:
            raise StoreError(f"cannot open qdrant collection {collection_name!r}: {exc}") from exc
        self.is_local = local
        # No BM25 (fastembed would download a model): semantic scores only, like EdgeVectorStore.
        self._bm25_encoder = False

    def _create_filter_indexes(self) -> None:
        """The tenant index (``is_tenant``) plus the fields every read filters on. Local mode has no indexes."""
        if self.is_local:  # set by mem0's Qdrant.__init__ before it creates the collection
            return
        indexes: list[tuple[str, Any]] = [
            (TENANT_FIELD, models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)),
            *((field, models.PayloadSchemaType.KEYWORD) for field in KEYWORD_FIELDS),
        ]
        for field, schema in indexes:
            self.client.create_payload_index(self.collection_name, field_name=field, field_schema=schema, wait=True)

    def _create_filter(self, filters: dict[str, Any]) -> models.Filter | None:
        return to_client_filter(parse_filters(filters))

    insert = _locked(Qdrant.insert)
    _locked_search = _locked(Qdrant.search)

    def search(
        self, query: str, vectors: list[float], top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> list[Any]:
        return builtins.list(self._locked_search(query, vectors, wanted(top_k), filters))

    search_batch = _locked(Qdrant.search_batch)
    update = _locked(Qdrant.update)
    list_cols = _locked(Qdrant.list_cols)
    delete_col = _locked(Qdrant.delete_col)
    col_info = _locked(Qdrant.col_info)
    list = _locked(Qdrant.list)
    reset = _locked(Qdrant.reset)

    def keyword_search(self, query: str, top_k: int = 5, filters: dict[str, Any] | None = None) -> None:
        """No BM25 (see the class docstring)."""
        return None

    @_locked
    def delete(self, vector_id: str) -> None:
        if _valid_uuid(vector_id):
            Qdrant.delete(self, vector_id)

    @_locked
    def get(self, vector_id: str) -> StoredPoint | None:
        if not _valid_uuid(vector_id):
            return None
        found = self.client.retrieve(self.collection_name, ids=[str(vector_id)], with_payload=True)
        return StoredPoint(str(found[0].id), dict(found[0].payload or {})) if found else None

    @_locked
    def ids(self, filters: Mapping[str, Any] | None = None) -> set[str]:
        query_filter = to_client_filter(parse_filters(filters))
        found: set[str] = set()
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                self.collection_name, scroll_filter=query_filter, limit=SCROLL_PAGE, offset=offset, with_payload=False
            )
            found.update(str(r.id) for r in records)
            if offset is None:
                return found

    @_locked
    def count(self, filters: Mapping[str, Any] | None = None) -> int:
        query_filter = to_client_filter(parse_filters(filters))
        return self.client.count(self.collection_name, count_filter=query_filter, exact=True).count

    @_locked
    def ping(self) -> None:
        self.client.get_collection(self.collection_name)

    def flush(self) -> None:
        """Qdrant makes its own writes durable."""

    @_locked
    def close(self) -> None:
        self.client.close()
