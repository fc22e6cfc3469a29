"""REST /v1/sessions/{session}/documents over real HTTP: index, replace, remove, list; chunks are memories."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx

from tests.harness import RunningServer, add_key, make_account

README = """# Engram

Hosted memory for coding agents.

## Deploy

We deploy with flyctl from the main branch; staging first, then production.

### Fly

The fly.toml file pins the region to ams and keeps one machine warm.

## Testing

Run make test; it needs PostgreSQL and Redis on the machine.
"""


def chunks(http: httpx.Client, session: str, path: str | None = None) -> list[dict[str, Any]]:
    """Every document chunk readable in the session (optionally of one file), paging through."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"session": session, "tags": ["document"], "limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = http.get("/v1/memories", params=params).json()
        out.extend(m for m in page["memories"] if path is None or m["metadata"]["path"] == path)
        cursor = page["next_cursor"]
        if not cursor:
            return out


def put(http: httpx.Client, session: str, body: Any) -> httpx.Response:
    return http.put(f"/v1/sessions/{session}/documents", json=body)


def test_a_file_becomes_one_memory_per_section_with_its_source(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        indexed = put(http, "docs", {"path": "README.md", "content": README, "modified_at": "2026-11-01T10:00:00Z"})
        assert indexed.status_code == 200, indexed.text
        report = indexed.json()
        assert (report["added"], report["changed"], report["unchanged"], report["chunks_written"]) == (1, 0, 0, 4)
        assert report["files"] == [{"path": "README.md", "status": "added", "chunks": 4}]

        stored = chunks(http, "docs")
        assert sorted(c["source"] for c in stored) == [
            "README.md > Engram",
            "README.md > Engram > Deploy",
            "README.md > Engram > Deploy > Fly",
            "README.md > Engram > Testing",
        ]
        fly = next(c for c in stored if c["source"].endswith("Fly"))
        # The heading path leads the embedded text; the section's own text follows.
        assert fly["content"].startswith("README.md > Engram > Deploy > Fly\n\n### Fly\n")
        assert "pins the region to ams" in fly["content"]
        assert fly["scope"] == "session" and fly["session"] == "docs"
        meta = fly["metadata"]
        assert meta["kind"] == "document" and meta["path"] == "README.md"
        assert meta["heading_path"] == "Engram > Deploy > Fly"
        assert meta["content_hash"] == hashlib.sha256(README.encode()).hexdigest()
        assert meta["modified_at"].startswith("2026-11-01T10:00:00")
        assert set(fly["tags"]) == {"document", "markdown"}

        found = http.post("/v1/memories/search", json={"query": "which region does fly.toml pin?", "session": "docs"})
        top = found.json()["results"][0]
        assert top["source"] == "README.md > Engram > Deploy > Fly"

        listed = http.get("/v1/sessions/docs/documents").json()
        assert listed["documents"] == [
            {
                "path": "README.md",
                "content_hash": hashlib.sha256(README.encode()).hexdigest(),
                "size": len(README.encode()),
                "chunks": 4,
                "origin": "upload",
                "modified_at": "2026-11-01T10:00:00Z",
                "indexed_at": listed["documents"][0]["indexed_at"],
            }
        ]
        topics = {t["tag"]: t["count"] for t in http.get("/v1/topics", params={"session": "docs"}).json()["topics"]}
        assert topics["document"] == 4 and topics["markdown"] == 4


def test_unchanged_writes_nothing_and_a_change_replaces_exactly_that_files_chunks(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        put(http, "p", {"documents": [{"path": "README.md", "content": README}, {"path": "a.json", "content": "{}"}]})
        put(http, "p", {"path": "docs/other.md", "content": "# Other\n\nUntouched by the README's changes.\n"})
        before = {c["id"] for c in chunks(http, "p")}
        other_before = {c["id"] for c in chunks(http, "p", "docs/other.md")}

        again = put(http, "p", {"path": "README.md", "content": README}).json()
        assert (again["unchanged"], again["chunks_written"], again["chunks_removed"]) == (1, 0, 0)
        assert {c["id"] for c in chunks(http, "p")} == before

        changed = README.replace("ams", "fra").replace(
            "## Testing\n\nRun make test; it needs PostgreSQL and Redis on the machine.\n", ""
        )
        report = put(http, "p", {"path": "README.md", "content": changed}).json()
        assert (report["changed"], report["chunks_written"], report["chunks_removed"]) == (1, 3, 4)
        after = chunks(http, "p", "README.md")
        assert len(after) == 3 and not {c["id"] for c in after} & before
        assert any("fra" in c["content"] for c in after) and not any("ams" in c["content"] for c in after)
        assert {c["id"] for c in chunks(http, "p", "docs/other.md")} == other_before

        # The history keeps what the replaced chunks said.
        old_id = next(iter(before - other_before - {c["id"] for c in chunks(http, "p", "a.json")}))
        history = http.get(f"/v1/memories/{old_id}/history").json()["history"]
        assert [h["event"] for h in history] == ["ADD", "DELETE"]


def test_delete_removes_every_chunk_of_a_file_and_unknown_paths_remove_nothing(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        put(
            http, "d", [{"path": "README.md", "content": README}, {"path": "notes.md", "content": "# Notes\n\nKeep.\n"}]
        )
        refused = http.delete("/v1/sessions/d/documents", params={"path": ["README.md", "missing.md"]})
        assert refused.status_code == 404 and "missing.md" in refused.json()["error"]["message"]
        assert len(chunks(http, "d", "README.md")) == 4

        removed = http.delete("/v1/sessions/d/documents", params={"path": "README.md"})
        assert removed.status_code == 200, removed.text
        assert (removed.json()["removed"], removed.json()["chunks_removed"]) == (1, 4)
        assert chunks(http, "d", "README.md") == []
        assert [d["path"] for d in http.get("/v1/sessions/d/documents").json()["documents"]] == ["notes.md"]
        found = http.post("/v1/memories/search", json={"query": "fly region ams", "session": "d", "limit": 10}).json()
        assert all(r["source"] != "README.md > Engram > Deploy > Fly" for r in found["results"])


def test_a_batch_with_one_bad_file_indexes_nothing_and_names_each_reason(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        bad = [
            {"path": "good.md", "content": "# Good\n\nFine.\n"},
            {"path": "../secrets.md", "content": "# Out\n"},
            {"path": "/etc/passwd.md", "content": "# Abs\n"},
            {"path": "C:\\x.md", "content": "# Drive\n"},
            {"path": "bin.md", "content": "PNG\x00\x01"},
            {"path": "big.md", "content": "x" * 70_000},
        ]
        refused = put(http, "b", {"documents": bad})
        assert refused.status_code in (413, 422), refused.text
        if refused.status_code == 422:
            reasons = {r["path"]: r["reason"] for r in refused.json()["error"]["refused"]}
            assert reasons == {
                "../secrets.md": "outside_project",
                "/etc/passwd.md": "outside_project",
                "C:\\x.md": "outside_project",
                "bin.md": "binary",
            }
        small = [b for b in bad if b["path"] != "big.md"]
        refused = put(http, "b", small)
        assert refused.status_code == 422
        assert "nothing was indexed" in refused.json()["error"]["message"]
        assert chunks(http, "b") == [] and http.get("/v1/sessions/b/documents").json()["documents"] == []

        surrogate = http.put(
            "/v1/sessions/b/documents",
            content=b'{"path": "s.md", "content": "\\ud800 lone"}',
            headers={"content-type": "application/json"},
        )
        assert surrogate.status_code in (400, 422) and chunks(http, "b") == []
        for body in ({"path": "x.md"}, {"content": "x"}, {"documents": []}, {"path": "x.md", "content": "x", "y": 1}):
            assert put(http, "b", body).status_code in (400, 422), body
        assert http.put("/v1/sessions/bad__name/documents", json={"path": "a.md", "content": "a"}).status_code == 400
        assert http.delete("/v1/sessions/b/documents", params={"path": "../x"}).status_code == 422


def test_too_large_files_are_refused_with_a_reason(api: RunningServer) -> None:
    me = make_account(api)
    limit = api.settings.max_document_bytes
    with api.client(me.key) as http:
        big = put(http, "big", {"path": "huge.md", "content": "word " * (limit // 5 + 1)})
        assert big.status_code in (413, 422)
        if big.status_code == 422:
            assert big.json()["error"]["refused"][0]["reason"] == "too_large"
    assert limit < api.settings.max_body_bytes or big.status_code == 413


def test_long_sections_split_at_paragraphs_within_the_memory_limit(api: RunningServer) -> None:
    me = make_account(api)
    limit = api.settings.max_memory_chars
    paragraphs = [f"Paragraph {i} " + " ".join(f"word{i}x{j}" for j in range(40)) for i in range(20)]
    fence = "```python\n" + "\n".join(f"print({i})" for i in range(60)) + "\n```"
    text = (
        "# Guide\n\n## Long\n\n" + "\n\n".join(paragraphs[:10]) + "\n\n" + fence + "\n\n" + "\n\n".join(paragraphs[10:])
    )
    with api.client(me.key) as http:
        put(http, "long", {"path": "guide.md", "content": text})
        stored = chunks(http, "long", "guide.md")
        assert len(stored) > 1
        words = set(text.split())
        for chunk in stored:
            assert len(chunk["content"]) <= limit
            assert chunk["source"] == "guide.md > Guide > Long"
            body = chunk["content"].split("\n\n", 1)[1]
            assert set(body.split()) <= words  # never a word cut in two
        fences = [c for c in stored if "```python" in c["content"]]
        assert len(fences) == 1 and fence in fences[0]["content"]  # the fence fits, so it stays whole


def test_documents_stay_in_their_users_session(api: RunningServer) -> None:
    alice, bob = make_account(api), make_account(api)
    with api.client(alice.key) as a, api.client(bob.key) as b:
        put(a, "secret", {"path": "README.md", "content": README})
        assert b.get("/v1/sessions/secret/documents").json()["documents"] == []
        assert chunks(b, "secret") == []
        found = b.post("/v1/memories/search", json={"query": "fly region ams", "session": "secret"}).json()
        assert found["results"] == []
        # Bob cannot remove or overwrite Alice's file either: his session of that name is his own.
        assert b.delete("/v1/sessions/secret/documents", params={"path": "README.md"}).status_code == 404
        put(b, "secret", {"path": "README.md", "content": "# Bob\n\nBob's own readme.\n"})
        assert len(chunks(a, "secret", "README.md")) == 4
        # Another session of the same user does not see them.
        assert chunks(a, "elsewhere") == []
        other = a.post("/v1/memories/search", json={"query": "fly region ams", "session": "elsewhere"}).json()
        assert all(r["source"] is None for r in other["results"])


def test_chunks_are_memories_delete_and_tags_work_on_them(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        put(http, "m", {"path": "README.md", "content": README})
        one = chunks(http, "m", "README.md")[0]
        assert http.get(f"/v1/memories/{one['id']}").json()["source"] == one["source"]
        assert http.delete(f"/v1/memories/{one['id']}").status_code == 200
        assert len(chunks(http, "m", "README.md")) == 3
        # Re-indexing the changed file later replaces what is left, without tripping over the deleted chunk.
        report = put(http, "m", {"path": "README.md", "content": README + "\n## More\n\nMore text.\n"}).json()
        assert (report["chunks_written"], report["chunks_removed"]) == (5, 4)
        assert len(chunks(http, "m", "README.md")) == 5


def test_read_only_keys_list_but_cannot_index_or_remove(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        assert put(http, "r", {"path": "kept.md", "content": "# Kept\n\nStays.\n"}).status_code == 200
    with api.client(add_key(api, me.user_id, scope="read").key) as http:
        assert put(http, "r", {"path": "a.md", "content": "# A\n"}).status_code == 403
        for path in ("kept.md", "missing.md"):  # refused for the key, before anything is looked up
            removed = http.delete("/v1/sessions/r/documents", params={"path": path})
            assert removed.status_code == 403, removed.text
        listed = http.get("/v1/sessions/r/documents")
        assert listed.status_code == 200
        assert [(d["path"], d["chunks"]) for d in listed.json()["documents"]] == [("kept.md", 1)]
    with httpx.Client(base_url=api.base_url) as anonymous:
        assert anonymous.get("/v1/sessions/r/documents").status_code == 401
