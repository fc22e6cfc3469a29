"""Coordination through MCP tool calls against a real `engram serve` (SQLite + Redis) on 127.0.0.1.

    .venv/bin/python bench/coordination.py [--agents 50] [--rounds 20] [--samples 100] [--redis-url URL]

Prints:
- claim+release with N concurrent agents (each its own file, so every call is granted): ops/s, p50/p99 per call;
- one agent's claim round trip alone, p50/p99;
- broadcast -> visible to another agent, by polling session_sync_changes, by live push on the GET stream and by
  subscriptions/listen (2026-07-28), p50/p99;
- search_memory through MCP against the same search through REST, p50 and the ratio;
- then the teams figures of bench/teams.py: task claim round trip, message send until the addressee's push, and N
  agents working a 200-task graph to the end.
The server runs in its own process; the clients share this one, so client overhead is part of every figure.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

os.environ.setdefault("MEM0_TELEMETRY", "False")

import anyio
import httpx
from mcp.client import Client
from mcp.types import LoggingMessageNotificationParams

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.mcp_harness import Server, call, connect, line  # noqa: E402
from bench.teams import run as teams  # noqa: E402


async def claims(server: Server, agents: int, rounds: int, shared: bool) -> None:
    claim_times: list[float] = []
    release_times: list[float] = []

    async def agent(n: int, client: Client) -> None:
        path = [f"src/agent_{n}.py"]
        for _ in range(rounds):
            start = time.perf_counter()
            assert (await call(client, "session_claim_files", file_paths=path))["granted"]
            middle = time.perf_counter()
            await call(client, "session_release_files", file_paths=path)
            claim_times.append(middle - start)
            release_times.append(time.perf_counter() - middle)

    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(connect(server, f"agent{n}", "bench" if shared else f"own{n}"))
            for n in range(agents)
        ]
        started, server_cpu, client_cpu = time.perf_counter(), server.cpu_seconds(), time.process_time()
        with anyio.fail_after(300):
            async with anyio.create_task_group() as tasks:
                for n, client in enumerate(clients):
                    tasks.start_soon(agent, n, client)
        wall = time.perf_counter() - started
        server_cpu, client_cpu = server.cpu_seconds() - server_cpu, time.process_time() - client_cpu
    ops = len(claim_times) + len(release_times)
    where = f"one session, each event pushed to the {agents - 1} others" if shared else "a session each, no fan-out"
    print(f"\n== claim+release, {agents} concurrent agents x {rounds} rounds, {where} ==")
    line("claim round trip under load", claim_times, f"{ops / wall:8.0f} ops/s overall")
    line("release round trip under load", release_times)
    per_op = f"{server_cpu / ops * 1000:7.2f} ms / {client_cpu / ops * 1000:.2f} ms"
    print(f"{'CPU per op: server / clients (this process)':<44} {per_op}")
    if shared:
        return

    async with connect(server, "solo") as solo:
        alone = []
        for _ in range(rounds * 10):
            start = time.perf_counter()
            await call(solo, "session_claim_files", file_paths=["src/solo.py"])
            alone.append(time.perf_counter() - start)
    line("claim round trip, one agent alone", alone, "(target p50 <= 5 ms)")


class Inbox:
    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str]] = []
        self.arrived = anyio.Event()

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        if isinstance(params.data, dict) and params.data.get("kind") == "change":
            self.arrivals.append((time.perf_counter(), params.data["data"]["summary"]))
            self.arrived.set()

    async def wait_for(self, summary: str) -> float:
        while True:
            for at, seen in self.arrivals:
                if seen == summary:
                    return at
            await self.arrived.wait()
            self.arrived = anyio.Event()


async def visibility(server: Server, samples: int) -> None:
    inbox = Inbox()
    async with connect(server, "writer") as writer, connect(server, "reader", logging_callback=inbox) as reader:
        cursor = (await call(reader, "session_sync_changes"))["cursor"]
        with anyio.fail_after(10):  # the reader's GET stream opens just after its handshake
            while not inbox.arrivals:
                await call(writer, "session_broadcast_change", changes_summary="warm-up")
                with anyio.move_on_after(0.2):
                    await inbox.arrived.wait()

        polled: list[float] = []
        for i in range(samples):
            summary = f"poll {i}"
            seen_at = 0.0

            async def poll(summary: str = summary) -> None:
                nonlocal cursor, seen_at
                while True:
                    page = await call(reader, "session_sync_changes", since=cursor)
                    cursor = page["cursor"]
                    if any(c["changes_summary"] == summary for c in page["changes"]):
                        seen_at = time.perf_counter()
                        return

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(poll)
                    sent = time.perf_counter()
                    await call(writer, "session_broadcast_change", changes_summary=summary)
            polled.append(seen_at - sent)

        pushed: list[float] = []
        for i in range(samples):
            summary = f"push {i}"
            sent = time.perf_counter()
            await call(writer, "session_broadcast_change", changes_summary=summary)
            with anyio.fail_after(5):
                pushed.append(await inbox.wait_for(summary) - sent)
    listened = await listen_push(server, samples)
    print("\n== broadcast -> visible to another agent (from the broadcast's send) ==")
    line("by polling session_sync_changes", polled)
    line("by live push (notifications/message)", pushed, "(target p99 <= 50 ms)")
    line("by subscriptions/listen (2026-07-28)", listened, "(target p99 <= 50 ms)")


async def listen_push(server: Server, samples: int) -> list[float]:
    """A stateless 2026-07-28 reader: notifications/resources/updated on its listen stream, one per broadcast."""
    changes = "engram://sessions/listen/changes"
    arrivals: list[float] = []
    arrived = anyio.Event()
    async with (
        connect(server, "writer", "listen") as writer,
        connect(server, "reader", "listen", mode="2026-07-28") as reader,
        reader.listen(resource_subscriptions=[changes]) as feed,
        anyio.create_task_group() as tasks,
    ):

        async def follow() -> None:
            nonlocal arrived
            async for _ in feed:
                arrivals.append(time.perf_counter())
                arrived.set()

        tasks.start_soon(follow)
        latencies: list[float] = []
        for i in range(samples):
            arrivals.clear()
            arrived = anyio.Event()
            sent = time.perf_counter()
            await call(writer, "session_broadcast_change", changes_summary=f"listen {i}")
            with anyio.fail_after(5):
                await arrived.wait()
            latencies.append(arrivals[0] - sent)
        tasks.cancel_scope.cancel()
    return latencies


async def search(server: Server, samples: int) -> None:
    texts = [f"Note {i}: the {w} module handles {v} for the service" for i, (w, v) in enumerate(_pairs())]
    rest = httpx.AsyncClient(base_url=server.base, headers={"Authorization": f"Bearer {server.key}"}, timeout=30)
    async with rest, connect(server, None) as client:
        for start in range(0, len(texts), 50):
            batch = [{"content": t} for t in texts[start : start + 50]]
            assert (await rest.post("/v1/memories", json={"memories": batch})).status_code == 201
        queries = [f"which module handles {v}" for _, v in _pairs()][:samples]
        via_mcp, via_rest = [], []
        for query in queries[:10]:  # warm both paths
            await call(client, "search_memory", query=query)
            await rest.post("/v1/memories/search", json={"query": query})
        for query in queries:
            start = time.perf_counter()
            await call(client, "search_memory", query=query, limit=10)
            middle = time.perf_counter()
            response = await rest.post("/v1/memories/search", json={"query": query, "limit": 10})
            assert response.status_code == 200
            via_mcp.append(middle - start)
            via_rest.append(time.perf_counter() - middle)
    print(f"\n== search_memory over {len(texts)} memories ==")
    line("MCP tools/call search_memory", via_mcp)
    line("REST POST /v1/memories/search", via_rest)
    ratio = statistics.median(via_mcp) / statistics.median(via_rest)
    print(f"{'MCP / REST (p50)':<44} {ratio:.2f}x")


def _pairs() -> list[tuple[str, str]]:
    words = [
        "auth",
        "cache",
        "queue",
        "parser",
        "router",
        "billing",
        "search",
        "upload",
        "export",
        "mailer",
        "scheduler",
        "webhook",
    ]
    verbs = [
        "retries",
        "tokens",
        "sessions",
        "invoices",
        "indexing",
        "thumbnails",
        "reports",
        "emails",
        "cron",
        "payloads",
        "limits",
        "locks",
    ]
    return [(w, v) for w in words for v in verbs]


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp, Server(Path(tmp), args.redis_url) as server:
        await claims(server, args.agents, args.rounds, shared=False)
        await claims(server, args.agents, args.rounds, shared=True)
        await visibility(server, args.samples)
        await search(server, args.samples)
        await teams(server, args.samples, args.agents, args.tasks)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=200, help="tasks in the graph the agents work to the end")
    parser.add_argument("--redis-url", default=os.environ.get("ENGRAM_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    # 49 clients closing while fan-out events are still in flight make the SDK client log each event it can no
    # longer deliver ("Error parsing SSE message"); that is teardown, not a measured path.
    logging.getLogger("mcp.client.streamable_http").setLevel(logging.CRITICAL)
    anyio.run(main, parser.parse_args())
