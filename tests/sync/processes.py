"""Engram deployments as real processes: `engram serve` and the `engram` command, each in a data directory of its
own, talking over real HTTP on 127.0.0.1. For the sync tests and bench/sync.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.harness import free_port


def _on_a_thread(work: Any) -> Any:
    """Run ``work`` on a thread of its own (it may start an event loop; the caller may be inside one)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result()


ENGRAM = str(Path(sys.executable).with_name("engram"))


@dataclass
class Deployment:
    """One Engram: a data directory, a database (SQLite there unless ``database_url``), a port."""

    data_dir: Path
    database_url: str | None = None
    port: int = field(default_factory=free_port)
    settings: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
        env.update(
            {
                "ENGRAM_DATA_DIR": str(self.data_dir),
                "ENGRAM_HOST": "127.0.0.1",
                "ENGRAM_PORT": str(self.port),
                "ENGRAM_SECRET_KEY": "secret-" + self.data_dir.name,
                "ENGRAM_LOG_LEVEL": "warning",
                "ENGRAM_LOG_FORMAT": "text",
                "MEM0_TELEMETRY": "False",
                # Test traffic comes from one address and far above a person's rate.
                "ENGRAM_PLANS": json.dumps(
                    {"free": {"requests_per_minute": 10**6, "key_requests_per_minute": 10**6, "max_memories": 10**6}}
                ),
                "ENGRAM_SYNC_LINKS_POLL_SECONDS": "0.2",
                "ENGRAM_SYNC_RETRY_MAX_SECONDS": "0.5",
            }
        )
        if self.database_url:
            env["ENGRAM_DATABASE_URL"] = self.database_url
        env.update(self.settings)
        return env

    def engram(self, *args: str, check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([ENGRAM, *args], env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"engram {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
        return done

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{self.data_dir / 'engram.db'}"

    def setup(self) -> None:
        """Migrate, in this process (as `engram migrate` would)."""
        from app.migrate import upgrade_to_head

        self.data_dir.mkdir(parents=True, exist_ok=True)
        _on_a_thread(lambda: upgrade_to_head(self.resolved_database_url))

    def user(self, email: str | None = None) -> tuple[str, str]:
        """A new user and a write key, made by the services `engram users create` and `keys create` use."""
        from app.accounts import service

        async def create(db: Any) -> tuple[str, str]:
            async with db.session() as session:
                user = await service.create_user(session, email or f"{os.urandom(6).hex()}@example.test")
                key = await service.create_key(session, self.env()["ENGRAM_SECRET_KEY"].encode(), user.id, name="t")
            return user.id, key.plaintext

        result: tuple[str, str] = self._with_db(create)
        return result

    def sync_client(self, user_id: str, name: str) -> dict[str, str]:
        """What `engram sync clients create USER --name NAME` prints (tests/oauth runs the command itself)."""
        from app.oauth import machine_clients

        async def create(db: Any) -> dict[str, str]:
            async with db.session() as session:
                created = await machine_clients.create_sync_client(session, user_id, name)
            return created.as_json()

        result: dict[str, str] = self._with_db(create)
        return result

    def _with_db(self, work: Any) -> Any:
        from app.db import Database

        async def run() -> Any:
            db = Database(self.resolved_database_url)
            try:
                return await work(db)
            finally:
                await db.dispose()

        return _on_a_thread(lambda: asyncio.run(run()))

    def start(self) -> None:
        fd, name = tempfile.mkstemp(prefix="serve-", suffix=".log", dir=self.data_dir)
        self.log_path = Path(name)
        with os.fdopen(fd, "wb") as sink:
            self.process = subprocess.Popen([ENGRAM, "serve"], env=self.env(), stdout=subprocess.DEVNULL, stderr=sink)
        deadline = time.monotonic() + 240
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=10).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.url} did not come up: {self.log()[-4000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.engram("sync", "status").stdout)
        return body


def link_with_client(
    node: Deployment, edge: Deployment | HostedEdge, local_user: str, edge_user: str, name: str
) -> dict[str, Any]:
    """A sync client made on the edge (`engram sync clients create`) and the node linked with it."""
    client = edge.sync_client(edge_user, name)
    done = node.engram(
        "sync", "link", edge.url, "--user", local_user, "--client-id", client["client_id"],
        "--client-secret", client["client_secret"],
    )  # fmt: skip
    linked: dict[str, Any] = json.loads(done.stdout)
    return linked


def search(deployment: Deployment | HostedEdge, key: str, query: str, limit: int = 10) -> list[dict[str, Any]]:
    with deployment.client(key) as http:
        response = http.post("/v1/memories/search", json={"query": query, "limit": limit, "threshold": 0})
        response.raise_for_status()
        results: list[dict[str, Any]] = response.json()["results"]
        return results


@dataclass
class HostedEdge:
    """An edge served in this process (tests.harness.serve) on PostgreSQL, with a Deployment's helpers."""

    server: Any  # tests.harness.RunningServer

    @property
    def url(self) -> str:
        return str(self.server.base_url)

    @property
    def base_url(self) -> str:
        return self.url

    @property
    def container(self) -> Any:
        return self.server.container

    def run(self, coro: Any) -> Any:
        return self.server.run(coro)

    def user(self) -> tuple[str, str]:
        from tests.harness import make_account

        account = make_account(self.server)
        return account.user_id, account.key

    def sync_client(self, user_id: str, name: str) -> dict[str, str]:
        from tests.oauth.conftest import make_sync_client

        return make_sync_client(self.server, user_id, name)

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
