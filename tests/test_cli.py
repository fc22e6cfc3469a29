"""The engram command, run as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

ENGRAM = str(Path(sys.executable).with_name("engram"))


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=120)


def _env(tmp_path: Path, database_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["ENGRAM_DATA_DIR"] = str(tmp_path)
    env["MEM0_TELEMETRY"] = "False"
    if database_url:
        env["ENGRAM_DATABASE_URL"] = database_url
    return env


def _exercise(env: dict[str, str]) -> None:
    assert _run(env, "migrate").returncode == 0
    created = _run(env, "users", "create", "Ada@Example.test")
    assert created.returncode == 0, created.stderr
    user_id = created.stdout.strip()
    assert created.stdout == user_id + "\n"
    assert user_id.startswith("u_") and "__" not in user_id

    duplicate = _run(env, "users", "create", "ada@example.test")
    assert duplicate.returncode == 1 and "already exists" in duplicate.stderr

    key_run = _run(env, "keys", "create", user_id, "--name", "laptop", "--scope", "read")
    assert key_run.returncode == 0, key_run.stderr
    key = key_run.stdout.strip()
    assert key_run.stdout == key + "\n" and key.startswith("egk_")

    listing = _run(env, "keys", "list", user_id)
    assert listing.returncode == 0
    line = next(line for line in listing.stdout.splitlines() if "laptop" in line)
    assert "read" in line and "active" in line and key not in listing.stdout
    key_id = line.split()[0]

    revoked = _run(env, "keys", "revoke", key_id)
    assert revoked.returncode == 0
    assert "revoked" in next(
        line for line in _run(env, "keys", "list", user_id).stdout.splitlines() if "laptop" in line
    )

    assert _run(env, "keys", "create", "u_nobody").returncode == 1
    assert _run(env, "keys", "revoke", "key_nobody").returncode == 1
    assert _run(env, "keys", "create", user_id, "--scope", "admin").returncode == 2


def test_cli_manages_users_and_keys_on_sqlite(tmp_path: Path) -> None:
    _exercise(_env(tmp_path))
    assert (tmp_path / "engram.db").exists()


@pytest.mark.postgres
def test_cli_manages_users_and_keys_on_postgres(tmp_path: Path, pg_database_url: str) -> None:
    _exercise(_env(tmp_path, pg_database_url))


def test_reindex_rebuilds_the_index_from_the_database(tmp_path: Path) -> None:
    from tests.harness import free_port

    env = _env(tmp_path)
    port = free_port()
    env["ENGRAM_PORT"] = str(port)
    assert _run(env, "migrate").returncode == 0
    user_id = _run(env, "users", "create", "re@example.test").stdout.strip()
    key = _run(env, "keys", "create", user_id).stdout.strip()

    from tests.api.test_crash import _start

    server = _start(env, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as http:
            ids = [
                http.post("/v1/memories", json={"content": f"reindex fact number {i}"}).json()["id"] for i in range(5)
            ]
    finally:
        server.terminate()
        server.wait(timeout=30)

    result = _run(env, "reindex")
    assert result.returncode == 0, result.stderr
    assert "reindexed 5 memories" in result.stdout

    server = _start(env, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as http:
            found = http.post("/v1/memories/search", json={"query": "reindex fact number 3", "limit": 5}).json()
        assert found["results"][0]["id"] == ids[3]
        assert {r["id"] for r in found["results"]} == set(ids)
    finally:
        server.terminate()
        server.wait(timeout=30)
