"""Run the real server on 127.0.0.1 in a background thread, and make accounts for tests."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from app.serve import KEEP_ALIVE_SECONDS
from app.settings import Settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class RunningServer:
    settings: Settings
    base_url: str
    server: uvicorn.Server

    def client(self, key: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30, **kwargs)

    @property
    def container(self) -> Any:
        return self.server.config.app.state.container  # type: ignore[attr-defined]

    def run(self, coro: Any) -> Any:
        """Run a coroutine on the server's own loop (for reaching services directly, e.g. creating accounts)."""
        loop = self.server.config.app.state.loop  # type: ignore[attr-defined]
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=60)


@contextmanager
def serve_asgi(app: Any, host: str, port: int) -> Iterator[uvicorn.Server]:
    """Serve an ASGI app with uvicorn in a background thread until the context exits."""
    # As `engram serve` runs it: the app, not uvicorn, decides whose forwarded headers to believe.
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
        proxy_headers=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"asgi-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 300  # a start takes about a second; only a hang reaches this
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.02)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def serve(settings: Settings, *, embedder: Any = None) -> Iterator[RunningServer]:
    from app.main import create_app

    app = create_app(settings, embedder=embedder)

    @app.on_startup.append  # type: ignore[arg-type]
    async def _remember_loop() -> None:
        app.state.loop = asyncio.get_running_loop()

    with serve_asgi(app, settings.host, settings.port) as server:
        yield RunningServer(settings, f"http://{settings.host}:{settings.port}", server)


@dataclass(frozen=True)
class Account:
    user_id: str
    key: str
    key_id: str


def make_account(server: RunningServer, *, scope: str = "write", email: str | None = None) -> Account:
    """A new user with one key, made through the same service the CLI uses."""
    import uuid

    from app.accounts import service

    container = server.container

    async def create() -> Account:
        async with container.db.session() as session:
            user = await service.create_user(session, email or f"{uuid.uuid4().hex[:12]}@example.test")
            created = await service.create_key(
                session, container.authenticator.secret, user.id, name="test", scope=scope
            )
        return Account(user.id, created.plaintext, created.key.id)

    result: Account = server.run(create())
    return result


def add_key(
    server: RunningServer,
    user_id: str,
    *,
    scope: str = "write",
    session: str | None = None,
    agent: str | None = None,
) -> Account:
    """Another key of the user; with ``session`` and ``agent``, one bound to that agent (``keys create --session``)."""
    from app.accounts import service

    container = server.container

    async def create() -> Account:
        async with container.db.session() as db_session:
            created = await service.create_key(
                db_session,
                container.authenticator.secret,
                user_id,
                name="extra",
                scope=scope,
                bound_session=session,
                bound_agent=agent,
            )
        return Account(user_id, created.plaintext, created.key.id)

    result: Account = server.run(create())
    return result


def revoke_key(server: RunningServer, key_id: str) -> None:
    """Revoke an API key, as `engram keys revoke` or the dashboard does."""
    from app.accounts import service as accounts

    async def revoke() -> None:
        async with server.container.db.session() as session:
            await accounts.revoke_key(session, key_id)

    server.run(revoke())
