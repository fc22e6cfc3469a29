"""Many clients at once: a closed loop of searches and adds across tenants, the way a hosted Engram is used.

    .venv/bin/python bench/load.py [--clients 1,50,200] [--duration 60] [--tenants 10] [--memories 200]
                                   [--config embedded|shared] [--skip-neighbour] [--skip-floor]

Each client holds one keep-alive connection and sends its next request when the last one is answered: 80% searches
and 20% adds, as one of ``--tenants`` tenants (each starts with ``--memories`` memories, added over the REST API).
A refused request (429 or 503) waits for its ``Retry-After`` before the client goes on, as a well-behaved client does.
The generator is raw asyncio streams, so that it takes little of the CPU it shares with the server on this box.

Steps, ``--duration`` seconds each:
- the floor: the project's own embedder in a separate process, in texts/s, the best of three ways of feeding it
  (batches of 32 as they come, each padded to its longest text; all texts in one call, which groups them by length;
  one text per run on each thread side by side, as the server's runners embed). Every request embeds one text, so
  this is the most the box can serve. Batches of 32 alone, the floor before, understated it by a quarter to a third
  here (392 against 499-588 texts/s);
- 1, 50 and 200 clients spread over the tenants;
- the noisy neighbour: one tenant with 5 clients alone, then beside another tenant with 150.
Each prints req/s, p50 and p99 of admitted (2xx) requests, the share refused, other errors, and the CPU seconds of the
server and of the generator; and, read from /metrics while it runs (of one instance where two share the port), where
the admission limit sat and how many texts the embedder ran at once. A limit pinned at its minimum while the server
uses less than the box says that admission, not the cores, holds the throughput back.

``--config embedded``: one `engram serve` on the embedded defaults (SQLite, qdrant-edge, no Redis).
``--config shared``: two `engram serve` instances on one PostgreSQL database and Redis, each with its own embedded
index (following the other's writes through the change log), behind one address (SO_REUSEPORT).
Plan limits are raised so that the per-minute limiter is not what is measured; admission control is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

os.environ.setdefault("MEM0_TELEMETRY", "False")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.accounts import keys as key_material  # noqa: E402
from bench.memory import WORDS  # noqa: E402

SECRET = "bench-load-secret-" + "x" * 20
REDIS_URL = "redis://127.0.0.1:6379/0"
FLOOR_CODE = """
import sys, threading, time
sys.path.insert(0, {root!r})
from app.memories.embedder import OnnxMiniLMEmbedder
texts = {texts!r}
seconds = {seconds} / 3
wide = OnnxMiniLMEmbedder(threads={threads})
narrow = OnnxMiniLMEmbedder(threads=1)
wide.embed_batch(texts[:32])
narrow.embed(texts[0])

def rate(run):
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        done += run()
    return done / (time.perf_counter() - start)

def by_32():  # batches of 32 as they come: each padded to its longest text
    for i in range(0, len(texts), 32):
        wide.embed_batch(texts[i : i + 32])
    return len(texts)

def sorted_batches():  # one call of all 512: the embedder groups them by length, so little is padded
    wide.embed_batch(texts)
    return len(texts)

def one_per_core():  # one text per run on each of {threads} threads side by side, as the server's runners do
    counts = [0] * {threads}
    start = time.perf_counter()

    def work(k):
        i = k
        while time.perf_counter() - start < seconds:
            narrow.embed(texts[i % len(texts)])
            counts[k] += 1
            i += {threads}

    workers = [threading.Thread(target=work, args=(k,)) for k in range({threads})]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(counts) / (time.perf_counter() - start)

print(rate(by_32), rate(sorted_batches), one_per_core())
"""


def sentence(rng: random.Random) -> str:
    """Text of the same words as bench/memory.py's, so searches find neighbours among what is stored."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16)))


@dataclass(frozen=True)
class Tenant:
    user_id: str
    key: str


# --- the generator: HTTP/1.1 over asyncio streams --------------------------------------------------------------


class Connection:
    """One keep-alive connection; reopened when the server closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, key: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        try:
            status_line = await self.reader.readline()
            if not status_line:
                raise ConnectionError("closed")
            status = int(status_line.split()[1])
            headers: dict[str, str] = {}
            while (line := await self.reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            if headers.get("transfer-encoding") == "chunked":
                data = bytearray()
                while size := int((await self.reader.readline()).strip(), 16):
                    data += await self.reader.readexactly(size + 2)
                    del data[-2:]
                await self.reader.readline()
                payload = bytes(data)
            else:
                payload = await self.reader.readexactly(int(headers.get("content-length", "0")))
        except BaseException:
            self.close()
            raise
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, payload

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


@dataclass
class Sample:
    tenant: str
    op: str
    status: int  # 0: the connection failed or the request timed out
    seconds: float


@dataclass
class Step:
    name: str
    seconds: float
    samples: list[Sample] = field(default_factory=list)
    server_cpu: float = 0.0
    generator_cpu: float = 0.0
    limits: list[float] = field(default_factory=list)  # engram_admission_limit, read twice a second
    texts_per_run: float | None = None  # the embedder's mean batch over the step

    def of(self, tenant: str | None = None) -> list[Sample]:
        return [s for s in self.samples if tenant is None or s.tenant == tenant]

    def summary(self, tenant: str | None = None) -> dict[str, float]:
        samples = self.of(tenant)
        ok = sorted(s.seconds for s in samples if 200 <= s.status < 300)
        adds = sorted(s.seconds for s in samples if 200 <= s.status < 300 and s.op == "add")
        refused = sum(1 for s in samples if s.status in (429, 503))
        return {
            "requests": len(samples),
            "req_s": len(ok) / self.seconds,
            "p50_ms": _pct(ok, 50) * 1000,
            "p99_ms": _pct(ok, 99) * 1000,
            "add_p50_ms": _pct(adds, 50) * 1000,
            "refused_share": refused / len(samples) if samples else 0.0,
            "r429": sum(1 for s in samples if s.status == 429),
            "r503": sum(1 for s in samples if s.status == 503),
            "served_share": len(ok) / len(samples) if samples else 0.0,
            "errors": sum(1 for s in samples if not (200 <= s.status < 300) and s.status not in (429, 503)),
            "e500": sum(1 for s in samples if s.status >= 500 and s.status != 503),
        }


def _pct(values: Sequence[float], pct: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(len(values) * pct / 100))]


async def run_clients(
    host: str,
    port: int,
    plan: Sequence[Tenant],
    seconds: float,
    rng_seed: int = 7,
    request_timeout: float = 60.0,
    search_share: float = 0.8,
) -> list[Sample]:
    """One client per entry of ``plan`` (a tenant each), in a closed loop for ``seconds``."""
    samples: list[Sample] = []
    stop_at = time.monotonic() + seconds

    async def client(index: int, tenant: Tenant) -> None:
        rng = random.Random(rng_seed * 100_003 + index)
        conn = Connection(host, port)
        await asyncio.sleep(rng.random() * 0.05)  # not all at the same instant
        while time.monotonic() < stop_at:
            op = "search" if rng.random() < search_share else "add"
            if op == "search":
                path, body = "/v1/memories/search", {"query": sentence(rng), "limit": 10}
            else:
                path, body = "/v1/memories", {"content": sentence(rng)}
            start = time.perf_counter()
            try:
                status, headers, _ = await asyncio.wait_for(
                    conn.request("POST", path, tenant.key, json.dumps(body).encode()), request_timeout
                )
            except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError, ValueError):
                status, headers = 0, {}
                conn.close()
            samples.append(Sample(tenant.user_id, op, status, time.perf_counter() - start))
            if status in (429, 503):
                wait = float(headers.get("retry-after", "1") or 1)
                await asyncio.sleep(max(0.0, min(wait, stop_at - time.monotonic())))
        conn.close()

    await asyncio.gather(*(client(i, t) for i, t in enumerate(plan)))
    return samples


# --- the server(s) ------------------------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    """The running children of ``pid``: each thread lists those it started (the index's process is started from a
    worker thread), and a thread that exits hands its children to another."""
    found: set[int] = set()
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found.update(int(child) for child in listing.read_text().split())
        except OSError:
            continue
    return sorted(found)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Deployment:
    port: int
    pids: list[int]
    tenants: list[Tenant]

    def cpu(self) -> float:
        """The servers' CPU, with that of their running children (the embedded index's own process)."""
        return sum(_cpu_seconds(p) for server in self.pids for p in (server, *_children(server)))


async def _create_tenants(database_url: str, count: int) -> list[Tenant]:
    from sqlalchemy import insert
    from sqlalchemy.ext.asyncio import create_async_engine

    from app.accounts.models import ApiKey, User

    now = datetime.now(UTC)
    users, keys, tenants = [], [], []
    for i in range(count):
        new = key_material.generate_key()
        user_id = f"u_load{i:04d}"
        users.append({"id": user_id, "email": f"load{i}@example.test", "plan": "free", "created_at": now})
        keys.append(
            {
                "id": key_material.new_key_id(),
                "user_id": user_id,
                "name": "load",
                "scope": "write",
                "lookup": new.lookup,
                "key_hash": key_material.hash_key(SECRET.encode(), new.plaintext),
                "created_at": now,
            }
        )
        tenants.append(Tenant(user_id, new.plaintext))
    engine = create_async_engine(database_url)
    async with engine.begin() as conn:
        await conn.execute(insert(User), users)
        await conn.execute(insert(ApiKey), keys)
    await engine.dispose()
    return tenants


def _wait_ready(port: int, procs: Sequence[subprocess.Popen[bytes]]) -> None:
    import httpx

    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError("the server did not come up")
        time.sleep(0.2)


def _fill(port: int, tenants: Sequence[Tenant], memories: int) -> None:
    import httpx

    rng = random.Random(3)
    for tenant in tenants:
        headers = {"Authorization": f"Bearer {tenant.key}"}
        for start in range(0, memories, 100):
            batch = [{"content": sentence(rng)} for _ in range(min(100, memories - start))]
            response = httpx.post(
                f"http://127.0.0.1:{port}/v1/memories", json={"memories": batch}, headers=headers, timeout=120
            )
            response.raise_for_status()


@contextmanager
def deploy(config: str, tenant_count: int, memories: int, extra_env: dict[str, str]) -> Iterator[Deployment]:
    engram = str(Path(sys.executable).with_name("engram"))
    port = _free_port()
    base_env = dict(os.environ, ENGRAM_PORT=str(port), ENGRAM_LOG_LEVEL="warning", ENGRAM_SECRET_KEY=SECRET)
    base_env["ENGRAM_PLANS"] = json.dumps(
        {"free": {"requests_per_minute": 10**9, "key_requests_per_minute": 10**9, "max_memories": 10**9}}
    )
    base_env["ENGRAM_WATCH_PROJECTS"] = "false"
    base_env.update(extra_env)
    for name in ("ENGRAM_DATABASE_URL", "ENGRAM_REDIS_URL", "ENGRAM_DATA_DIR"):
        base_env.pop(name, None)
    procs: list[subprocess.Popen[bytes]] = []
    database = None
    with tempfile.TemporaryDirectory(prefix="engram-load-") as tmp:
        try:
            if config == "embedded":
                data_dir = Path(tmp) / "data"
                env = dict(base_env, ENGRAM_DATA_DIR=str(data_dir))
                subprocess.run([engram, "migrate"], env=env, check=True, capture_output=True)
                url = f"sqlite+aiosqlite:///{(data_dir / 'engram.db').resolve()}"
                tenants = asyncio.run(_create_tenants(url, tenant_count))
                procs.append(subprocess.Popen([engram, "serve"], env=env))
            else:
                database = f"engram_load_{uuid.uuid4().hex[:10]}"
                asyncio.run(_admin(f'CREATE DATABASE "{database}"'))
                url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{database}"
                shared = dict(base_env, ENGRAM_DATABASE_URL=url, ENGRAM_REDIS_URL=REDIS_URL, ENGRAM_REUSE_PORT="true")
                subprocess.run(
                    [engram, "migrate"], env=dict(shared, ENGRAM_DATA_DIR=tmp), check=True, capture_output=True
                )
                tenants = asyncio.run(_create_tenants(url, tenant_count))
                for n in range(2):
                    env = dict(shared, ENGRAM_DATA_DIR=str(Path(tmp) / f"node{n}"), ENGRAM_SYNC_NODE_NAME=f"i{n}")
                    procs.append(subprocess.Popen([engram, "serve"], env=env))
            _wait_ready(port, procs)
            if config != "embedded":
                time.sleep(3)  # the second instance too: SO_REUSEPORT spreads connections only over listeners
            _fill(port, tenants, memories)
            yield Deployment(port, [p.pid for p in procs], tenants)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
            if database is not None:
                asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))


async def _admin(sql: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(host="127.0.0.1", port=5432, user="postgres", database="postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


# --- steps --------------------------------------------------------------------------------------------------------


SEARCH_SHARE = 0.8


def _admission_metrics(port: int) -> tuple[float | None, float, float]:
    """The admission limit and the embedder's batch-size sum and count, from one instance's /metrics."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return None, 0.0, 0.0
    found = {
        (sample.name, sample.labels.get("stage")): float(sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return (
        found.get(("engram_admission_limit", None)),
        found.get(("engram_stage_batch_size_sum", "embedder"), 0.0),
        found.get(("engram_stage_batch_size_count", "embedder"), 0.0),
    )


def measure(deployment: Deployment, name: str, plan: Sequence[Tenant], seconds: float) -> Step:
    """One closed-loop run. Beside it, the admission limit and the embedder's batches are read from /metrics (of one
    instance where several share the port): where the limit sits says whether admission or the box holds it back."""
    step = Step(name, seconds)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.5):
            limit, _, _ = _admission_metrics(deployment.port)
            if limit is not None:
                step.limits.append(limit)

    _, texts_before, runs_before = _admission_metrics(deployment.port)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    server_before, generator_before = deployment.cpu(), time.process_time()
    try:
        step.samples = asyncio.run(run_clients("127.0.0.1", deployment.port, plan, seconds, search_share=SEARCH_SHARE))
    finally:
        stop.set()
        watcher.join()
    step.server_cpu = deployment.cpu() - server_before
    step.generator_cpu = time.process_time() - generator_before
    _, texts_after, runs_after = _admission_metrics(deployment.port)
    if runs_after > runs_before:
        step.texts_per_run = (texts_after - texts_before) / (runs_after - runs_before)
    return step


def floor(seconds: float, threads: int) -> dict[str, float]:
    """Texts/s of the project's embedder alone in a process of its own, three ways: batches of 32 as they come, all
    texts in one call (grouped by length, so little padding), and one text per run on each thread side by side. The
    floor is the best of them: the most this box can embed."""
    rng = random.Random(5)
    texts = [sentence(rng) for _ in range(512)]
    code = FLOOR_CODE.format(root=str(ROOT), texts=texts, threads=threads, seconds=seconds)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    by_32, by_length, one_per_core = (float(x) for x in out.stdout.strip().splitlines()[-1].split())
    return {"batches_of_32": by_32, "one_call_by_length": by_length, "one_text_per_core": one_per_core}


def report(step: Step, tenant: str | None = None, label: str | None = None) -> dict[str, float]:
    s = step.summary(tenant)
    print(
        f"{label or step.name:<34} {s['req_s']:7.1f} req/s  p50 {s['p50_ms']:7.1f} ms  p99 {s['p99_ms']:7.1f} ms  "
        f"add p50 {s['add_p50_ms']:7.1f} ms  refused {s['refused_share']:6.1%} (429 {s['r429']}, 503 {s['r503']})  "
        f"errors {s['errors']} (5xx not 503: {s['e500']})  cpu server {step.server_cpu:5.1f} s "
        f"generator {step.generator_cpu:5.1f} s",
        flush=True,
    )
    if step.limits and tenant is None:
        s["admission_limit_p50"] = statistics.median(step.limits)
        low, high = min(step.limits), max(step.limits)
        line = f"admission limit p50 {s['admission_limit_p50']:.0f} (from {low:.0f} to {high:.0f})"
        if step.texts_per_run is not None:
            s["embedder_texts_per_run"] = step.texts_per_run
            line += f", embedder {step.texts_per_run:.2f} texts a run"
        print(f"{'':<34} {line}", flush=True)
    return s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--clients", default="1,50,200", help="client counts, one step each (default 1,50,200; '' for none)"
    )
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per step (default 60)")
    parser.add_argument("--tenants", type=int, default=10, help="tenants (default 10)")
    parser.add_argument("--memories", type=int, default=200, help="memories per tenant at the start (default 200)")
    parser.add_argument("--config", choices=("embedded", "shared"), default="embedded")
    parser.add_argument("--skip-neighbour", action="store_true", help="leave out the noisy-neighbour run")
    parser.add_argument("--skip-floor", action="store_true", help="leave out the embedder's floor")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server(s), repeatable")
    parser.add_argument("--search-share", type=float, default=0.8, help="searches among requests (default 0.8)")
    parser.add_argument("--output", type=Path, help="write every figure as JSON here")
    args = parser.parse_args()
    extra_env = dict(item.split("=", 1) for item in args.env)
    global SEARCH_SHARE
    SEARCH_SHARE = args.search_share
    results: dict[str, object] = {"config": args.config, "duration": args.duration}
    threads = int(extra_env.get("ENGRAM_EMBED_THREADS", "2"))
    with deploy(args.config, args.tenants, args.memories, extra_env) as deployment:
        print(f"{args.config}: {args.tenants} tenants x {args.memories} memories, {args.duration:.0f} s a step")
        if not args.skip_floor:
            modes = floor(min(args.duration, 20.0), threads)
            texts_s = max(modes.values())
            results["floor_texts_s"] = texts_s
            results["floor_modes"] = modes
            ways = ", ".join(f"{name.replace('_', ' ')} {rate:.1f}" for name, rate in modes.items())
            print(f"floor: the embedder alone in its own process: {texts_s:.1f} texts/s, best of {ways}", flush=True)
        tenants = deployment.tenants
        for count in (int(c) for c in args.clients.split(",") if c.strip()):  # --clients "": the neighbour only
            plan = [tenants[i % len(tenants)] for i in range(count)]
            step = measure(deployment, f"{count} clients", plan, args.duration)
            results[step.name] = report(step)
            if "floor_texts_s" in results:
                ratio = step.summary()["req_s"] / float(results["floor_texts_s"])  # type: ignore[arg-type]
                print(f"{'':<34} {ratio:.2f} of the floor")
        if not args.skip_neighbour:
            quiet, loud = tenants[0], tenants[1]
            alone = measure(deployment, "quiet tenant alone (5)", [quiet] * 5, args.duration)
            results[alone.name] = report(alone, quiet.user_id)
            beside = measure(deployment, "beside a neighbour (5 + 150)", [quiet] * 5 + [loud] * 150, args.duration)
            results["quiet beside the neighbour"] = report(beside, quiet.user_id, "quiet tenant beside 150")
            results["the neighbour"] = report(beside, loud.user_id, "the neighbour (150)")
            a, b = alone.summary(quiet.user_id), beside.summary(quiet.user_id)
            print(
                f"quiet tenant p99 beside / alone: {b['p99_ms'] / a['p99_ms']:.2f}x; "
                f"served beside: {b['served_share']:.1%}"
            )
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=2, default=statistics.mean))


if __name__ == "__main__":
    main()
