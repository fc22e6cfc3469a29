"""Teams through MCP tool calls against a real `engram serve` (SQLite + Redis) on 127.0.0.1.

    .venv/bin/python bench/teams.py [--tasks 200] [--agents 50] [--samples 200] [--redis-url URL]

Prints (bench/coordination.py runs the same after its own figures):
- task claim round trip of one agent alone, p50/p99, against a file claim round trip measured in the same run;
- message send until the addressee's live push arrives (GET stream), p50/p99;
- N agents working a T-task dependency graph to the end (each takes an available task, completes it, and waits for
  the next push when none is available): wall time, tool calls per second, and server CPU per call.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.types import LoggingMessageNotificationParams

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.mcp_harness import Server, call, connect, line


async def claim_round_trip(server: Server, samples: int) -> None:
    """One agent alone claims ``samples`` available tasks one after another; a file claim is the baseline."""
    async with connect(server, "solo", "claims") as solo:
        for start in range(0, samples, 500):
            batch = [{"id": f"t{i}", "description": "bench"} for i in range(start, min(samples, start + 500))]
            await call(solo, "session_task_create", tasks=batch)
        for i in range(10):  # warm the path
            await call(solo, "session_claim_files", file_paths=[f"warm{i}.py"])
        tasks, files = [], []
        for i in range(samples):
            start = time.perf_counter()
            await call(solo, "session_task_claim", task_id=f"t{i}")
            middle = time.perf_counter()
            await call(solo, "session_claim_files", file_paths=["src/solo.py"])
            tasks.append(middle - start)
            files.append(time.perf_counter() - middle)
    print(f"\n== task claim, one agent alone, {samples} claims ==")
    line("session_task_claim round trip", tasks, "(target p50 <= 5 ms)")
    line("session_claim_files round trip (baseline)", files)
    ratio = sorted(tasks)[len(tasks) // 2] / sorted(files)[len(files) // 2]
    print(f"{'task claim / file claim (p50)':<44} {ratio:.2f}x")


class Pushes:
    """A client's logging_callback: every pushed session event, with its arrival time."""

    def __init__(self) -> None:
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.arrived = anyio.Event()

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        if isinstance(params.data, dict) and params.data.get("type") == "engram.session_event":
            self.events.append((time.perf_counter(), params.data))
            self.arrived.set()

    async def next(self) -> None:
        await self.arrived.wait()
        self.arrived = anyio.Event()

    async def message(self, content: str) -> float:
        while True:
            for at, event in self.events:
                if event["kind"] == "message" and event["data"]["content"] == content:
                    return at
            await self.next()


async def message_push(server: Server, samples: int) -> None:
    """A message to an agent, from the send until the push reaches that agent's client."""
    pushes = Pushes()
    async with (
        connect(server, "writer", "messages") as writer,
        connect(server, "reader", "messages", logging_callback=pushes) as reader,
    ):
        await call(reader, "session_inbox")  # the reader has used the session: it can be addressed
        with anyio.fail_after(10):  # its GET stream opens just after the handshake
            while not pushes.events:
                await call(writer, "session_send_message", to="reader", kind="status", content="warm-up")
                with anyio.move_on_after(0.2):
                    await pushes.next()
        latencies = []
        for i in range(samples):
            content = f"message {i}"
            sent = time.perf_counter()
            await call(writer, "session_send_message", to="reader", kind="question", content=content)
            with anyio.fail_after(5):
                latencies.append(await pushes.message(content) - sent)
            pushes.events.clear()
    print("\n== message send -> the addressee's push (notifications/message on its GET stream) ==")
    line("send until pushed", latencies, "(target p99 <= 50 ms)")


def graph(tasks: int, seed: int = 7) -> list[dict[str, Any]]:
    """A DAG: each task depends on up to two of the twenty tasks before it."""
    rng = random.Random(seed)
    out = []
    for i in range(tasks):
        window = list(range(max(0, i - 20), i))
        deps = [f"g{j}" for j in rng.sample(window, min(len(window), rng.choice([0, 1, 1, 2])))]
        out.append({"id": f"g{i}", "description": f"task {i}", "deps": deps})
    return out


async def work_graph(server: Server, agents: int, tasks: int) -> None:
    """``agents`` agents take available tasks and complete them until the whole graph is done."""
    to_do = graph(tasks)
    calls = 0

    async def worker(client: Client, pushes: Pushes, rng: random.Random) -> None:
        try:
            await take_tasks(client, pushes, rng)
        except Exception as exc:  # the task group nests the cause too deep for a traceback to show it
            print(f"worker failed: {exc!r}"[:2000], file=sys.stderr)
            raise

    async def take_tasks(client: Client, pushes: Pushes, rng: random.Random) -> None:
        nonlocal calls
        while True:
            available = (await call(client, "session_task_list", status="available"))["tasks"]
            calls += 1
            if not available:
                everything = (await call(client, "session_task_list"))["tasks"]
                calls += 1
                if all(t["status"] == "completed" for t in everything):
                    return
                with anyio.move_on_after(1.0):  # the next completion is pushed; the timeout only guards a lost push
                    await pushes.next()
                continue
            task = rng.choice(available)["id"]
            claimed = await client.call_tool("session_task_claim", {"task_id": task})
            calls += 1
            if claimed.is_error:
                continue  # another agent was faster
            await call(client, "session_task_complete", task_id=task, result="done")
            calls += 1

    async with AsyncExitStack() as stack:
        lead = await stack.enter_async_context(connect(server, "lead", "graph"))
        crew = []
        for n in range(agents):
            pushes = Pushes()
            client = await stack.enter_async_context(connect(server, f"w{n}", "graph", logging_callback=pushes))
            crew.append((client, pushes, random.Random(n)))
        await call(lead, "session_task_create", tasks=to_do)
        started, cpu = time.perf_counter(), server.cpu_seconds()
        with anyio.fail_after(600):
            async with anyio.create_task_group() as group:
                for client, pushes, rng in crew:
                    group.start_soon(worker, client, pushes, rng)
        wall, cpu = time.perf_counter() - started, server.cpu_seconds() - cpu
        final = (await call(lead, "session_task_list"))["tasks"]
    assert all(t["status"] == "completed" for t in final)
    print(f"\n== {agents} agents working a {tasks}-task graph to the end (one session, events pushed to all) ==")
    print(f"{'wall time':<44} {wall:7.2f} s")
    print(f"{'tool calls (list, claim, complete)':<44} {calls:7d}   {calls / wall:8.0f} calls/s")
    print(f"{'tasks completed per second':<44} {tasks / wall:7.1f}")
    print(f"{'server CPU per call':<44} {cpu / calls * 1000:7.2f} ms")


PARTS = ("claims", "messages", "graph")


async def run(server: Server, samples: int, agents: int, tasks: int, parts: tuple[str, ...] = PARTS) -> None:
    if "claims" in parts:
        await claim_round_trip(server, samples)
    if "messages" in parts:
        await message_push(server, samples)
    if "graph" in parts:
        await work_graph(server, agents, tasks)


async def main(args: argparse.Namespace) -> None:
    parts = tuple(args.only.split(",")) if args.only else PARTS
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp, Server(Path(tmp), args.redis_url) as server:
        await run(server, args.samples, args.agents, args.tasks, parts)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--only", default="", help=f"a comma-separated subset of {','.join(PARTS)}")
    parser.add_argument("--redis-url", default=os.environ.get("ENGRAM_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    anyio.run(main, parser.parse_args())
