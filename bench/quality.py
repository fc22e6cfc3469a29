"""Retrieval quality on LoCoMo's dev split, through a real `engram serve` over HTTP.

    .venv/bin/python bench/quality.py [--data ../shared/data/locomo-dev.zip] [--out result.json] [--keep DIR]

Each conversation belongs to its own user. Every dialog turn is stored through `POST /v1/memories` as one memory,
content "<speaker>: <text>", metadata {"dia_id", "date": the session's date_time}. A turn that shares a photo carries
it as LoCoMo's own retrieval baselines do, "... and shared <the photo's caption>" (the dataset gives every shared
image as its BLIP caption); `--text-only` leaves the photo out, as this benchmark did before. Every answerable question
(categories 1-4) is sent as-is to `POST /v1/memories/search` with `limit` 10 and nothing else. A question is found at
k when every one of its evidence turns is among the first k results (strict recall@k). Prints recall@5 and @10
overall and per category, and the p50/p99 latency of the searches.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.zip"  # ../shared from the project root
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
BATCH = 100


@dataclass
class Conversation:
    name: str
    turns: list[dict[str, Any]]  # {"content", "metadata"}
    questions: list[dict[str, Any]]  # {"question", "evidence", "category"}


@dataclass
class Outcome:
    found5: list[bool] = field(default_factory=list)
    found10: list[bool] = field(default_factory=list)
    categories: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    misses: list[dict[str, Any]] = field(default_factory=list)


def said(turn: dict[str, Any], with_photo: bool) -> str:
    """A turn as a memory: what was said and, as in LoCoMo's reference retrieval code, the photo shared with it."""
    content = f"{turn['speaker']}: {turn['text']}"
    if with_photo and turn.get("blip_caption"):
        content += f" and shared {turn['blip_caption']}"
    return content


def load(path: Path, with_photo: bool = True) -> list[Conversation]:
    conversations = []
    with zipfile.ZipFile(path) as archive:
        for name in sorted(n for n in archive.namelist() if n.endswith(".json")):
            data = json.loads(archive.read(name))
            sessions = sorted((int(m.group(1)), key) for key in data if (m := re.fullmatch(r"session_(\d+)", key)))
            turns = [
                {
                    "content": said(turn, with_photo),
                    "metadata": {"dia_id": turn["dia_id"], "date": data[f"{key}_date_time"]},
                }
                for _, key in sessions
                for turn in data[key]
            ]
            questions = [
                {"question": q["question"], "evidence": list(q["evidence"]), "category": q["category"]}
                for q in data["qa"]
                if q["category"] in CATEGORIES
            ]
            conversations.append(Conversation(Path(name).stem, turns, questions))
    return conversations


def engram(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("engram")), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def start_server(env: dict[str, str], base: str) -> subprocess.Popen[bytes]:
    server = subprocess.Popen([str(Path(sys.executable).with_name("engram")), "serve"], env=env)
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            raise RuntimeError("server did not come up")
        time.sleep(0.2)


def store(client: httpx.Client, conversation: Conversation) -> None:
    for start in range(0, len(conversation.turns), BATCH):
        response = client.post("/v1/memories", json={"memories": conversation.turns[start : start + BATCH]})
        response.raise_for_status()


def ask(client: httpx.Client, conversation: Conversation, outcome: Outcome, extra: dict[str, Any]) -> None:
    for q in conversation.questions:
        started = time.perf_counter()
        response = client.post("/v1/memories/search", json={"query": q["question"], "limit": 10, **extra})
        outcome.seconds.append(time.perf_counter() - started)
        response.raise_for_status()
        got = [r["metadata"].get("dia_id") for r in response.json()["results"]]
        found5 = all(e in got[:5] for e in q["evidence"])
        found10 = all(e in got[:10] for e in q["evidence"])
        outcome.found5.append(found5)
        outcome.found10.append(found10)
        outcome.categories.append(q["category"])
        if not found10:
            outcome.misses.append({"conversation": conversation.name, **q, "got": got})


def report(title: str, outcome: Outcome) -> dict[str, Any]:
    def recall(found: list[bool], category: int | None = None) -> float:
        picked = [f for f, c in zip(found, outcome.categories, strict=True) if category in (None, c)]
        return sum(picked) / len(picked)

    ordered = sorted(outcome.seconds)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    print(f"\n== {title}: {len(outcome.found10)} questions ==")
    print(f"{'category':<14} {'n':>5} {'recall@5':>9} {'recall@10':>10}")
    counts = defaultdict(int)
    for c in outcome.categories:
        counts[c] += 1
    rows: dict[str, Any] = {}
    for category, name in CATEGORIES.items():
        r5, r10 = recall(outcome.found5, category), recall(outcome.found10, category)
        rows[name] = {"n": counts[category], "recall@5": r5, "recall@10": r10}
        print(f"{name:<14} {counts[category]:>5} {r5:>9.3f} {r10:>10.3f}")
    r5, r10 = recall(outcome.found5), recall(outcome.found10)
    print(f"{'overall':<14} {len(outcome.found10):>5} {r5:>9.3f} {r10:>10.3f}")
    print(f"search latency over HTTP: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    return {"overall": {"recall@5": r5, "recall@10": r10}, "by_category": rows, "p50_ms": p50, "p99_ms": p99}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, help="write the figures and the misses as JSON")
    parser.add_argument("--keep", type=Path, help="use (and keep) this data directory instead of a temporary one")
    parser.add_argument("--text-only", action="store_true", help="store each turn's words without its shared photo")
    args = parser.parse_args()
    conversations = load(args.data, with_photo=not args.text_only)
    from tests.harness import free_port

    with tempfile.TemporaryDirectory(prefix="engram-quality-") as tmp:
        data_dir = args.keep or Path(tmp)
        port = free_port()
        env = dict(os.environ, ENGRAM_DATA_DIR=str(data_dir), ENGRAM_PORT=str(port), ENGRAM_LOG_LEVEL="warning")
        env["ENGRAM_PLANS"] = '{"free": {"requests_per_minute": 100000000, "max_memories": 100000000}}'
        for name in ("ENGRAM_DATABASE_URL", "ENGRAM_REDIS_URL", "ENGRAM_QDRANT_URL", "ENGRAM_QDRANT_LOCAL_PATH"):
            env.pop(name, None)
        engram("migrate", env=env)
        keys = {}
        for conversation in conversations:
            user = engram("users", "create", f"locomo-{conversation.name}@example.test", env=env)
            keys[conversation.name] = engram("keys", "create", user, "--name", "bench", env=env)
        base = f"http://127.0.0.1:{port}"
        server = start_server(env, base)
        try:
            clients = {
                name: httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120)
                for name, key in keys.items()
            }
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=2) as pool:
                list(pool.map(lambda c: store(clients[c.name], c), conversations))
            turns = sum(len(c.turns) for c in conversations)
            print(f"stored {turns} turns in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            runs: list[tuple[str, dict[str, Any]]] = [("default search", {})]
            results: dict[str, Any] = {}
            for title, extra in runs:
                outcome = Outcome()
                for conversation in conversations:
                    ask(clients[conversation.name], conversation, outcome, extra)
                results[title] = {**report(title, outcome), "misses": outcome.misses}
            for client in clients.values():
                client.close()
        finally:
            server.terminate()
            server.wait(timeout=60)
        if args.out:
            args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
