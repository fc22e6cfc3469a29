"""Instances sharing a database agree on the API-key secret without anyone setting ENGRAM_SECRET_KEY.

Before: each instance generated its own secret into its data dir, and a key issued by one answered 401 on the other.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx

from tests.conftest import PG_HOST, PG_PORT, PG_USER, _admin_execute
from tests.harness import free_port
from tests.test_cli import _env, _run, _serving


def test_two_instances_on_one_database_accept_each_others_keys(pg_server: str, tmp_path: Path) -> None:
    name = f"engram_secret_{uuid.uuid4().hex[:10]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    try:
        url = f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
        one, two = _env(tmp_path / "one", url), _env(tmp_path / "two", url)
        for env in (one, two):
            Path(env["ENGRAM_DATA_DIR"]).mkdir(parents=True)
            env.pop("ENGRAM_SECRET_KEY", None)
        assert _run(one, "migrate").returncode == 0
        user = _run(one, "users", "create", "shared@example.test").stdout.strip()
        key = _run(one, "keys", "create", user).stdout.strip()  # made by the CLI on instance one's data dir
        ports = free_port(), free_port()
        one["ENGRAM_PORT"], two["ENGRAM_PORT"] = str(ports[0]), str(ports[1])
        with _serving(one, ports[0]), _serving(two, ports[1]):
            for port in ports:
                response = httpx.get(
                    f"http://127.0.0.1:{port}/v1/memories", headers={"Authorization": f"Bearer {key}"}, timeout=30
                )
                assert response.status_code == 200, (port, response.text)
        # Nothing was written to either data dir: the secret lives in the database both read.
        assert not (tmp_path / "one" / "secret.key").exists() and not (tmp_path / "two" / "secret.key").exists()
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_an_embedded_install_keeps_the_secret_it_had_in_its_data_dir(tmp_path: Path) -> None:
    """Keys issued before the secret moved into the database keep working after the upgrade."""
    import asyncio

    from app.accounts.secret import resolve_secret_key
    from app.db import Database
    from app.migrate import upgrade_to_head

    (tmp_path / "secret.key").write_text("the-old-secret\n")
    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    upgrade_to_head(url)

    async def resolve() -> bytes:
        db = Database(url)
        try:
            return await resolve_secret_key(db, None, tmp_path)
        finally:
            await db.dispose()

    assert asyncio.run(resolve()) == b"the-old-secret"
    (tmp_path / "secret.key").unlink()  # adopted: the database has it now
    assert asyncio.run(resolve()) == b"the-old-secret"
