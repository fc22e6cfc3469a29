"""`engram index PATH --url URL --key KEY --session NAME [--watch]` against a real server over HTTP."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.harness import RunningServer, make_account
from tests.projects.helpers import README, expected, indexed, make_repo, wait_for, write
from tests.test_cli import ENGRAM, _env, _run


def report_of(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    value: dict[str, Any] = json.loads(lines[0])
    return value


def held(http: Any, session: str) -> dict[str, str]:
    return {d["path"]: d["content_hash"] for d in http.get(f"/v1/sessions/{session}/documents").json()["documents"]}


def test_remote_index_sends_only_what_changed(api: RunningServer, tmp_path: Path) -> None:
    me = make_account(api)
    limit = api.settings.max_memory_chars
    root = make_repo(tmp_path / "repo")
    write(root, "docs/logo.md", b"\x89PNG\x00\x00")
    env = _env(tmp_path / "client")  # the client has no data of its own; it talks to the URL only
    remote = ["--url", api.base_url, "--key", me.key, "--session", "web"]

    first = report_of(_run(env, "index", str(root), *remote))
    assert (first["added"], first["unchanged"], first["chunks_written"]) == (5, 0, 9)
    assert [(s["path"], s["reason"]) for s in first["skipped"]] == [("docs/logo.md", "binary")]
    with api.client(me.key) as http:
        assert indexed(http, "web") == expected(root, limit)
        hashes = held(http, "web")
        assert hashes["README.md"] == hashlib.sha256((root / "README.md").read_bytes()).hexdigest()

        again = report_of(_run(env, "index", str(root), *remote))
        assert (again["added"], again["changed"], again["unchanged"], again["chunks_written"]) == (0, 0, 5, 0)

        write(root, "README.md", README.replace("flyctl", "kamal"))
        (root / "package.json").unlink()
        write(root, "docs/new.md", "# New\n\nAdded later.\n")
        # An agent's own indexed file is not the folder's to remove.
        agent_file = {"path": "notes/agent.md", "content": "# Agent\n\nIndexed over REST by hand.\n"}
        assert http.put("/v1/sessions/web/documents", json=agent_file).status_code == 200
        third = report_of(_run(env, "index", str(root), *remote))
        assert (third["added"], third["changed"], third["removed"], third["unchanged"]) == (1, 1, 2, 3)
        # notes/agent.md went too: uploaded documents of the session mirror the folder.
        assert "notes/agent.md" not in held(http, "web")
        assert indexed(http, "web") == expected(root, limit)

        wrong = _run(env, "index", str(root), "--url", api.base_url, "--key", "egk_wrong", "--session", "web")
        assert wrong.returncode == 1 and "401" in wrong.stderr
        bad_session = _run(env, "index", str(root), "--url", api.base_url, "--key", me.key, "--session", "a__b")
        assert bad_session.returncode == 1 and "session" in bad_session.stderr
        nowhere = _run(env, "index", str(tmp_path / "missing"), *remote)
        assert nowhere.returncode == 1 and "not a folder" in nowhere.stderr


def test_remote_watch_keeps_sending_changes_until_stopped(api: RunningServer, tmp_path: Path) -> None:
    me = make_account(api)
    limit = api.settings.max_memory_chars
    root = make_repo(tmp_path / "repo")
    env = _env(tmp_path / "client")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [ENGRAM, "index", str(root), "--url", api.base_url, "--key", me.key, "--session", "live", "--watch"],
            env=env,
            stdout=out,
            stderr=err,
            text=True,
        )
        try:
            with api.client(me.key) as http:
                wait_for(lambda: indexed(http, "live") == expected(root, limit), what="the first sync")
                write(root, "docs/guide.md", "# Guide\n\n## Reviews\n\nTwo approvals per change.\n")
                (root / "config/app.yaml").unlink()
                wait_for(lambda: indexed(http, "live") == expected(root, limit), what="the changes to arrive")
                want = hashlib.sha256((root / "docs/guide.md").read_bytes()).hexdigest()
                assert held(http, "live")["docs/guide.md"] == want
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
        out.seek(0)
        err.seek(0)
        assert code == 0, err.read()
        reports = [json.loads(line) for line in out.read().splitlines()]
        assert reports[0]["added"] == 5 and sum(r["changed"] + r["removed"] for r in reports[1:]) == 2
    assert os.path.exists(root / "docs/guide.md")
