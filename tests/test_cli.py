"""The engram command, run as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

ENGRAM = str(Path(sys.executable).with_name("engram"))


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=120)


@contextmanager
def _serving(env: dict[str, str], port: int, *args: str) -> Iterator[Path]:
    """``engram serve *args`` until the block ends; yields the file its log (stderr) goes to, readable after."""
    fd, name = tempfile.mkstemp(prefix="serve-", suffix=".log", dir=env["ENGRAM_DATA_DIR"])
    log = Path(name)
    with os.fdopen(fd, "wb") as sink:
        proc = subprocess.Popen([ENGRAM, "serve", *args], env=env, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + 180  # a loaded 2-core machine starts a server slowly
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not come up: {log.read_text(errors='replace')[-4000:]}")
            time.sleep(0.1)
        yield log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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


def _migrated_with_a_key(tmp_path: Path, email: str) -> tuple[dict[str, str], int, str]:
    """An embedded deployment in ``tmp_path`` (migrated, serving on a free port once started) and a user's key."""
    from tests.harness import free_port

    env = _env(tmp_path)
    port = free_port()
    env["ENGRAM_PORT"] = str(port)
    assert _run(env, "migrate").returncode == 0
    user_id = _run(env, "users", "create", email).stdout.strip()
    return env, port, _run(env, "keys", "create", user_id).stdout.strip()


def test_reindex_rebuilds_the_index_from_the_database(tmp_path: Path) -> None:
    env, port, key = _migrated_with_a_key(tmp_path, "re@example.test")

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
    assert result.stdout == "reindexed 5 memories into qdrant-edge\n"
    assert result.stderr == ""

    server = _start(env, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as http:
            found = http.post("/v1/memories/search", json={"query": "reindex fact number 3", "limit": 5}).json()
        assert found["results"][0]["id"] == ids[3]
        assert {r["id"] for r in found["results"]} == set(ids)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_serve_port_flag_moves_every_advertised_url(tmp_path: Path) -> None:
    from tests.harness import free_port

    env = _env(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    assert _run(env, "migrate").returncode == 0
    with _serving(env, port, "--host", "127.0.0.1", "--port", str(port)), httpx.Client(base_url=base) as http:
        challenge = http.get("/v1/memories")
        assert challenge.status_code == 401
        assert (
            f'resource_metadata="{base}/.well-known/oauth-protected-resource/v1"'
            in challenge.headers["www-authenticate"]
        )
        assert http.get("/.well-known/oauth-protected-resource/v1").json()["resource"] == f"{base}/v1"
        assert http.get("/.well-known/oauth-authorization-server").json()["issuer"] == base


def test_a_configured_public_url_wins_over_the_port_flag(tmp_path: Path) -> None:
    from tests.harness import free_port

    env = _env(tmp_path)
    env["ENGRAM_PUBLIC_BASE_URL"] = "https://engram.example.test/"
    port = free_port()
    assert _run(env, "migrate").returncode == 0
    with _serving(env, port, "--port", str(port)), httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
        assert http.get("/.well-known/oauth-authorization-server").json()["issuer"] == "https://engram.example.test"


def test_reindex_refuses_while_a_server_holds_the_index(tmp_path: Path) -> None:
    env, port, key = _migrated_with_a_key(tmp_path, "busy@example.test")
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {key}"}

    def add(http: httpx.Client, n: int) -> str:
        response = http.post("/v1/memories", json={"content": f"busy index probe {n} kiwi{n}"})
        assert response.status_code == 201, response.text
        memory_id: str = response.json()["id"]
        return memory_id

    with _serving(env, port) as log, httpx.Client(base_url=base, headers=headers) as http:
        ids = [add(http, n) for n in range(3)]
        refused = _run(env, "reindex")
        assert refused.returncode == 1
        assert refused.stdout == ""
        assert f"the vector index at {tmp_path / 'qdrant-edge' / 'engram_memories'} is in use" in refused.stderr
        assert "stop the server first, or run reindex against a Qdrant server" in refused.stderr
        ids += [add(http, n) for n in range(3, 6)]
        assert http.get("/readyz").json()["checks"]["vector_index"]["status"] == "ok"
    # Stopping flushes the index one last time, and a failed flush is logged: the server's files were left intact.
    assert "flush of" not in log.read_text()

    with _serving(env, port) as log, httpx.Client(base_url=base, headers=headers) as http:
        for memory_id in ids:
            assert http.get(f"/v1/memories/{memory_id}").status_code == 200
        found = http.post("/v1/memories/search", json={"query": "busy index probe 4 kiwi4", "limit": 6}).json()
        assert found["results"][0]["id"] == ids[4]
        assert {r["id"] for r in found["results"]} == set(ids)
    assert "flush of" not in log.read_text()


def test_serve_on_a_database_never_migrated_says_to_migrate_first(tmp_path: Path) -> None:
    env = _env(tmp_path)
    done = _run(env, "serve")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "engram serve: the database has no tables yet: run `engram migrate` first (`make run` does both)"
    )
    assert _run(env, "migrate").returncode == 0
