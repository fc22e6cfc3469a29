"""``engram export``, ``engram import`` and ``engram users delete``, run as a user runs them (embedded defaults)."""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.harness import RunningServer
from tests.portability.conftest import comparable, export_of, fill
from tests.test_cli import ENGRAM, _env, _run


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line]


def _import_on_a_terminal(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """Run ``engram import`` with stderr on a pseudo-terminal (as in a shell) and stdout piped."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [ENGRAM, "import", *args], env=env, stdout=subprocess.PIPE, stderr=follower, text=True, timeout=300
        )
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    return proc.returncode, proc.stdout, seen.decode(errors="replace")


def _rows_naming(database: Path, needle: str) -> dict[str, int]:
    with sqlite3.connect(database) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        found = {}
        for table in tables:
            hits = sum(1 for row in conn.execute(f'SELECT * FROM "{table}"') if any(needle in str(v) for v in row))
            if hits:
                found[table] = hits
    return found


def test_export_import_and_delete_from_the_command_line(api: RunningServer, tmp_path: Path) -> None:
    _, key = fill(api)
    exported = export_of(api, key)
    source = tmp_path / "from-the-server.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in exported))
    env = _env(tmp_path / "data")
    assert _run(env, "migrate").returncode == 0
    user = _run(env, "users", "create", "ada@example.test").stdout.strip()
    other = _run(env, "users", "create", "bob@example.test").stdout.strip()

    code, out, err = _import_on_a_terminal(env, str(source), "--user", user)
    assert code == 0, err
    records = len(exported) - 1
    assert json.loads(out.splitlines()[-1]) == {"imported": records, "skipped": 0, "refused": 0, "reasons": []}
    assert f"{records}/{records}" in err and "importing [" in err

    again = _run(env, "import", str(source), "--user", user)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["skipped"] == records
    assert "importing [" not in again.stderr  # no bar when stderr is no terminal

    # Into a third account while the first holds every memory id: those lines are refused, and the exit says so.
    third = _run(env, "users", "create", "cy@example.test").stdout.strip()
    taken = _run(env, "import", str(source), "--user", third)
    assert taken.returncode == 1, taken.stderr
    summary = json.loads(taken.stdout.splitlines()[-1])
    assert summary["refused"] >= sum(1 for r in exported[1:] if r["type"] == "memory") > 0
    assert any("another account" in r["reason"] for r in summary["reasons"])

    written = tmp_path / "out.jsonl"
    assert _run(env, "export", "--user", user, "--output", str(written)).returncode == 0
    assert comparable(_lines(written.read_text())) == comparable(exported)
    to_stdout = _run(env, "export", "--user", user, "--session", "web")
    assert to_stdout.returncode == 0, to_stdout.stderr
    session_only = _lines(to_stdout.stdout)
    assert session_only[0]["session"] == "web" and all(r["session"] == "web" for r in session_only[1:])
    with_vectors = _lines(_run(env, "export", "--user", user, "--vectors").stdout)
    assert all(r.get("vector") for r in with_vectors[1:] if r["type"] == "memory")

    refused = _run(env, "users", "delete", user)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert _rows_naming(tmp_path / "data" / "engram.db", user)

    deleted = _run(env, "users", "delete", user, "--yes")
    assert deleted.returncode == 0, deleted.stderr
    report = json.loads(deleted.stdout)
    assert report["deleted"] == user and report["vectors"] == sum(1 for r in exported[1:] if r["type"] == "memory")
    assert _rows_naming(tmp_path / "data" / "engram.db", user) == {}
    gone = _run(env, "export", "--user", user)
    assert gone.returncode == 1 and f"no user {user}" in gone.stderr
    assert _run(env, "users", "delete", user, "--yes").returncode == 1
    # Without --yes, a user that is not there is named as missing rather than warned about.
    missing = _run(env, "users", "delete", user)
    assert missing.returncode == 1 and f"no user {user}" in missing.stderr and "erases" not in missing.stderr
    assert _rows_naming(tmp_path / "data" / "engram.db", other)

    # The index dropped every point: a fresh import under another account takes every id again.
    back = _run(env, "import", str(source), "--user", other)
    assert json.loads(back.stdout.splitlines()[-1])["imported"] == records, back.stderr


def test_import_names_the_bad_line_and_writes_nothing(tmp_path: Path) -> None:
    env = _env(tmp_path / "data")
    assert _run(env, "migrate").returncode == 0
    user = _run(env, "users", "create", "ada@example.test").stdout.strip()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "engram-export", "version": 1}\n{"type": "memory"\n')
    result = _run(env, "import", str(bad), "--user", user)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: line 2: not JSON"), result.stderr
    missing = _run(env, "import", str(tmp_path / "nope.jsonl"), "--user", user)
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_users_delete_beside_a_running_server_has_that_server_erase_its_index_too(tmp_path: Path) -> None:
    from tests.test_cli import _migrated_with_a_key, _serving

    env, port, key = _migrated_with_a_key(tmp_path, "ada@example.test")
    keep_user = _run(env, "users", "create", "bob@example.test").stdout.strip()
    keep_key = _run(env, "keys", "create", keep_user).stdout.strip()
    with _serving(env, port):
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            me = http.get("/v1/export").text.splitlines()[0]
            user_id = json.loads(me)["user_id"]
            for n in range(3):
                assert http.post("/v1/memories", json={"content": f"ada's note {n}"}).status_code == 201
            claimed = http.post("/v1/sessions/web/claims", json={"agent": "a", "file_paths": ["x.py"]})
            assert claimed.json()["granted"]
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keep_key}"}, timeout=30) as http:
            assert http.post("/v1/memories", json={"content": "bob's note"}).status_code == 201

        deleted = _run(env, "users", "delete", user_id, "--yes")
        assert deleted.returncode == 0, deleted.stderr
        assert json.loads(deleted.stdout)["vectors"] == 3 and json.loads(deleted.stdout)["coordination"] == 1
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            assert http.get("/v1/memories").status_code == 401
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keep_key}"}, timeout=30) as http:
            found = http.post("/v1/memories/search", json={"query": "note", "threshold": 0}).json()["results"]
            assert [r["content"] for r in found] == ["bob's note"]
        missing = _run(env, "users", "delete", user_id, "--yes")
        assert missing.returncode == 1 and f"no user {user_id}" in missing.stderr
    assert _rows_naming(tmp_path / "engram.db", user_id) == {}
