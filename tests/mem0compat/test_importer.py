"""Moving in from Mem0: a get_all output or export (JSON, JSONL), an OpenMemory export zip, or a Mem0 Platform project
pulled through Mem0's client (Engram itself standing in as the platform). Ids, entity ids, metadata, categories and
times are kept; the text is embedded again; each batch is all or none; running it again adds nothing."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

import pytest
from mem0 import MemoryClient

from app.mem0compat.importer import Summary, import_mem0, read_file, read_platform
from tests.conftest import _settings
from tests.harness import RunningServer, make_account, serve

ENGRAM = str(Path(sys.executable).with_name("engram"))


def _memory(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "memory": text,
        "user_id": "alice",
        "metadata": {"source": "mem0"},
        "categories": ["travel"],
        "created_at": "2025-03-01T10:00:00+00:00",
        "updated_at": "2025-03-02T10:00:00+00:00",
        **fields,
    }


def _import(server: RunningServer, user_id: str, rows: list[dict[str, Any]], **kwargs: Any) -> Summary:
    summary: Summary = server.run(import_mem0(server.container.memories, user_id, rows, **kwargs))
    return summary


def test_a_platform_project_moves_in_through_mem0s_client(api: RunningServer, sqlite_api: RunningServer) -> None:
    source = make_account(api)
    mem0 = MemoryClient(api_key=source.key, host=api.base_url)
    added = [
        mem0.add("Prefers aisle seats", user_id="alice", agent_id="planner", infer=False)["results"][0],
        mem0.add("Travels with a cello", user_id="alice", run_id="trip-7", metadata={"n": 2}, infer=False)["results"][
            0
        ],
        mem0.add("Vegetarian", user_id="bob", app_id="food", infer=False)["results"][0],
    ]
    mem0.client.close()
    pulled = list(read_platform(source.key, api.base_url, page_size=2))  # three pages' worth through get_all
    assert {m["id"] for m in pulled} == {a["id"] for a in added}

    target = make_account(sqlite_api)
    summary = _import(sqlite_api, target.user_id, pulled)
    assert (summary.imported, summary.skipped, summary.refused) == (3, 0, [])
    again = _import(sqlite_api, target.user_id, pulled)
    assert (again.imported, again.skipped, again.refused) == (0, 3, [])

    moved = MemoryClient(api_key=target.key, host=sqlite_api.base_url)
    for original in added:
        copy = moved.get(original["id"])
        for key in ("memory", "user_id", "agent_id", "run_id", "app_id", "metadata", "categories", "created_at"):
            assert copy[key] == original[key], key
    found = moved.search("musical instrument luggage", filters={"user_id": "alice"}, top_k=1)["results"]
    assert found[0]["id"] == added[1]["id"]  # embedded again with this server's model
    assert moved.get_all(filters={"user_id": "alice"})["count"] == 2
    moved.client.close()


def test_json_jsonl_and_openmemory_files(tmp_path: Path, sqlite_api: RunningServer) -> None:
    rows = [_memory("Likes window seats"), _memory("Flies from Porto", agent_id="planner", run_id="r1")]
    as_json = tmp_path / "get_all.json"
    as_json.write_text(json.dumps({"count": 2, "next": None, "previous": None, "results": rows}))
    as_jsonl = tmp_path / "export.jsonl"
    as_jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert read_file(as_json) == rows and read_file(as_jsonl) == rows

    memory_id = str(uuid.uuid4())
    zipped = tmp_path / "openmemory.zip"
    logical = {
        "id": memory_id,
        "content": "Uses vim",
        "metadata": {"k": "v"},
        "created_at": "2024-01-01T00:00:00+00:00",
        "updated_at": None,
        "state": "active",
        "app": "cursor",
        "categories": ["tools"],
    }
    gone = {**logical, "id": str(uuid.uuid4()), "state": "deleted"}
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("memories.json", json.dumps({"user": {"user_id": "dana"}, "apps": [], "categories": []}))
        archive.writestr("memories.jsonl.gz", gzip.compress((json.dumps(logical) + "\n" + json.dumps(gone)).encode()))
    opened = read_file(zipped)
    assert opened[0]["user_id"] == "dana" and opened[0]["app_id"] == "cursor"

    target = make_account(sqlite_api)
    summary = _import(sqlite_api, target.user_id, [*read_file(as_json), *opened])
    assert summary.imported == 3 and summary.refused == [
        (gone["id"], "its state is 'deleted'; only active memories are imported")
    ]
    moved = MemoryClient(api_key=target.key, host=sqlite_api.base_url)
    vim = moved.get(memory_id)
    assert (vim["user_id"], vim["app_id"], vim["categories"], vim["metadata"]) == (
        "dana",
        "cursor",
        ["tools"],
        {"k": "v"},
    )
    assert vim["created_at"].startswith("2024-01-01")
    moved.client.close()


def test_what_cannot_be_kept_is_refused_with_a_reason(sqlite_api: RunningServer, api: RunningServer) -> None:
    target = make_account(sqlite_api)
    taken = make_account(sqlite_api)
    theirs = _memory("someone else's")
    assert _import(sqlite_api, taken.user_id, [theirs]).imported == 1
    rows = [
        _memory("fine"),
        {**_memory("x"), "id": "mem_123"},
        _memory(""),
        _memory("nested", metadata={"a": {"b": 1}}),
        _memory("bad run", run_id="has space"),
        theirs,
    ]
    summary = _import(sqlite_api, target.user_id, rows)
    reasons = dict(summary.refused)
    assert summary.imported == 1 and len(reasons) == 5
    assert "not a UUID" in reasons["mem_123"] and "no text" in reasons[rows[2]["id"]]
    assert "metadata" in reasons[rows[3]["id"]] and "run_id" in reasons[rows[4]["id"]]
    assert "another account" in reasons[theirs["id"]]


@pytest.fixture(scope="module")
def five(pg_database_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    plans = {"free": {"requests_per_minute": 10_000, "key_requests_per_minute": 10_000, "max_memories": 5}}
    with serve(_settings(tmp_path_factory.mktemp("five"), pg_database_url, plans=plans), embedder=embedder) as s:  # type: ignore[arg-type]
        yield s


def test_each_batch_is_all_or_none(five: RunningServer) -> None:
    target = make_account(five)
    rows = [_memory(f"fact {i}") for i in range(8)]
    summary = _import(five, target.user_id, rows, batch_size=4)
    assert summary.imported == 4 and [which for which, _ in summary.refused] == [r["id"] for r in rows[4:]]
    assert "stores at most 5 memories" in summary.refused[0][1]
    with five.client(target.key) as http:
        assert {m["id"] for m in http.get("/v1/memories", params={"limit": 200}).json()["memories"]} == {
            r["id"] for r in rows[:4]
        }


def test_the_command_imports_a_file_once(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(ENGRAM_DATA_DIR=str(tmp_path / "data"), MEM0_TELEMETRY="False")

    def engram(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=300)

    assert engram("migrate").returncode == 0
    user_id = engram("users", "create", "mover@example.test").stdout.strip()
    source = tmp_path / "mem0.json"
    source.write_text(json.dumps([_memory("first"), _memory("second"), {"id": "nope", "memory": "x"}]))
    first = engram("import", "--from", "mem0", str(source), "--user", user_id)
    assert first.stdout.splitlines() == [
        "imported 2, skipped 0 (already present), refused 1",
        "refused nope: id 'nope' is not a UUID",
    ], first.stderr
    assert first.returncode == 1 and "importing [" not in first.stderr  # no bar when stderr is not a terminal
    again = engram("import", "--from", "mem0", str(source), "--user", user_id)
    assert again.stdout.splitlines()[0] == "imported 0, skipped 2 (already present), refused 1"
    missing = engram("import", "--from", "mem0-platform", "--user", user_id)
    assert missing.returncode == 1 and "--api-key" in missing.stderr
    unknown = engram("import", "--from", "mem0", str(source), "--user", "u_nobody")
    assert unknown.returncode == 1 and "no Engram user u_nobody" in unknown.stderr


def test_a_terminal_shows_a_progress_bar(tmp_path: Path) -> None:
    import pty

    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(ENGRAM_DATA_DIR=str(tmp_path / "data"), MEM0_TELEMETRY="False")
    subprocess.run([ENGRAM, "migrate"], env=env, check=True, capture_output=True, timeout=300)
    user_id = subprocess.run(
        [ENGRAM, "users", "create", "bar@example.test"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    source = tmp_path / "mem0.jsonl"
    source.write_text("\n".join(json.dumps(_memory(f"fact {i}")) for i in range(5)))
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [ENGRAM, "import", "--from", "mem0", str(source), "--user", user_id, "--batch-size", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
    ) as proc:
        os.close(follower)
        stdout, _ = proc.communicate(timeout=300)
        screen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            screen += chunk
        os.close(leader)
    assert proc.returncode == 0 and stdout.splitlines() == ["imported 5, skipped 0 (already present), refused 0"]
    assert b"importing [" in screen and b"2/5" in screen and b"5/5" in screen
