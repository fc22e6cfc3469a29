"""The embedded index in a process of its own answers as the in-process one does, errors included, and outlives
neither its server nor its own death: the shard is never left locked, and no acknowledged write is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from app.memories.vector_stores import EdgeVectorStore, FilterError, IndexLocked, StoreError
from app.memories.vector_stores.edge_process import EdgeIndexProcess

# Generous: only a hang should reach it.
HANG = 60.0
# Where the owner processes these tests start find the app.
ROOT = Path(__file__).resolve().parents[2]

WORDS = [
    "hiking",
    "painting",
    "pottery",
    "adoption",
    "agencies",
    "basketball",
    "trophy",
    "violin",
    "camping",
    "river",
    "mountain",
    "sunrise",
]


def _fill(store: EdgeVectorStore | EdgeIndexProcess, n: int) -> list[str]:
    ids = [str(uuid.UUID(int=i + 1)) for i in range(n)]
    payloads = [
        {
            "user_id": "u_1" if i % 3 else "u_2",
            "data": " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 5)),
            "visibility": "user",
            "scope": "user",
            "tags": [f"t{i % 4}"],
        }
        for i in range(n)
    ]
    vectors = [[1.0, float(i % 7), float(i % 5)] + [0.0] * 381 for i in range(n)]
    store.insert(vectors, payloads, ids)
    return ids


def _exited(pid: int) -> bool:
    """Whether the process ``pid`` ends (gone, or a zombie its parent has not reaped yet) before the hang guard."""
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.02)
    return False


def test_the_index_process_answers_every_call_as_the_in_process_store(tmp_path: Path) -> None:
    inside = EdgeVectorStore(path=str(tmp_path / "inside"), flush_interval=0)
    apart = EdgeIndexProcess(path=str(tmp_path / "apart"), flush_interval=0)
    try:
        assert apart.pid != os.getpid() and not apart.rebuilt
        ids = _fill(inside, 60)
        assert _fill(apart, 60) == ids
        query = [1.0, 2.0, 1.0] + [0.0] * 381
        for filters in ({"user_id": "u_1"}, {"user_id": "u_2", "tags": "t1"}):
            assert apart.search("hiking river", query, 10, filters) == inside.search("hiking river", query, 10, filters)
        assert apart.get(ids[1]) == inside.get(ids[1])
        assert apart.get(str(uuid.uuid4())) is None
        assert apart.count({"user_id": "u_1"}) == inside.count({"user_id": "u_1"}) == 40
        assert apart.ids({"user_id": "u_2"}) == inside.ids({"user_id": "u_2"})
        assert apart.vectors(ids[:3]) == inside.vectors(ids[:3])
        assert apart.packed_vectors(ids[:3]) == inside.packed_vectors(ids[:3])
        for store in (inside, apart):
            store.update(ids[1], payload={"tags": ["changed"]})
            store.delete(ids[2])
        assert apart.get(ids[1]) == inside.get(ids[1]) and apart.get(ids[2]) is None
        assert apart.list({"user_id": "u_1"}, 5)[0] == inside.list({"user_id": "u_1"}, 5)[0]
        assert apart.relex() == inside.relex() == 0
        apart.ping()
        apart.flush()
    finally:
        inside.close()
        apart.close()


def test_errors_cross_from_the_index_process_as_themselves(tmp_path: Path) -> None:
    apart = EdgeIndexProcess(path=str(tmp_path), flush_interval=0)
    try:
        with pytest.raises(FilterError, match="unsupported filter operator"):
            apart.search("x", [1.0] * 384, 5, {"user_id": "u_1", "tags": {"$nope": 1}})
        with pytest.raises(IndexLocked) as refused:  # the child's own refusal, with the path it names
            EdgeIndexProcess(path=str(tmp_path))
        assert refused.value.path == tmp_path / "engram_memories"
        with pytest.raises(IndexLocked):  # and an in-process store is refused as well: one lock for both
            EdgeVectorStore(path=str(tmp_path))
        apart.count()  # the refusals left the running child alone
    finally:
        apart.close()
    EdgeVectorStore(path=str(tmp_path)).close()  # closed: the shard is free


def test_closing_flushes_and_frees_the_shard_for_the_next_opener(tmp_path: Path) -> None:
    apart = EdgeIndexProcess(path=str(tmp_path))  # background flushes only: close must do the last one
    ids = _fill(apart, 20)
    pid = apart.pid
    apart.close()
    assert _exited(pid)
    with pytest.raises(StoreError, match="closed"):
        apart.count()
    reopened = EdgeVectorStore(path=str(tmp_path))
    try:
        assert reopened.ids() == set(ids)
    finally:
        reopened.close()


def test_a_killed_index_process_is_replaced_on_the_same_shard_with_every_acknowledged_write(tmp_path: Path) -> None:
    apart = EdgeIndexProcess(path=str(tmp_path), flush_interval=60)  # nothing flushed: the write-ahead log keeps it
    try:
        ids = _fill(apart, 30)
        first = apart.pid
        os.kill(first, signal.SIGKILL)
        assert _exited(first)
        assert apart.ids() == set(ids)  # a new child, on the same shard, with every acknowledged write
        assert apart.pid != first
        apart.ping()
    finally:
        apart.close()


def test_the_index_process_ignores_ctrl_c_and_exits_when_its_owner_dies(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group: the server, not the index, decides when to stop. A server killed
    outright leaves the child's connections closed, and the child frees the shard instead of keeping it locked."""
    owner_code = (
        "import sys, time\n"
        "from app.memories.vector_stores.edge_process import EdgeIndexProcess\n"
        "store = EdgeIndexProcess(path=sys.argv[1])\n"
        "print(store.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", owner_code, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert owner.stdout is not None
        child = int(owner.stdout.readline())
        os.kill(child, signal.SIGINT)
        time.sleep(0.5)
        assert Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # still running
        owner.kill()
        owner.wait(timeout=HANG)
        assert _exited(child)
    finally:
        owner.kill()
    EdgeVectorStore(path=str(tmp_path)).close()  # nobody holds the shard


def test_a_server_whose_index_process_dies_goes_on_answering_with_every_memory(
    embedder: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from app.migrate import upgrade_to_head
    from tests.conftest import _settings
    from tests.harness import make_account, serve

    tmp = tmp_path_factory.mktemp("index-process")
    url = f"sqlite+aiosqlite:///{tmp / 'engram.db'}"
    upgrade_to_head(url)
    with serve(_settings(tmp, url), embedder=embedder) as server:  # type: ignore[arg-type]
        store = server.container.engine._store
        assert isinstance(store, EdgeIndexProcess)  # the default: the index runs in a process of its own
        me = make_account(server)
        with server.client(me.key) as http:
            written = [http.post("/v1/memories", json={"content": f"the kayak trip number {i}"}) for i in range(5)]
            assert all(r.status_code == 201 for r in written)
            first = store.pid
            os.kill(first, signal.SIGKILL)
            assert _exited(first)
            found = http.post("/v1/memories/search", json={"query": "kayak trip", "limit": 10})
            assert found.status_code == 200, found.text
            assert {r["id"] for r in found.json()["results"]} == {r.json()["id"] for r in written}
            assert http.get("/readyz").status_code == 200
            assert store.pid != first


def test_the_index_process_logs_in_its_servers_format(tmp_path: Path) -> None:
    """It writes to the server's stderr, where a collector reads JSON lines: its warnings are JSON lines too (here,
    that an index from before hybrid search is emptied to be rebuilt)."""
    import json

    import qdrant_edge as qe

    shard_path = tmp_path / "engram_memories"
    shard_path.mkdir()
    config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=384, distance=qe.Distance.Cosine))
    qe.EdgeShard.create(str(shard_path), config).close()
    owner_code = (
        "import sys\n"
        "from app.observability.logs import configure_logging\n"
        "from app.memories.vector_stores.edge_process import EdgeIndexProcess\n"
        "configure_logging('json', 'info')\n"
        "store = EdgeIndexProcess(path=sys.argv[1])\n"
        "assert store.rebuilt\n"
        "store.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", owner_code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=HANG,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    assert any("predates hybrid search" in line["message"] for line in lines), done.stderr


def test_a_result_that_cannot_cross_to_the_server_is_an_error_not_a_hang(tmp_path: Path) -> None:
    apart = EdgeIndexProcess(path=str(tmp_path), flush_interval=0)
    try:
        # No store method returns such a thing; the store's own lock object is the one thing at hand that won't pickle.
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(1)
        try:
            call = pool.submit(apart._call, "__getattribute__", "_gate")
            with pytest.raises(StoreError, match="cannot cross"):
                call.result(timeout=HANG)  # before: the child's thread died and this waited forever
        finally:
            pool.shutdown(wait=False)
        assert apart.count() == 0  # the connection that carried it still works
        for _ in range(3 * 8):  # and so do all the others, in turn
            apart.ping()
    finally:
        apart.close()
