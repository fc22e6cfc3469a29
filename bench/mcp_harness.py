"""What the MCP benchmarks share: `engram serve` in a subprocess with one user and key, MCP clients to it, and
how a latency line is printed (bench/coordination.py and bench/teams.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.harness import free_port

ENGRAM = str(Path(sys.executable).with_name("engram"))


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def line(name: str, samples: list[float], extra: str = "") -> None:
    print(f"{name:<44} p50 {pct(samples, 0.5):7.2f} ms   p99 {pct(samples, 0.99):7.2f} ms  {extra}")


class Server:
    """`engram serve` in a subprocess with a fresh data dir, one user and one key."""

    def __init__(self, data_dir: Path, redis_url: str) -> None:
        self.port = free_port()
        self.env = dict(
            os.environ,
            ENGRAM_DATA_DIR=str(data_dir),
            ENGRAM_PORT=str(self.port),
            ENGRAM_REDIS_URL=redis_url,
            ENGRAM_SECRET_KEY="bench-coordination",
            ENGRAM_LOG_LEVEL="warning",
            # The benchmark measures the path, not the plan: lift the rate limits.
            ENGRAM_PLANS='{"free": {"requests_per_minute": 100000000, "max_memories": 100000000}}',
            # Every agent of the benchmark is one user's MCP session: lift the per-user cap above their number.
            ENGRAM_MCP_SESSIONS_PER_USER="1000",
        )
        self.env.pop("ENGRAM_DATABASE_URL", None)
        self.base = f"http://127.0.0.1:{self.port}"

    def cli(self, *args: str) -> str:
        return subprocess.run([ENGRAM, *args], env=self.env, check=True, capture_output=True, text=True).stdout.strip()

    def __enter__(self) -> Server:
        self.cli("migrate")
        self.user_id = self.cli("users", "create", "bench@example.test")
        self.key = self.cli("keys", "create", self.user_id)
        self.process = subprocess.Popen([ENGRAM, "serve"], env=self.env, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("server did not come up")
            time.sleep(0.2)

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far (Linux /proc)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def url(self, agent: str | None, session: str = "bench") -> str:
        who = self.user_id if agent is None else f"{self.user_id}__session__{session}__{agent}"
        return f"{self.base}/mcp/v2/bench/{who}"


@asynccontextmanager
async def connect(server: Server, agent: str | None, session: str = "bench", **options: Any) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.key}"}, timeout=httpx2.Timeout(30, read=300))
    transport = streamable_http_client(server.url(agent, session), http_client=http)
    options.setdefault("mode", "legacy")
    async with http, Client(transport, **options) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error and result.structured_content is not None, result.content
    return result.structured_content
