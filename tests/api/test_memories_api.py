"""The REST contract of /v1, driven over real HTTP against PostgreSQL."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.accounts.principal import Principal, scopes_for
from app.errors import ValidationFailed
from app.memories.schemas import MAX_HISTORY_PAGE
from tests.harness import Account, RunningServer, add_key, make_account


def _add(server: RunningServer, account: Account, **body: Any) -> dict[str, Any]:
    with server.client(account.key) as http:
        response = http.post("/v1/memories", json=body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def _search(server: RunningServer, account: Account, **body: Any) -> list[dict[str, Any]]:
    with server.client(account.key) as http:
        response = http.post("/v1/memories/search", json=body)
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def test_add_then_search_finds_the_memory_with_every_field(api: RunningServer) -> None:
    me = make_account(api)
    created = _add(api, me, content="The build uses pnpm workspaces", tags=["build"], metadata={"repo": "web"})
    assert created["id"] and created["scope"] == "user" and created["tags"] == ["build"]

    results = _search(api, me, query="which package manager does the build use?")
    assert results[0]["id"] == created["id"]
    hit = results[0]
    assert set(hit) >= {"id", "content", "score", "scope", "tags", "metadata", "session", "agent", "created_at"}
    assert hit["content"] == "The build uses pnpm workspaces"
    assert hit["metadata"] == {"repo": "web"}
    assert 0 < hit["score"] <= 1


def test_a_batch_adds_every_memory(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        response = http.post(
            "/v1/memories", json={"memories": [{"content": "alpha fact"}, {"content": "beta fact", "tags": ["b"]}]}
        )
        assert response.status_code == 201, response.text
        results = response.json()["results"]
        assert [r["content"] for r in results] == ["alpha fact", "beta fact"]
        listed = http.get("/v1/memories").json()["memories"]
    assert {m["id"] for m in listed} == {r["id"] for r in results}


def test_a_batch_with_one_bad_item_stores_nothing(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        response = http.post("/v1/memories", json={"memories": [{"content": "fine"}, {"content": ""}]})
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_request"
        # Past schema validation too: the last item is well-formed but the service refuses it (an agent-scoped
        # memory needs a session), after the first two were accepted: none is stored, none is searchable.
        batch = [{"content": "the otter"}, {"content": "the beaver"}, {"content": "the heron", "scope": "agent"}]
        refused = http.post("/v1/memories", json={"memories": batch})
        assert refused.status_code == 422 and "needs a session" in refused.json()["error"]["message"], refused.text
        assert http.get("/v1/memories").json()["memories"] == []
        found = http.post("/v1/memories/search", json={"query": "the otter and the beaver", "threshold": 0})
        assert found.json()["results"] == []


def test_get_patch_delete_and_history(api: RunningServer) -> None:
    me = make_account(api)
    memory_id = _add(api, me, content="Deploys go out on Tuesdays")["id"]
    with api.client(me.key) as http:
        assert http.get(f"/v1/memories/{memory_id}").json()["content"] == "Deploys go out on Tuesdays"

        patched = http.patch(
            f"/v1/memories/{memory_id}", json={"content": "Deploys go out on Thursdays", "tags": ["ops"]}
        )
        assert patched.status_code == 200, patched.text
        assert patched.json()["content"] == "Deploys go out on Thursdays"
        assert patched.json()["tags"] == ["ops"]

        results = http.post("/v1/memories/search", json={"query": "when do deploys happen"}).json()["results"]
        assert results[0]["content"] == "Deploys go out on Thursdays"

        deleted = http.delete(f"/v1/memories/{memory_id}")
        assert deleted.status_code == 200
        assert http.get(f"/v1/memories/{memory_id}").status_code == 404
        after = http.post("/v1/memories/search", json={"query": "when do deploys happen"}).json()["results"]
        assert memory_id not in {r["id"] for r in after}

        history = http.get(f"/v1/memories/{memory_id}/history").json()["history"]
    assert [h["event"] for h in history] == ["ADD", "UPDATE", "DELETE"]
    assert history[1]["old_content"] == "Deploys go out on Tuesdays"
    assert history[1]["new_content"] == "Deploys go out on Thursdays"


def test_history_comes_a_page_at_a_time_each_event_once_in_order(api: RunningServer) -> None:
    me = make_account(api)
    memory_id = _add(api, me, content="draft 0")["id"]
    with api.client(me.key) as http:
        for n in range(1, 10):
            assert http.patch(f"/v1/memories/{memory_id}", json={"content": f"draft {n}"}).status_code == 200
        assert http.delete(f"/v1/memories/{memory_id}").status_code == 200
        whole = http.get(f"/v1/memories/{memory_id}/history", params={"limit": 11}).json()
        pages, after = [], None
        for _ in range(11):  # a page holds one event at least: more pages than events never end
            params = {"limit": 3} | ({"after": after} if after is not None else {})
            page = http.get(f"/v1/memories/{memory_id}/history", params=params).json()
            pages.append(page["history"])
            after = page["next"]
            if after is None:
                break
        default = http.get(f"/v1/memories/{memory_id}/history").json()
    assert [h["event"] for h in whole["history"]] == ["ADD", *["UPDATE"] * 9, "DELETE"] and whole["next"] is None
    assert [len(p) for p in pages] == [3, 3, 3, 2]
    assert [h for p in pages for h in p] == whole["history"], "every event once, oldest first"
    assert [h["new_content"] for h in pages[1]] == ["draft 3", "draft 4", "draft 5"]
    assert default == whole, "the default page holds 100"


@pytest.mark.parametrize("server", ["api", "sqlite_api"])
def test_history_pages_are_bounded_and_bad_bounds_are_refused(server: str, request: pytest.FixtureRequest) -> None:
    api: RunningServer = request.getfixturevalue(server)
    me = make_account(api)
    memory_id = _add(api, me, content="a memory with a short history")["id"]
    with api.client(me.key) as http:
        url = f"/v1/memories/{memory_id}/history"
        bad = ({"limit": 0}, {"limit": 1001}, {"limit": "all"}, {"after": -1}, {"after": "x"}, {"after": 2**63})
        for params in bad:
            refused = http.get(url, params=params)
            assert refused.status_code in (400, 422), (params, refused.text)
            assert refused.json()["error"]["message"], refused.text
        assert http.get(url, params={"limit": 1000}).json()["history"][0]["event"] == "ADD"
        past_the_end = http.get(url, params={"after": 2**31 - 1}).json()
    assert past_the_end == {"memory_id": memory_id, "history": [], "next": None}
    # The service refuses too, for whatever else calls it (MCP, the dashboard).
    who = Principal(me.user_id, scopes_for("write"), key_id=None, via="test")
    with pytest.raises(ValidationFailed, match="limit"):
        api.run(api.container.memories.history(who, None, memory_id, limit=MAX_HISTORY_PAGE + 1))
    with pytest.raises(ValidationFailed, match="after"):
        api.run(api.container.memories.history(who, None, memory_id, after=2**63))


def test_another_tenants_memory_answers_404_like_a_missing_one(api: RunningServer) -> None:
    owner, stranger = make_account(api), make_account(api)
    memory_id = _add(api, owner, content="owner's secret plan")["id"]
    with api.client(stranger.key) as http:
        for response in (
            http.get(f"/v1/memories/{memory_id}"),
            http.patch(f"/v1/memories/{memory_id}", json={"content": "hijacked"}),
            http.delete(f"/v1/memories/{memory_id}"),
            http.get(f"/v1/memories/{memory_id}/history"),
            http.get("/v1/memories/00000000-0000-0000-0000-000000000000"),
        ):
            assert response.status_code == 404, response.text
            assert response.json()["error"]["code"] == "not_found"
        assert all(
            r["id"] != memory_id
            for r in http.post("/v1/memories/search", json={"query": "secret plan"}).json()["results"]
        )
    with api.client(owner.key) as http:
        assert http.get(f"/v1/memories/{memory_id}").json()["content"] == "owner's secret plan"


def test_scopes_user_session_and_agent(api: RunningServer) -> None:
    me = make_account(api)
    user_mem = _add(api, me, content="I prefer tabs over spaces")["id"]
    session_mem = _add(api, me, content="The scraper targets example.org", session="web", agent="lead")["id"]
    agent_mem = _add(api, me, content="My notes on parsing tables", session="web", agent="lead", scope="agent")["id"]
    other_session = _add(api, me, content="Mobile app uses Swift", session="mobile", agent="lead")["id"]

    def visible(**params: Any) -> set[str]:
        with api.client(me.key) as http:
            response = http.get("/v1/memories", params=params)
        assert response.status_code == 200, response.text
        return {m["id"] for m in response.json()["memories"]}

    assert visible() == {user_mem}
    assert visible(session="web") == {user_mem, session_mem}
    assert visible(session="web", agent="lead") == {user_mem, session_mem, agent_mem}
    assert visible(session="web", agent="helper") == {user_mem, session_mem}
    assert visible(session="mobile", agent="lead") == {user_mem, other_session}
    assert visible(session="web", scope="session") == {session_mem}


def test_list_filters_by_tags_and_paginates_with_a_cursor(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        body = {
            "memories": [{"content": f"note {i}", "tags": ["x", "even"] if i % 2 == 0 else ["x"]} for i in range(7)]
        }
        assert http.post("/v1/memories", json=body).status_code == 201
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 3}
            if cursor:
                params["cursor"] = cursor
            page = http.get("/v1/memories", params=params).json()
            seen += [m["id"] for m in page["memories"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) == 7
        evens = http.get("/v1/memories", params={"tags": ["x", "even"]}).json()["memories"]
        assert sorted(m["content"] for m in evens) == ["note 0", "note 2", "note 4", "note 6"]
        assert http.get("/v1/memories", params={"cursor": "not-a-cursor"}).status_code == 422


def test_search_filters_by_tags_metadata_and_threshold(api: RunningServer) -> None:
    me = make_account(api)
    _add(api, me, content="Postgres runs on port 5432", tags=["db", "infra"], metadata={"env": "prod"})
    _add(api, me, content="Postgres replica runs on port 5433", tags=["db"], metadata={"env": "staging"})
    both = _search(api, me, query="postgres port", tags=["db", "infra"])
    assert [r["content"] for r in both] == ["Postgres runs on port 5432"]
    staging = _search(api, me, query="postgres port", metadata={"env": "staging"})
    assert [r["content"] for r in staging] == ["Postgres replica runs on port 5433"]
    assert _search(api, me, query="a recipe for banana bread", threshold=0.9) == []
    assert len(_search(api, me, query="postgres", limit=1)) == 1


def test_topics_count_tags(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        body = {"memories": [{"content": "a", "tags": ["db", "ops"]}, {"content": "b", "tags": ["db"]}]}
        http.post("/v1/memories", json=body)
        topics = http.get("/v1/topics").json()["topics"]
    assert topics == [{"tag": "db", "count": 2}, {"tag": "ops", "count": 1}]


def test_read_keys_cannot_write(api: RunningServer) -> None:
    me = make_account(api)
    reader = add_key(api, me.user_id, scope="read")
    memory_id = _add(api, me, content="written with a write key")["id"]
    with api.client(reader.key) as http:
        assert http.get(f"/v1/memories/{memory_id}").status_code == 200
        assert http.post("/v1/memories/search", json={"query": "written"}).status_code == 200
        for response in (
            http.post("/v1/memories", json={"content": "nope"}),
            http.patch(f"/v1/memories/{memory_id}", json={"content": "nope"}),
            http.delete(f"/v1/memories/{memory_id}"),
        ):
            assert response.status_code == 403
            assert response.json()["error"]["code"] == "forbidden"


def test_missing_bad_and_revoked_keys_answer_401(api: RunningServer) -> None:
    me = make_account(api)
    with api.client() as http:
        missing = http.get("/v1/memories")
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert missing.json()["error"]["code"] == "unauthorized"
        assert http.get("/v1/memories", headers={"Authorization": "Bearer egk_nope"}).status_code == 401
        assert http.get("/v1/memories", headers={"Authorization": "Basic abc"}).status_code == 401
        # A wrong key that is surely not the real one (flipping its last character to a different one).
        wrong = me.key[:-1] + ("y" if me.key[-1] != "y" else "z")
        assert http.get("/v1/memories", headers={"Authorization": f"Bearer {wrong}"}).status_code == 401
        assert http.get("/v1/memories", headers={"X-API-Key": me.key}).status_code == 200

    from app.accounts import service

    async def revoke() -> None:
        async with api.container.db.session() as session:
            await service.revoke_key(session, me.key_id)

    api.run(revoke())
    with api.client(me.key) as http:
        response = http.get("/v1/memories")
        assert response.status_code == 401
        assert "revoked" in response.json()["error"]["message"]


def test_last_used_time_is_recorded(api: RunningServer) -> None:
    me = make_account(api)
    from app.accounts import service

    async def last_used() -> object:
        async with api.container.db.session() as session:
            keys = await service.list_keys(session, me.user_id)
        return keys[0].last_used_at

    assert api.run(last_used()) is None
    with api.client(me.key) as http:
        http.get("/v1/memories")
    assert api.run(last_used()) is not None


def test_oversize_body_answers_413_and_stores_nothing(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        huge = http.post("/v1/memories", json={"content": "x" * 70_000})
        assert huge.status_code == 413
        assert huge.json()["error"]["code"] == "payload_too_large"
        assert re.search(r"the request body is over the limit of \d+ bytes", huge.json()["error"]["message"])
        too_long = http.post("/v1/memories", json={"content": "y" * 2001})
        assert too_long.status_code == 413
        assert too_long.json()["error"]["code"] == "memory_too_large"
        assert http.get("/v1/memories").json()["memories"] == []


def test_values_postgresql_cannot_store_are_refused_clearly_and_store_nothing(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        nul_content = http.post("/v1/memories", json={"content": "a\x00b"})
        assert nul_content.status_code == 422, nul_content.text
        assert "NUL" in nul_content.json()["error"]["message"]
        nul_in_batch = http.post("/v1/memories", json={"memories": [{"content": "fine"}, {"content": "\x00"}]})
        assert nul_in_batch.status_code == 422, nul_in_batch.text
        assert http.get("/v1/memories").json()["memories"] == []
        assert http.post("/v1/memories", json={"content": "still works"}).status_code == 201


def test_bad_input_gets_clear_errors(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        cases = [
            http.post("/v1/memories", content=b"{not json", headers={"content-type": "application/json"}),
            http.post("/v1/memories", json={"content": "x", "scope": "galaxy"}),
            http.post("/v1/memories", json={"content": "x", "unknown": 1}),
            http.post("/v1/memories", json={"content": "x", "session": "a__b"}),
            http.post("/v1/memories", json={"content": "x", "agent": "solo"}),
            http.post("/v1/memories", json={"content": "x", "scope": "session"}),
            http.post("/v1/memories", json={"content": "x", "infer": True}),
            http.post("/v1/memories/search", json={"query": ""}),
            http.post("/v1/memories/search", json={"query": "x", "limit": 1000}),
            http.patch("/v1/memories/whatever", json={}),
            http.get("/v1/memories", params={"scope": "planet"}),
            http.get("/v1/memories", params={"session": "bad name"}),
        ]
    for response in cases:
        assert response.status_code in (400, 404, 422), response.text
        error = response.json()["error"]
        assert error["code"] and error["message"]
    assert cases[4].json()["error"]["message"].startswith("agent needs a session")
    # Errors name the fields of the shape that was sent, not the internal model names of both shapes.
    assert cases[1].json()["error"]["message"].startswith("scope:")
    assert "MemoryIn" not in cases[1].text and "MemoryBatchIn" not in cases[1].text
    assert "session" in cases[5].json()["error"]["message"]
    assert "LLM" in cases[6].json()["error"]["message"]


def test_health_readiness_and_openapi(api: RunningServer) -> None:
    with api.client() as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        ready = http.get("/readyz").json()
        assert ready["status"] == "ready"
        assert ready["checks"]["database"]["status"] == "ok"
        assert ready["checks"]["vector_index"]["status"] == "ok"
        schema = http.get("/docs/openapi.json").json()
    assert "/v1/memories/search" in schema["paths"]
    assert "/v1/memories/{memory_id}" in schema["paths"]
    # Clients generated from the schema know how to authenticate.
    assert set(schema["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    assert schema["paths"]["/v1/memories/search"]["post"]["security"] == [{"bearer": []}, {"apiKey": []}]
    assert schema["paths"]["/v1/sessions/{session}/status"]["get"]["security"] == [{"bearer": []}, {"apiKey": []}]


def test_a_rare_tag_pages_through_every_match_in_order(api: RunningServer) -> None:
    """The tag scan reads growing batches: whatever their sizes, each match comes once, newest first."""
    me = make_account(api)
    with api.client(me.key) as http:
        body = {"memories": [{"content": f"n{i}", "tags": ["rare"] if i % 13 == 0 else []} for i in range(90)]}
        assert http.post("/v1/memories", json=body).status_code == 201
        everything = [m["content"] for m in http.get("/v1/memories", params={"limit": 200}).json()["memories"]]
        expected = [c for c in everything if int(c[1:]) % 13 == 0]
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 2, "tags": ["rare"], **({"cursor": cursor} if cursor else {})}
            page = http.get("/v1/memories", params=params).json()
            seen += [m["content"] for m in page["memories"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == expected and len(expected) == 7
