"""Edge sync end to end: an edge on PostgreSQL and two nodes on the embedded defaults, each an `engram serve` process.

    .venv/bin/python bench/sync.py [--samples 300] [--adds 200] [--pending 10000] [--pg-host 127.0.0.1]

Prints:
- a write on node A until it is found by search on node B, through the edge, while connected: p50 and p99
  (target p99 <= 100 ms);
- catch-up: N changes written on node A while the edge was down, then the edge returns: the time from the edge
  answering again until every node and the edge hold them all (target <= 5 s), and the drain rate (>= 2,000/s);
- the cost of sync on the local write path: add p50 on node A before it was linked and once linked, and the ratio
  (target <= 1.1). Adds go one at a time, 50 ms apart, in both runs: the edge and node B share this machine's
  cores, and back-to-back adds would measure how the push competes with the next add for a core.
Search is polled every few milliseconds, so a latency figure includes up to one poll interval and one search. 300
probes make the p99 the third slowest (with 100 it was the slowest alone, which one stall of the disk or the machine
decides); the slowest is printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

os.environ.setdefault("MEM0_TELEMETRY", "False")

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.sync.processes import Deployment, link_with_client  # noqa: E402

POLL_SECONDS = 0.002
# Between two adds of the write-path figure, on both sides of the ratio.
ADD_PAUSE_SECONDS = 0.05


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def line(name: str, samples: list[float], extra: str = "") -> None:
    print(f"{name:<48} p50 {pct(samples, 0.5):8.2f} ms   p99 {pct(samples, 0.99):8.2f} ms  {extra}", flush=True)


def _pg_database(host: str, port: int, user: str) -> tuple[str, str]:
    import asyncpg  # type: ignore[import-untyped]

    name = f"engram_bench_sync_{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        conn = await asyncpg.connect(host=host, port=port, user=user, database="postgres")
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    asyncio.run(create())
    return name, f"postgresql+asyncpg://{user}@{host}:{port}/{name}"


def _drop_pg_database(host: str, port: int, user: str, name: str) -> None:
    import asyncpg

    async def drop() -> None:
        conn = await asyncpg.connect(host=host, port=port, user=user, database="postgres")
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())


def _count(node: Deployment, user_id: str) -> int:
    with sqlite3.connect(f"file:{node.data_dir / 'engram.db'}?mode=ro", uri=True, timeout=30) as db:
        return int(db.execute("SELECT count(*) FROM memories WHERE user_id = ?", (user_id,)).fetchone()[0])


def _pending(node: Deployment) -> int:
    """What the node's link has still to push (read from its database, as `engram sync status` does)."""
    with sqlite3.connect(f"file:{node.data_dir / 'engram.db'}?mode=ro", uri=True, timeout=30) as db:
        row = db.execute(
            "SELECT count(DISTINCT c.memory_id) FROM memory_changes c JOIN sync_links l ON c.user_id = l.local_user_id "
            "WHERE c.seq > l.push_seq AND (c.source IS NULL OR c.source != l.id)"
        ).fetchone()
        return int(row[0])


def _adds(http: httpx.Client, n: int, label: str) -> list[float]:
    """Adds one at a time, a little apart, as an agent writes: what each costs, not how many fit in a second."""
    took = []
    for i in range(n):
        started = time.perf_counter()
        response = http.post("/v1/memories", json={"content": f"{label} add {i} {uuid.uuid4().hex}"})
        took.append(time.perf_counter() - started)
        response.raise_for_status()
        time.sleep(ADD_PAUSE_SECONDS)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--adds", type=int, default=200)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--pg-host", default=os.environ.get("ENGRAM_TEST_PG_HOST", "127.0.0.1"))
    parser.add_argument("--pg-port", type=int, default=int(os.environ.get("ENGRAM_TEST_PG_PORT", "5432")))
    parser.add_argument("--pg-user", default=os.environ.get("ENGRAM_TEST_PG_USER", "postgres"))
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    pg_name, pg_url = _pg_database(args.pg_host, args.pg_port, args.pg_user)
    edge = Deployment(root / "edge", pg_url)
    a, b = Deployment(root / "a"), Deployment(root / "b")
    try:
        for deployment in (edge, a, b):
            deployment.setup()
        edge_user, _ = edge.user()
        (a_user, a_key), (b_user, b_key) = a.user(), b.user()
        for deployment in (edge, a, b):
            deployment.start()
        with a.client(a_key) as ha, b.client(b_key) as hb:
            _adds(ha, 20, "warm-up")
            unlinked = _adds(ha, args.adds, "unlinked")

            link_with_client(a, edge, a_user, edge_user, "bench a")
            link_with_client(b, edge, b_user, edge_user, "bench b")
            deadline = time.monotonic() + 120
            while _count(b, b_user) < 20 + args.adds:
                assert time.monotonic() < deadline, "the first exchange did not finish"
                time.sleep(0.1)
            _adds(ha, 20, "linked warm-up")
            linked = _adds(ha, args.adds, "linked")

            # A write on A until B finds it by search.
            seen = []
            for i in range(args.samples):
                content = f"replication probe {i} {uuid.uuid4().hex[:12]}"
                started = time.perf_counter()
                memory_id = ha.post("/v1/memories", json={"content": content}).json()["id"]
                while True:
                    found = hb.post("/v1/memories/search", json={"query": content, "limit": 1, "threshold": 0})
                    if [r["id"] for r in found.json()["results"]] == [memory_id]:
                        break
                    if time.perf_counter() - started > 30:
                        raise RuntimeError(f"probe {i} did not reach node B in 30 s")
                    time.sleep(POLL_SECONDS)
                seen.append(time.perf_counter() - started)
                time.sleep(0.02)

            # Catch-up: the edge goes away, A writes, the edge returns.
            before_b = _count(b, b_user)
            edge.stop()
            body = {"memories": [{"content": f"offline write {n} {uuid.uuid4().hex}"} for n in range(100)]}
            written = 0
            while written < args.pending:
                batch = min(100, args.pending - written)
                ha.post("/v1/memories", json={"memories": body["memories"][:batch]}, timeout=300).raise_for_status()
                written += batch
            edge.start()
            back = time.perf_counter()
            target = before_b + args.pending
            while _count(b, b_user) < target or _pending(a) > 0:
                if time.perf_counter() - back > 600:
                    raise RuntimeError("catch-up did not finish in 10 minutes")
                time.sleep(0.05)
            caught_up = time.perf_counter() - back

        cores = os.cpu_count()
        print(f"edge sync: {args.samples} probes, {args.adds} adds each way, {args.pending} pending, {cores} cores")
        line("write on A -> found by search on B", seen, f"(target p99 <= 100 ms)  slowest {max(seen) * 1000:.2f} ms")
        rate = args.pending / caught_up
        print(
            f"{'catch-up after the edge returns':<48} {caught_up:8.2f} s   drain {rate:8.0f} changes/s"
            "  (targets <= 5 s, >= 2000/s)"
        )
        ratio = statistics.median(linked) / statistics.median(unlinked)
        line("add on A, not linked", unlinked)
        line("add on A, linked", linked, f"ratio of p50s {ratio:.2f} (target <= 1.1)")
    finally:
        for deployment in (edge, a, b):
            deployment.stop()
        _drop_pg_database(args.pg_host, args.pg_port, args.pg_user, pg_name)


if __name__ == "__main__":
    main()
