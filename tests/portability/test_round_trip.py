"""Export and import over real HTTP: the round trip into an empty server is exact, a second import adds nothing, and
vectors are reused only when they come from the same model."""

from __future__ import annotations

import base64
import json
import math
import struct
from typing import Any

import pytest

from tests.harness import RunningServer, make_account
from tests.portability.conftest import body_of, comparable, export_of, fill


def _import(server: RunningServer, key: str, body: bytes) -> Any:
    with server.client(key) as http:
        response = http.post("/v1/import", content=body, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200, response.text
    return response.json()


def test_export_carries_every_kind_of_record_with_history(api: RunningServer) -> None:
    user_id, key = fill(api)
    lines = export_of(api, key)
    header = lines[0]
    assert header["format"] == "engram-export" and header["version"] == 1
    assert header["model"] == api.container.engine.model_id and header["vectors"] is False
    assert header["user_id"] == user_id
    kinds = [line["type"] for line in lines[1:]]
    assert {"memory", "document", "agent", "message", "task"} <= set(kinds)
    memories = {m["content"]: m for m in lines[1:] if m.get("type") == "memory"}
    assert "This one will be deleted" not in memories
    edited = memories["We deploy with fly.io"]
    assert [e["event"] for e in edited["history"]] == ["ADD", "UPDATE"]
    assert edited["history"][1]["old_content"] == "We deploy with fly"
    assert edited["tags"] == ["deploy", "ops"] and edited["metadata"] == {"env": "prod", "n": 3}
    promoted = memories["The web session uses React"]
    assert promoted["scope"] == "user" and "PROMOTE" in [e["event"] for e in promoted["history"]]
    assert memories["A private thought"]["visibility"] == "private"
    assert memories["Architects review schemas"]["role"] == "architect"
    chunks = [m for m in memories.values() if "document" in m["tags"]]
    assert chunks and all(m["metadata"]["source"].startswith("docs/guide.md") for m in chunks)
    (document,) = [d for d in lines[1:] if d["type"] == "document"]
    assert sorted(document["memory_ids"]) == sorted(m["id"] for m in chunks)
    reply = next(m for m in lines[1:] if m["type"] == "message" and m["content"] == "Yes")
    assert reply["reply_to"] is not None and reply["read_by"] == []
    question = next(m for m in lines[1:] if m["type"] == "message" and m["content"] == "Is the schema ready?")
    assert question["read_by"] == ["dev"]
    tasks = {t["task_id"]: t for t in lines[1:] if t["type"] == "task"}
    assert tasks["api"]["deps"] == ["schema"] and tasks["schema"]["status"] == "completed"
    assert "vector" not in edited


def test_a_session_export_holds_that_session_only(api: RunningServer) -> None:
    _, key = fill(api)
    lines = export_of(api, key, session="web")
    assert lines[0]["session"] == "web"
    assert all(line.get("session") == "web" for line in lines[1:]), lines
    assert not any(line.get("type") == "memory" and line["content"] == "We deploy with fly.io" for line in lines[1:])


def test_round_trip_into_an_empty_server_is_exact_and_a_second_import_adds_nothing(
    api: RunningServer, sqlite_api: RunningServer
) -> None:
    _, key = fill(api)
    exported = export_of(api, key)
    target = make_account(sqlite_api)
    summary = _import(sqlite_api, target.key, body_of(exported))
    assert summary == {"imported": len(exported) - 1, "skipped": 0, "refused": 0, "reasons": []}
    assert comparable(export_of(sqlite_api, target.key)) == comparable(exported)

    again = _import(sqlite_api, target.key, body_of(exported))
    assert again == {"imported": 0, "skipped": len(exported) - 1, "refused": 0, "reasons": []}
    assert comparable(export_of(sqlite_api, target.key)) == comparable(exported)

    with sqlite_api.client(target.key) as http:
        # Imported memories are searchable. Where among the results depends on the rest of the shared index (its
        # word statistics), so the test asks only that it is found.
        found = http.post("/v1/memories/search", json={"query": "how do we deploy?"}).json()["results"]
        (deploy,) = [hit for hit in found if hit["content"] == "We deploy with fly.io"]
        history = http.get(f"/v1/memories/{deploy['id']}/history").json()["history"]
        assert [e["event"] for e in history] == ["ADD", "UPDATE"]


def test_a_memory_deleted_since_the_export_is_restored_by_importing_it(api: RunningServer) -> None:
    account = make_account(api)
    with api.client(account.key) as http:
        kept = http.post("/v1/memories", json={"content": "We deploy with fly", "tags": ["ops"]}).json()["id"]
        lost = http.post("/v1/memories", json={"content": "Staging runs on port 8443", "tags": ["ops"]}).json()["id"]
        backup = export_of(api, account.key)
        assert http.delete(f"/v1/memories/{lost}").status_code == 200

        summary = _import(api, account.key, body_of(backup))
        assert summary == {"imported": 1, "skipped": 1, "refused": 0, "reasons": []}
        restored = http.get(f"/v1/memories/{lost}")
        assert restored.status_code == 200, restored.text
        assert restored.json()["content"] == "Staging runs on port 8443" and restored.json()["tags"] == ["ops"]
        history = http.get(f"/v1/memories/{lost}/history").json()["history"]
        assert [e["event"] for e in history] == ["ADD", "DELETE", "ADD"]
        found = http.post("/v1/memories/search", json={"query": "which port does staging run on"}).json()["results"]
        assert lost in [r["id"] for r in found]
        assert http.get(f"/v1/memories/{kept}").status_code == 200

    assert _import(api, account.key, body_of(backup)) == {"imported": 0, "skipped": 2, "refused": 0, "reasons": []}


def test_an_id_another_account_holds_is_refused_with_its_reason_and_so_is_the_document_it_chunks(
    api: RunningServer,
) -> None:
    _, key = fill(api)
    exported = export_of(api, key)
    other = make_account(api)
    summary = _import(api, other.key, body_of(exported))
    lines = {
        kind: {n for n, line in enumerate(exported, start=1) if line.get("type") == kind}
        for kind in ("memory", "document")
    }
    reasons = {r["line"]: r["reason"] for r in summary["reasons"]}
    assert summary["refused"] == len(lines["memory"]) + len(lines["document"]) == len(reasons)
    assert summary["imported"] == len(exported) - 1 - summary["refused"]
    assert all("belongs to another account" in reasons[n] for n in lines["memory"])
    # Imported without its chunks, the document would be listed as indexed and never be found; sending the same file
    # again would then change nothing.
    assert all("chunks are not memories of this account" in reasons[n] for n in lines["document"])
    with api.client(other.key) as http:
        assert http.get("/v1/sessions/web/documents").json()["documents"] == []
        doc = next(line for line in exported if line.get("type") == "document")
        content = "# Guide\n\nInstall it.\n\n## Deploy\n\nRun fly deploy from the root.\n"
        sent = http.put("/v1/sessions/web/documents", json={"path": doc["path"], "content": content})
        assert sent.status_code == 200, sent.text
        assert sent.json()["chunks_written"] > 0
        found = http.post("/v1/memories/search", json={"query": "how do I deploy", "session": "web"}).json()
        assert any("fly deploy" in r["content"] for r in found["results"]), found


def _unpack(text: str) -> list[float]:
    raw = base64.b64decode(text)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def _one_hot(dims: int, at: int) -> str:
    values = [0.0] * dims
    values[at] = 1.0
    return base64.b64encode(struct.pack(f"<{dims}f", *values)).decode()


def test_vectors_of_the_same_model_are_reused_and_another_models_are_embedded_again(
    api: RunningServer, sqlite_api: RunningServer
) -> None:
    _, key = fill(api)
    exported = export_of(api, key, vectors="true")
    assert exported[0]["vectors"] is True
    memories = [line for line in exported if line.get("type") == "memory"]
    assert all(len(_unpack(m["vector"])) == exported[0]["dims"] for m in memories)
    dims = exported[0]["dims"]

    # Same model: the file's vectors go into the index as they are (one-hot stand-ins prove it).
    same = [dict(line) for line in exported]
    for n, line in enumerate(same):
        if line.get("type") == "memory":
            line["vector"] = _one_hot(dims, n)
    reuser = make_account(sqlite_api)
    assert _import(sqlite_api, reuser.key, body_of(same))["refused"] == 0
    reused = {
        m["id"]: m["vector"] for m in export_of(sqlite_api, reuser.key, vectors="true") if m.get("type") == "memory"
    }
    assert reused == {m["id"]: m["vector"] for m in same if m.get("type") == "memory"}

    # Another model: its vectors mean nothing here, so the text is embedded again.
    other = [dict(line) for line in same]
    other[0] = {**other[0], "model": "someone-else/other-embedding-model"}
    target = make_account(sqlite_api)
    # The ids are `reuser`'s on this server now: the same records under new ids.
    renamed = _renamed(other)
    assert _import(sqlite_api, target.key, body_of(renamed))["refused"] == 0
    again = {
        m["content"]: _unpack(m["vector"])
        for m in export_of(sqlite_api, target.key, vectors="true")
        if m.get("type") == "memory"
    }
    original = {m["content"]: _unpack(m["vector"]) for m in memories}
    assert again.keys() == original.keys()
    for content, vector in again.items():
        assert _cosine(vector, original[content]) > 0.99, content


def _renamed(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import uuid

    mapping: dict[str, str] = {}
    out = []
    for line in lines:
        line = json.loads(json.dumps(line))
        if line.get("type") == "memory":
            mapping[line["id"]] = line["id"] = str(uuid.uuid4())
        out.append(line)
    for line in out:
        if line.get("type") == "document":
            line["memory_ids"] = [mapping[m] for m in line["memory_ids"]]
    return out


def test_an_export_pages_through_memories_in_order_without_losing_or_repeating_one(
    api: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.portability import export

    _, key = fill(api)
    with api.client(key) as http:
        batch = {"memories": [{"content": f"note number {n}"} for n in range(7)]}  # one instant: ties on created_at
        assert http.post("/v1/memories", json=batch).status_code == 201
    whole = export_of(api, key)
    monkeypatch.setattr(export, "PAGE", 2)  # the server runs in this process
    paged = export_of(api, key)
    assert [line.get("id") for line in paged[1:]] == [line.get("id") for line in whole[1:]]
    memories = [line for line in paged[1:] if line.get("type") == "memory"]
    assert len({m["id"] for m in memories}) == len(memories) == 7 + 7  # fill's 5 and 2 document chunks
