"""Mem0's client against Engram's Mem0 routes, and Engram's own REST, on one server: the same memories and searches.

    .venv/bin/python bench/mem0_compat.py [--memories 1000] [--searches 200]

Starts `engram serve` on a fresh embedded deployment (SQLite + qdrant-edge) with two accounts. One gets the memories
through mem0ai's MemoryClient (``add`` with ``infer=False`` and a ``user_id``), the other the same texts through
``POST /v1/memories`` with the same ``end_user``. Then the same queries run through ``MemoryClient.search`` with
``filters={"user_id": ...}`` and through ``POST /v1/memories/search`` with ``end_user``, alternating one call each so
that both see the machine in the same state. Both clients are httpx over keep-alive connections. Figures are
per-call latencies of sequential calls; the target is a search p50 ratio (Mem0 route / native) within 1.1x.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

import httpx

ROOT = Path(__file__).resolve().parent.parent
ENGRAM = str(Path(sys.executable).with_name("engram"))
END_USER = "bench-user"
TOPICS = ["flight", "hotel", "vegan", "chess", "piano", "budget", "museum", "coffee", "train", "beach", "cello", "hike"]
PLACES = ["Porto", "Lisbon", "Kyoto", "Oslo", "Lima", "Accra", "Perth", "Quebec"]


def _texts(n: int, rng: random.Random) -> list[str]:
    return [
        f"The user mentioned {rng.choice(TOPICS)} and {rng.choice(TOPICS)} while planning a trip to "
        f"{rng.choice(PLACES)} (note {i})"
        for i in range(n)
    ]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _server(data_dir: Path) -> Iterator[tuple[str, list[str]]]:
    """`engram serve` on ``data_dir`` with two accounts; yields its URL and a write key of each."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(ENGRAM_DATA_DIR=str(data_dir), ENGRAM_PORT=str(port), MEM0_TELEMETRY="False")
    plan = {"requests_per_minute": 10**6, "key_requests_per_minute": 10**6, "max_memories": 10**7}
    env["ENGRAM_PLANS"] = json.dumps({"free": plan})

    def engram(*args: str) -> str:
        return subprocess.run([ENGRAM, *args], env=env, check=True, capture_output=True, text=True).stdout.strip()

    engram("migrate")
    keys = [engram("keys", "create", engram("users", "create", f"bench{i}@example.test")) for i in range(2)]
    proc = subprocess.Popen([ENGRAM, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("engram serve did not come up")
            time.sleep(0.1)
        yield url, keys
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """Milliseconds one call took, and what it returned."""
    start = time.perf_counter()
    result = call(*args, **kwargs)
    return (time.perf_counter() - start) * 1000, result


def _row(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"{name:<28} p50 {statistics.median(samples):7.2f} ms   p95 {p95:7.2f} ms   n={len(samples)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261127)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    texts = _texts(args.memories, rng)
    queries = [f"{rng.choice(TOPICS)} in {rng.choice(PLACES)}" for _ in range(args.searches)]

    from mem0 import MemoryClient

    with tempfile.TemporaryDirectory(prefix="bench-mem0-") as tmp, _server(Path(tmp)) as (url, (mem0_key, rest_key)):
        mem0 = MemoryClient(api_key=mem0_key, host=url)
        rest = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {rest_key}"}, timeout=60)
        adds: dict[str, list[float]] = {"mem0 add": [], "native add": []}
        for text in texts:
            message = [{"role": "user", "content": text}]
            adds["mem0 add"].append(_timed(mem0.add, message, user_id=END_USER, infer=False)[0])
            body = {"content": text, "end_user": END_USER}
            adds["native add"].append(_timed(rest.post, "/v1/memories", json=body)[0])
        searches: dict[str, list[float]] = {"mem0 search": [], "native search": []}
        hits = {"mem0": 0, "native": 0}
        for i, query in enumerate(queries):
            for side in ("mem0", "native") if i % 2 == 0 else ("native", "mem0"):
                if side == "mem0":
                    took, found = _timed(mem0.search, query, filters={"user_id": END_USER}, top_k=10)
                    hits["mem0"] += len(found["results"])
                else:
                    query_body: dict[str, Any] = {"query": query, "end_user": END_USER, "limit": 10}
                    took, response = _timed(rest.post, "/v1/memories/search", json=query_body)
                    hits["native"] += len(response.json()["results"])
                searches[f"{side} search"].append(took)
        print(f"{args.memories} memories and {args.searches} searches, one server, sequential calls")
        for name, samples in {**adds, **searches}.items():
            print(_row(name, samples))
        add_ratio = statistics.median(adds["mem0 add"]) / statistics.median(adds["native add"])
        ratio = statistics.median(searches["mem0 search"]) / statistics.median(searches["native search"])
        print(f"results returned: mem0 {hits['mem0']}, native {hits['native']}")
        print(f"add p50 ratio (mem0 / native):    {add_ratio:.3f}x")
        print(f"search p50 ratio (mem0 / native): {ratio:.3f}x (target <= 1.10x)")
        mem0.client.close()
        rest.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
