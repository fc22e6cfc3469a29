"""The embedded index in a process of its own: ``EdgeVectorStore``'s methods, each call run by a child process.

Why: qdrant-edge holds the GIL for the whole of every call. In the server's process each search's two passes (0.4-0.7
ms at a few hundred points a tenant) were time in which no other request's Python ran: at 50 clients a quarter of the
time the GIL was held went to those queries, a third with the search's own Python around them (py-spy --gil). In a
child they run beside the server's Python instead of taking turns with it (bench/load.py at 50 clients and 16 or 32
requests in service: 207 and 215 requests a second against 174 and 176 in-process).

How: the child is ``python -m app.memories.vector_stores.edge_process`` holding one end of CONNECTIONS socket pairs,
a thread for each, running one call at a time. A caller borrows a free connection for its call, so up to CONNECTIONS
calls run at once and the rest wait for one. Arguments and results cross as pickles; errors cross as themselves.

Lifetime: the child owns the shard and its lock file. ``close`` lets it close the shard (its final flush) and waits
for it to exit. It ignores Ctrl-C, which a terminal sends to the whole process group: the server closes it as it shuts
down. When the server dies without closing it, its connections end: it closes the shard and exits, so no orphan keeps
the index locked. When the child dies, a new one opens the same shard, whose write-ahead log kept every acknowledged
write, and the calls the dead one was running run again there (every call is idempotent); a call that fails twice so
is a StoreError (503).
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import pickle
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Any

from app.memories.vector_stores.base import StoredPoint, StoreError, wanted

log = logging.getLogger(__name__)

CONNECTIONS = 8
# How long close waits for the child to flush and exit before killing it.
STOP_SECONDS = 30.0

__all__ = ["CONNECTIONS", "EdgeIndexProcess"]


class _ChildGone(StoreError):
    """The child died (or its connection broke) while a call was on its way."""


class _Child:
    """One child process and the parent's ends of its connections."""

    def __init__(self, config: dict[str, Any]) -> None:
        pairs = [socket.socketpair() for _ in range(CONNECTIONS)]
        fds = [theirs.fileno() for _, theirs in pairs]
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__, json.dumps({**config, "fds": fds})],
                pass_fds=fds,
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            for ours, _ in pairs:
                ours.close()
            raise
        finally:
            for _, theirs in pairs:
                theirs.close()
        self.connections = [Connection(ours.detach()) for ours, _ in pairs]
        self.free: queue.SimpleQueue[Connection] = queue.SimpleQueue()
        self.rebuilt = False  # what the child said of its shard when it opened it

    def gone(self) -> _ChildGone:
        return _ChildGone(f"the vector index process is gone (exit code {self.process.poll()})")

    def end(self) -> int:
        """Wait for the child to be gone (killing it if it lingers past STOP_SECONDS); its exit code."""
        try:
            return self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def receive(self, connection: Connection) -> Any:
        try:
            ok, value = connection.recv()
        except (EOFError, OSError) as exc:
            raise self.gone() from exc
        if ok:
            return value
        raise value

    def stop(self) -> None:
        for connection in self.connections:
            connection.close()
        self.end()


class EdgeIndexProcess:
    """``EdgeVectorStore`` run by a child process: the same constructor, methods and errors."""

    def __init__(
        self,
        collection_name: str = "engram_memories",
        embedding_model_dims: int = 384,
        path: str = "",
        flush_interval: float = 1.0,
    ) -> None:
        if not path:
            raise ValueError("EdgeIndexProcess needs a path")
        self.collection_name = collection_name
        self.embedding_model_dims = embedding_model_dims
        self.flush_interval = flush_interval
        from app.observability.logs import configured

        self._config = {
            "collection_name": collection_name,
            "embedding_model_dims": embedding_model_dims,
            "path": path,
            "flush_interval": flush_interval,
            # The child writes to the server's stderr: in the server's format (a collector reads JSON lines there).
            "logging": configured(),
        }
        self._closed = False
        self._revive_lock = threading.Lock()
        self._child = self._start()
        self.rebuilt = self._child.rebuilt

    @property
    def pid(self) -> int:
        """The child's process id (for tests and operators)."""
        return self._child.process.pid

    # mem0's VectorStoreBase ------------------------------------------------------------------------------------

    def create_col(self, name: str, vector_size: int, distance: str = "cosine") -> None:
        """The shard is created on open; nothing to do."""

    def insert(
        self,
        vectors: Sequence[Sequence[float]],
        payloads: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
    ) -> None:
        self._call("insert", [list(v) for v in vectors], payloads, ids)

    def search(
        self, query: str, vectors: Sequence[float], top_k: int = 5, filters: Mapping[str, Any] | None = None
    ) -> list[StoredPoint]:
        # The caller's limit is in this process's context (``SEARCH_LIMIT``): the child is told it as top_k.
        rows: list[tuple[str, dict[str, Any], float | None]] = self._call(
            "search", query, list(vectors), wanted(top_k), filters
        )
        return [StoredPoint(*row) for row in rows]

    def search_batch(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("mem0 batches searches only for fact extraction's entity store, which is off")

    def keyword_search(self, query: str, top_k: int = 5, filters: dict[str, Any] | None = None) -> None:
        """BM25 is fused inside ``search``, as in ``EdgeVectorStore``."""
        return None

    def delete(self, vector_id: str) -> None:
        self._call("delete", vector_id)

    def update(
        self, vector_id: str, vector: Sequence[float] | None = None, payload: dict[str, Any] | None = None
    ) -> None:
        self._call("update", vector_id, None if vector is None else list(vector), payload)

    def get(self, vector_id: str) -> StoredPoint | None:
        point: StoredPoint | None = self._call("get", vector_id)
        return point

    def list_cols(self) -> list[str]:
        return [self.collection_name]

    def delete_col(self) -> None:
        self._call("delete_col")

    def col_info(self) -> dict[str, Any]:
        info: dict[str, Any] = self._call("col_info")
        return info

    def list(self, filters: Mapping[str, Any] | None = None, top_k: int | None = 100) -> tuple[list[StoredPoint], Any]:
        found: tuple[list[StoredPoint], Any] = self._call("list", filters, top_k)
        return found

    def reset(self) -> None:
        self._call("reset")
        self.rebuilt = False

    # Engram's extras -------------------------------------------------------------------------------------------

    def ids(self, filters: Mapping[str, Any] | None = None) -> set[str]:
        found: set[str] = self._call("ids", filters)
        return found

    def count(self, filters: Mapping[str, Any] | None = None) -> int:
        found: int = self._call("count", filters)
        return found

    def vectors(self, ids: Sequence[str]) -> dict[str, tuple[dict[str, Any], builtins.list[float]]]:
        found: dict[str, tuple[dict[str, Any], builtins.list[float]]] = self._call("vectors", list(ids))
        return found

    def packed_vectors(self, ids: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        found: dict[str, tuple[str, bytes]] = self._call("packed_vectors", list(ids))
        return found

    def relex(self) -> int:
        fixed: int = self._call("relex")
        return fixed

    def ping(self) -> None:
        self._call("ping")

    def flush(self) -> None:
        self._call("flush")

    def optimize(self) -> bool:
        """Build HNSW and vacuum, in the child: the server's threads go on; calls to the index wait for it."""
        done: bool = self._call("optimize")
        return done

    def close(self) -> None:
        with self._revive_lock:
            if self._closed:
                return
            self._closed = True
            child = self._child
        try:
            connection = child.free.get(timeout=STOP_SECONDS)
            connection.send(("close", ()))
            child.receive(connection)
        except (queue.Empty, StoreError, OSError):
            pass  # gone already, or stuck: stop() waits, then kills
        child.stop()

    # internals ------------------------------------------------------------------------------------------------

    def _start(self) -> _Child:
        child = _Child(self._config)
        try:
            # The child's first word, on its first connection: the shard is open (and whether it was rebuilt), or
            # why not (IndexLocked: another process has it).
            child.rebuilt = bool(child.receive(child.connections[0]))
        except BaseException:
            child.stop()
            raise
        for connection in child.connections:
            child.free.put(connection)
        return child

    def _call(self, method: str, *args: Any) -> Any:
        child = self._alive()
        try:
            return self._call_once(child, method, args)
        except _ChildGone as gone:
            # Every call is idempotent (writes are upserts, payload merges and deletes by id), so one that may or may
            # not have run before the child died runs again on the next; a call that kills the child itself fails
            # there too, once more, and is reported.
            log.error("the vector index process died during %s: %s", method, gone)
            child.end()
            return self._call_once(self._alive(), method, args)

    def _call_once(self, child: _Child, method: str, args: tuple[Any, ...]) -> Any:
        connection = child.free.get()
        try:
            try:
                connection.send((method, args))
            except OSError as exc:
                raise child.gone() from exc
            return child.receive(connection)
        finally:
            child.free.put(connection)

    def _alive(self) -> _Child:
        """The running child; a new one when the last one died."""
        child = self._child
        if child.process.poll() is None and not self._closed:
            return child
        with self._revive_lock:
            if self._closed:
                raise StoreError("the vector index is closed")
            if self._child is child:
                log.error("the vector index process exited (code %s): starting another", child.end())
                # Its connections are left to close with their last borrower: closing them under a thread still
                # using one could hand its descriptor number to the new child's sockets.
                self._child = self._start()
            return self._child


# --- the child ------------------------------------------------------------------------------------------------


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it crosses a pipe as itself, else a StoreError saying what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return StoreError(f"{type(exc).__name__}: {exc}")
    return exc


def _search_rows(store: Any, *args: Any) -> list[tuple[str, dict[str, Any], float | None]]:
    return [(point.id, point.payload, point.score) for point in store.search(*args)]


# Calls whose results cross as plain tuples: every search's hits do, and a pickled dataclass costs four times a tuple
# each way (10 hits: 19 against 4 us to pickle, 21 against 6 to unpickle).
_AS_ROWS = {"search": _search_rows}


def _serve(store: Any, connection: Connection, done: threading.Event) -> None:
    while not done.is_set():
        try:
            method, args = connection.recv()
        except (EOFError, OSError):
            done.set()  # the server closed its end, or died: shut down
            return
        if method == "close":
            done.set()  # the main thread closes the shard (its final flush) once it wakes
            connection.send((True, None))
            return
        try:
            as_rows = _AS_ROWS.get(method)
            reply: tuple[bool, Any] = (True, as_rows(store, *args) if as_rows else getattr(store, method)(*args))
        except Exception as exc:
            reply = (False, _portable(exc))
        try:
            try:
                connection.send(reply)  # pickled whole before a byte is written
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                connection.send((False, StoreError(f"the result of {method} cannot cross to the server: {exc}")))
        except (OSError, ValueError):
            done.set()
            return


def _child(config: dict[str, Any]) -> int:
    from app.observability.logs import configure_logging

    logging_as = config.pop("logging", None)
    if logging_as is not None:
        configure_logging(*logging_as)
    else:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s [index process] %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    connections = [Connection(fd) for fd in config.pop("fds")]
    from app.memories.vector_stores.edge import EdgeVectorStore

    try:
        store = EdgeVectorStore(**config)
    except Exception as exc:
        connections[0].send((False, _portable(exc)))
        return 1
    connections[0].send((True, store.rebuilt))
    for number, connection in enumerate(connections):
        threading.Thread(target=_serve, args=(store, connection, done), name=f"index-{number}", daemon=True).start()
    while not done.wait(0.5):  # a timed wait lets SIGTERM's handler run
        pass
    store.close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    sys.exit(_child(json.loads(sys.argv[1])))
