"""Bad imports get a clear 4xx that names the line, and nothing of them is written."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.conftest import _settings
from tests.harness import RunningServer, add_key, make_account, serve
from tests.portability.conftest import export_of, fill


@pytest.fixture(scope="module")
def small_import(
    pg_database_url: str, embedder: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    settings = _settings(tmp_path_factory.mktemp("small-import"), pg_database_url, import_max_bytes=2048)
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def _post(server: RunningServer, key: str, body: bytes) -> tuple[int, dict[str, object]]:
    with server.client(key) as http:
        response = http.post("/v1/import", content=body, headers={"content-type": "application/x-ndjson"})
    return response.status_code, response.json()


HEADER = b'{"format": "engram-export", "version": 1, "model": "m", "dims": 384}\n'
MEMORY = (
    b'{"type": "memory", "id": "4d6f0a4e-2f43-4c52-9a43-%012d", "content": "x", "scope": "user", '
    b'"created_at": "2026-11-01T00:00:00+00:00", "updated_at": "2026-11-01T00:00:00+00:00"}\n'
)

DOCUMENT = (
    b'{"type": "document", "session": "s", "path": "a.md", "origin": "upload", "content_hash": "h", %s, '
    b'"indexed_at": "2026-11-01T00:00:00+00:00"}\n'
)
TASK = b'{"type": "task", "session": "s", "task_id": "t", "description": "d", "position": %s}\n'
MESSAGE = (
    b'{"type": "message", %s, "session": "s", "sender": "a", "recipient": "b", "kind": "note", "content": "c", '
    b'"created_at": "2026-11-01T00:00:00+00:00"}\n'
)


@pytest.mark.parametrize(
    ("body", "line", "words"),
    [
        (b"", 1, "header"),
        (b'{"format": "csv", "version": 1}\n', 1, "format"),
        (b'{"format": "engram-export", "version": 9}\n', 1, "version 9"),
        (HEADER + b"not json\n", 2, "not JSON"),
        (HEADER + b"[1, 2]\n", 2, "not a JSON object"),
        (HEADER + b'{"type": "photo"}\n', 2, "type 'photo'"),
        (HEADER + b"\n" + b'{"type": "memory", "id": "a", "scope": "user"}\n', 3, "content"),
        (HEADER + b'{"type": "task", "session": "s", "task_id": "t"}\n', 2, "description"),
        (HEADER + b'{"type": "memory", "content": "\xff"}\n', 2, "UTF-8"),
        (HEADER + DOCUMENT % (b'"size": 9223372036854775808'), 2, "size"),
        (HEADER + DOCUMENT % (b'"size": 1, "chunks": 2147483648'), 2, "chunks"),
        (HEADER + DOCUMENT % (b'"size": 1, "chunking": 0'), 2, "chunking"),
        (HEADER + DOCUMENT % (b'"size": -1'), 2, "size"),
        (HEADER + TASK % (b"-1"), 2, "position"),
        (HEADER + MESSAGE % (b'"id": 1, "reply_to": 99999999999999999999999'), 2, "reply_to"),
        (HEADER + MESSAGE % (b'"id": 9223372036854775808'), 2, "id"),
        (
            HEADER + MEMORY[:-2] + b', "history": [{"event": "BOGUS", "created_at": "2026-11-01T00:00:00Z"}]}\n',
            2,
            "event",
        ),
    ],
)
def test_a_malformed_line_is_a_400_naming_it(api: RunningServer, body: bytes, line: int, words: str) -> None:
    account = make_account(api)
    status, answer = _post(api, account.key, body)
    assert status == 400, answer
    error = answer["error"]
    assert isinstance(error, dict) and error["code"] == "malformed_line" and error["line"] == line
    assert f"line {line}" in str(error["message"]) and words in str(error["message"]), error


def test_a_malformed_line_anywhere_writes_nothing(api: RunningServer) -> None:
    account = make_account(api)
    status, _ = _post(api, account.key, HEADER + MEMORY % 1 + MEMORY % 2 + b"{oops\n")
    assert status == 400
    with api.client(account.key) as http:
        assert http.get("/v1/memories").json()["memories"] == []


def test_import_needs_the_write_scope_and_export_takes_a_read_key(api: RunningServer) -> None:
    user_id, _ = fill(api)
    reader = add_key(api, user_id, scope="read")
    status, answer = _post(api, reader.key, HEADER)
    assert status == 403, answer
    lines = export_of(api, reader.key)
    assert lines[0]["user_id"] == user_id and any(line.get("type") == "memory" for line in lines[1:])
    with api.client() as http:
        assert http.get("/v1/export").status_code == 401
        assert http.post("/v1/import", content=HEADER).status_code == 401


def test_an_import_body_over_the_limit_is_a_413(small_import: RunningServer) -> None:
    account = make_account(small_import)
    status, answer = _post(small_import, account.key, HEADER + b"".join(MEMORY % n for n in range(20)))
    assert status == 413, answer
    assert "2048 bytes" in str(answer["error"])
    status, answer = _post(small_import, account.key, HEADER + MEMORY % 1)
    assert status == 200 and answer["imported"] == 1


def test_records_this_server_cannot_take_are_refused_one_by_one(small_import: RunningServer) -> None:
    account = make_account(small_import)
    bad = (
        b'{"type": "memory", "id": "not-a-uuid", "content": "x", "scope": "user", '
        b'"created_at": "2026-11-01T00:00:00+00:00", "updated_at": "2026-11-01T00:00:00+00:00"}\n'
    )
    status, answer = _post(small_import, account.key, HEADER + bad + MEMORY % 3)
    assert status == 200, answer
    assert answer["imported"] == 1 and answer["refused"] == 1
    assert answer["reasons"] == [{"line": 2, "reason": "memory not-a-uuid: memory id 'not-a-uuid' is not a UUID"}]


def test_times_without_an_offset_are_read_as_utc_and_text_postgres_cannot_store_is_refused(
    small_import: RunningServer,
) -> None:
    account = make_account(small_import)
    naive = (
        b'{"type": "memory", "id": "9d6f0a4e-2f43-4c52-9a43-000000000001", "content": "naive", "scope": "user", '
        b'"created_at": "2026-11-01T10:00:00", "updated_at": "2026-11-01T10:00:00"}\n'
    )
    nul = (
        b'{"type": "memory", "id": "9d6f0a4e-2f43-4c52-9a43-000000000002", "content": "a\\u0000b", "scope": "user", '
        b'"created_at": "2026-11-01T10:00:00Z", "updated_at": "2026-11-01T10:00:00Z"}\n'
    )
    status, answer = _post(small_import, account.key, HEADER + naive + nul)
    assert status == 200, answer
    assert answer["imported"] == 1 and answer["refused"] == 1
    assert answer["reasons"][0]["line"] == 3  # type: ignore[index]
    with small_import.client(account.key) as http:
        [memory] = http.get("/v1/memories").json()["memories"]
    assert memory["created_at"].startswith("2026-11-01T10:00:00") and memory["created_at"].endswith(("Z", "+00:00"))


def test_a_memory_brings_only_its_newest_conflicts_as_sync_would_keep_them(api: RunningServer) -> None:
    """Edge sync keeps a memory's newest 20 losing versions (``sync_max_conflicts_per_memory``); a file holding more
    must not grow a memory's history past that."""
    account = make_account(api)
    memory_id = "5d6f0a4e-2f43-4c52-9a43-000000000001"
    edits = [{"event": "ADD", "new_content": "v0", "created_at": "2026-11-01T00:00:00Z"}]
    # Out of time order in the file: which are the newest is read from their times.
    conflicts = [
        {"event": "CONFLICT", "old_content": f"lost {n}", "created_at": f"2026-11-02T00:{n:02d}:00Z"}
        for n in reversed(range(30))
    ]
    edits.append({"event": "UPDATE", "old_content": "v0", "new_content": "v1", "created_at": "2026-11-03T00:00:00Z"})
    line = {
        "type": "memory",
        "id": memory_id,
        "content": "v1",
        "scope": "user",
        "created_at": "2026-11-01T00:00:00Z",
        "updated_at": "2026-11-03T00:00:00Z",
        "history": [edits[0], *conflicts, edits[1]],
    }
    status, answer = _post(api, account.key, HEADER + json.dumps(line).encode() + b"\n")
    assert status == 200 and answer["imported"] == 1, answer
    with api.client(account.key) as http:
        events = http.get(f"/v1/memories/{memory_id}/history", params={"limit": 1000}).json()["history"]
    kept = sorted(e["old_content"] for e in events if e["event"] == "CONFLICT")
    assert kept == sorted(f"lost {n}" for n in range(10, 30))
    assert [e["event"] for e in events if e["event"] != "CONFLICT"] == ["ADD", "UPDATE"]
