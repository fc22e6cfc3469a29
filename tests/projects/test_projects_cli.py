"""`engram projects` and `engram index NAME` as a user runs them, with and without `engram serve` on the same data."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from tests.harness import free_port
from tests.projects.helpers import README, expected, indexed, make_repo, wait_for, write
from tests.test_cli import _env, _run, _serving

MAX_MEMORY_CHARS = 16_000
MAX_DOCUMENT_BYTES = 4_000


def one_json(stdout: str) -> dict[str, Any]:
    lines = stdout.splitlines()
    assert len(lines) == 1, stdout
    value: dict[str, Any] = json.loads(lines[0])
    return value


def counts(report: dict[str, Any]) -> tuple[int, int, int, int]:
    return report["added"], report["changed"], report["removed"], report["unchanged"]


def test_projects_index_while_stopped_and_while_serving(tmp_path: Path) -> None:
    env = _env(tmp_path / "data")
    env["ENGRAM_MAX_DOCUMENT_BYTES"] = str(MAX_DOCUMENT_BYTES)
    port = free_port()
    env["ENGRAM_PORT"] = str(port)
    root = make_repo(tmp_path / "shop")
    write(root, "docs/logo.md", b"\x89PNG\x00\x00\x00")
    write(root, "docs/latin1.md", "caf\xe9 cr\xe8me".encode("latin-1"))
    write(root, "docs/huge.md", "# Huge\n\n" + "word " * MAX_DOCUMENT_BYTES)
    os.symlink(root / "docs", root / "docs" / "loop")
    os.symlink("/etc/hostname", root / "docs" / "host.md")

    assert _run(env, "migrate").returncode == 0
    user = _run(env, "users", "create", "shop@example.test").stdout.strip()
    key = _run(env, "keys", "create", user).stdout.strip()

    added = _run(env, "projects", "add", "shop", str(root), "--user", user)
    assert added.returncode == 0, added.stderr
    project = one_json(added.stdout)
    assert (project["name"], project["path"], project["user"], project["files"]) == ("shop", str(root), user, 0)
    assert "node_modules/**" in project["excludes"] and "**/*.md" in project["patterns"]
    for bad, message in (
        (["shop", str(root), "--user", user], "already has a project named shop"),
        (["other", str(tmp_path / "missing"), "--user", user], "is not a folder"),
        (["bad__name", str(root), "--user", user], "must not contain '__'"),
        (["other", str(root), "--user", "u_nobody"], "u_nobody"),
    ):
        refused = _run(env, "projects", "add", *bad)
        assert refused.returncode == 1 and message in refused.stderr, (bad, refused.stderr)

    # No server: the command opens the data dir itself.
    first = _run(env, "index", "shop")
    assert first.returncode == 0, first.stderr
    report = one_json(first.stdout)
    assert counts(report) == (5, 0, 0, 0) and report["chunks_written"] == 9
    assert report["project"] == "shop" and report["seconds"] >= 0
    assert {(s["path"], s["reason"]) for s in report["skipped"]} == {
        ("docs/logo.md", "binary"),
        ("docs/latin1.md", "invalid_utf8"),
        ("docs/huge.md", "too_large"),
        ("docs/loop", "symlink_loop"),
        ("docs/host.md", "outside_project"),
    }

    # Changed while nothing runs: an edit, a rename, a deletion and a new file.
    write(root, "README.md", README.replace("flyctl", "kamal"))
    (root / "docs/guide.md").rename(root / "docs/contributing.md")
    (root / "package.json").unlink()
    write(root, "CHANGELOG.md", "# Changelog\n\n## 1.0\n\nFirst release.\n")
    second = one_json(_run(env, "index", "shop").stdout)
    assert counts(second) == (2, 1, 2, 2)

    listed = _run(env, "projects", "list")
    assert one_json(listed.stdout) == {
        "name": "shop",
        "path": str(root),
        "user": user,
        "files": 5,
        "chunks": sum(expected(root, MAX_MEMORY_CHARS, MAX_DOCUMENT_BYTES).values()),
        "last_indexed": one_json(listed.stdout)["last_indexed"],
    }

    base = f"http://127.0.0.1:{port}"
    with _serving(env, port), httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        want = expected(root, MAX_MEMORY_CHARS, MAX_DOCUMENT_BYTES)
        assert indexed(http, "shop") == want
        # The server holds the embedded index; the command asks it instead of failing on the lock.
        through = _run(env, "index", "shop")
        assert through.returncode == 0, through.stderr
        assert counts(one_json(through.stdout)) == (0, 0, 0, 5)

        write(root, "docs/contributing.md", "# Contributing\n\n## Reviews\n\nTwo approvals now.\n")
        (root / "CHANGELOG.md").unlink()
        wait_for(lambda: indexed(http, "shop") == expected(root, MAX_MEMORY_CHARS, MAX_DOCUMENT_BYTES))

    # Changed while the server is down: the next start reconciles before anyone asks.
    write(root, "docs/ops.md", "# Operations\n\n## Backups\n\nNightly at 02:00.\n")
    (root / "pyproject.toml").unlink()
    write(root, "README.md", README)
    with _serving(env, port), httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        want = expected(root, MAX_MEMORY_CHARS, MAX_DOCUMENT_BYTES)
        wait_for(lambda: indexed(http, "shop") == want, what="the start-up reconcile")
        found = http.post("/v1/memories/search", json={"query": "when do backups run?", "session": "shop"}).json()
        assert found["results"][0]["source"] == "docs/ops.md > Operations > Backups"


def test_index_names_what_it_cannot_do(tmp_path: Path) -> None:
    env = _env(tmp_path / "data")
    assert _run(env, "migrate").returncode == 0
    ada = _run(env, "users", "create", "ada@example.test").stdout.strip()
    bob = _run(env, "users", "create", "bob@example.test").stdout.strip()
    root = make_repo(tmp_path / "repo")
    for user in (ada, bob):
        assert _run(env, "projects", "add", "docs", str(root), "--user", user).returncode == 0
    ambiguous = _run(env, "index", "docs")
    assert ambiguous.returncode == 1 and "--user" in ambiguous.stderr
    assert _run(env, "index", "nothing").returncode == 1
    assert _run(env, "index", "docs", "--watch").returncode == 1
    assert _run(env, "index", str(root), "--url", "http://127.0.0.1:9").returncode == 1  # no --key/--session
    projects = [json.loads(line) for line in _run(env, "projects", "list").stdout.splitlines()]
    assert sorted(p["user"] for p in projects) == sorted([ada, bob])


def test_files_cut_by_older_chunking_rules_are_cut_again_once(tmp_path: Path) -> None:
    env = _env(tmp_path / "data")
    root = tmp_path / "site"
    write(root, "README.md", "# Site\n\n## Deploy\n\n<!-- YAML\nadded: v1\n-->\n\nPush to main.\n")
    write(root, "docs/faq.md", "# FAQ\n\n## Why?\n\nBecause.\n")
    assert _run(env, "migrate").returncode == 0
    user = _run(env, "users", "create", "site@example.test").stdout.strip()
    assert _run(env, "projects", "add", "site", str(root), "--user", user).returncode == 0
    assert counts(one_json(_run(env, "index", "site").stdout)) == (2, 0, 0, 0)

    # As an Engram from before the current rules left them: both files unchanged on disk since.
    with sqlite3.connect(tmp_path / "data" / "engram.db") as db:
        db.execute("UPDATE documents SET chunking = 1 WHERE path = 'README.md'")

    again = one_json(_run(env, "index", "site").stdout)
    assert counts(again) == (0, 1, 0, 1) and again["chunks_written"] == 1
    assert counts(one_json(_run(env, "index", "site").stdout)) == (0, 0, 0, 2)
    listed = one_json(_run(env, "projects", "list").stdout)
    assert (listed["files"], listed["chunks"]) == (2, 2)
    with sqlite3.connect(tmp_path / "data" / "engram.db") as db:
        contents = [row[0] for row in db.execute("SELECT content FROM memories WHERE deleted_at IS NULL")]
    assert sorted(contents) == [
        "README.md > Site > Deploy\n\n## Deploy\n\nPush to main.",
        "docs/faq.md > FAQ > Why?\n\n## Why?\n\nBecause.",
    ]
