"""Memories of scope role, private memories, and widening a memory's scope: the same rules over REST and MCP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.harness import RunningServer, make_account
from tests.mcp.conftest import connect, session_id
from tests.mcp.test_sessions import call
from tests.mcp.test_tools import error_text
from tests.teams.conftest import Agent, error


def add(http: httpx.Client, content: str, **fields: Any) -> dict[str, Any]:
    response = http.post("/v1/memories", json={"content": content, **fields})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def listed(http: httpx.Client, **params: Any) -> set[str]:
    response = http.get("/v1/memories", params={"limit": 200, **params})
    assert response.status_code == 200, response.text
    return {m["content"] for m in response.json()["memories"]}


def found(http: httpx.Client, query: str, **fields: Any) -> set[str]:
    response = http.post("/v1/memories/search", json={"query": query, "limit": 50, "threshold": 0, **fields})
    assert response.status_code == 200, response.text
    return {r["content"] for r in response.json()["results"]}


def test_role_memories_follow_the_role_across_sessions(server: RunningServer) -> None:
    me = make_account(server)
    http = server.client(me.key)
    Agent(http, "s1", "arch").join("architect")
    Agent(http, "s2", "arch2").join("architect")
    Agent(http, "s2", "dev").join("backend")
    note = add(http, "Design notes: hexagonal ports", session="s1", agent="arch", scope="role")
    assert note["scope"] == "role" and note["role"] == "architect" and note["visibility"] == "public"

    as_arch2 = {"session": "s2", "agent": "arch2"}
    assert "Design notes: hexagonal ports" in listed(http, **as_arch2)
    assert "Design notes: hexagonal ports" in found(http, "design notes hexagonal", **as_arch2)
    assert listed(http, scope="role", **as_arch2) == {"Design notes: hexagonal ports"}
    for outsider in ({"session": "s2", "agent": "dev"}, {"session": "s1", "agent": "nobody"}, {"session": "s1"}, {}):
        assert "Design notes: hexagonal ports" not in listed(http, **outsider), outsider
        assert "Design notes: hexagonal ports" not in found(http, "design notes hexagonal", **outsider), outsider
    assert http.get(f"/v1/memories/{note['id']}").status_code == 200  # the owner reaches every memory by id

    # Leaving the role's session registry ends the reading.
    Agent(http, "s2", "arch2").ok("DELETE", "/agents")
    assert "Design notes: hexagonal ports" not in listed(http, **as_arch2)
    refused = http.post("/v1/memories", json={"content": "x", "session": "s2", "agent": "arch2", "scope": "role"})
    assert "scope 'role' needs a role" in error(refused, 409)


def test_private_memories_are_read_only_by_their_writer(server: RunningServer) -> None:
    me = make_account(server)
    http = server.client(me.key)
    Agent(http, "s", "a").join("backend")
    Agent(http, "s", "b").join("backend")
    for scope in ("user", "session", "agent", "role"):
        memory = add(http, f"scratch {scope}", session="s", agent="a", scope=scope, visibility="private")
        assert memory["visibility"] == "private" and memory["scope"] == scope
    add(http, "plain private", visibility="private")
    mine = {"scratch user", "scratch session", "scratch agent", "scratch role"}
    assert mine <= listed(http, session="s", agent="a")
    assert listed(http, session="s", agent="a", scope="session") == {"scratch session"}
    assert mine <= found(http, "scratch", session="s", agent="a")
    for other in ({"session": "s", "agent": "b"}, {"session": "t", "agent": "a"}, {"session": "s"}, {}):
        assert not mine & listed(http, **other), other
        assert not mine & found(http, "scratch", **other), other
    assert "plain private" in listed(http) and "plain private" not in listed(http, session="s", agent="a")


def test_widening_a_scope_is_recorded_and_narrowing_is_refused(api: RunningServer) -> None:
    me = make_account(api)
    http = api.client(me.key)
    Agent(http, "w", "a").join("backend")
    memory = add(http, "the cache key includes the tenant", session="w", agent="a", scope="agent")
    url = f"/v1/memories/{memory['id']}"
    assert "the cache key includes the tenant" not in listed(http, session="w", agent="b")

    widened = http.patch(url, json={"scope": "session"})
    assert widened.status_code == 200 and widened.json()["scope"] == "session"
    assert "the cache key includes the tenant" in listed(http, session="w", agent="b")
    assert "the cache key includes the tenant" in found(http, "cache key tenant", session="w", agent="b")
    assert "scope session -> agent is refused (narrowing)" in error(http.patch(url, json={"scope": "agent"}), 409)
    assert "reach different readers" in error(http.patch(url, json={"scope": "role"}), 409)
    assert http.patch(url, json={"scope": "user", "tags": ["cache"]}).status_code == 200
    assert "the cache key includes the tenant" in listed(http, session="elsewhere")
    history = http.get(f"{url}/history").json()["history"]
    assert [(h["event"], h["detail"]) for h in history] == [
        ("ADD", None),
        ("PROMOTE", "scope: agent -> session"),
        ("UPDATE", None),
        ("PROMOTE", "scope: session -> user"),
    ]
    assert "nothing to update" in error(http.patch(url, json={}), 422)
    assert "public -> private is refused" in error(http.patch(url, json={"visibility": "private"}), 409)

    private = add(http, "draft idea", session="w", agent="a", visibility="private", scope="session")
    shared = http.patch(f"/v1/memories/{private['id']}", json={"visibility": "public"})
    assert shared.json()["visibility"] == "public" and shared.json()["scope"] == "session"
    assert "draft idea" in listed(http, session="w", agent="b")

    to_role = add(http, "role bound", session="w", agent="a", scope="agent")
    promoted = http.patch(f"/v1/memories/{to_role['id']}", json={"scope": "role"})
    assert promoted.status_code == 200, promoted.text
    assert promoted.json()["role"] == "backend"
    Agent(http, "other", "z").join("backend")
    assert "role bound" in listed(http, session="other", agent="z")


@pytest.mark.anyio
async def test_role_private_and_widening_through_mcp(api: RunningServer) -> None:
    me = make_account(api)
    async with (
        connect(api, me.key, session_id(me.user_id, "m1", "arch")) as arch,
        connect(api, me.key, session_id(me.user_id, "m2", "arch")) as arch2,
        connect(api, me.key, session_id(me.user_id, "m2", "dev")) as dev,
    ):
        refused = await arch.call_tool("add_memories", {"memories": [{"content": "x", "scope": "role"}]})
        assert "scope 'role' needs a role" in error_text(refused)
        await call(arch, "session_join", role="architect")
        await call(arch2, "session_join", role="architect")
        stored = await call(
            arch,
            "add_memories",
            memories=[
                {"content": "ADR-7: events over RPC", "scope": "role"},
                {"content": "my hunch about the bug", "visibility": "private"},
            ],
        )
        assert [m["scope"] for m in stored["results"]] == ["role", "session"]
        assert [m["visibility"] for m in stored["results"]] == ["public", "private"]
        assert "ADR-7: events over RPC" in {m["content"] for m in (await call(arch2, "list_memories"))["memories"]}
        assert (await call(dev, "list_memories"))["memories"] == []
        hits = await call(dev, "search_memory", query="events over RPC hunch", threshold=0)
        assert hits["results"] == []
        mine = await call(arch, "search_memory", query="hunch about the bug", threshold=0)
        assert mine["results"][0]["visibility"] == "private"

        hunch = stored["results"][1]["id"]
        widened = await call(arch, "update_memory", memory_id=hunch, visibility="public", scope="user")
        assert (widened["visibility"], widened["scope"]) == ("public", "user")
        assert "my hunch about the bug" in {m["content"] for m in (await call(dev, "list_memories"))["memories"]}
        narrowed = await arch.call_tool("update_memory", {"memory_id": hunch, "scope": "agent"})
        assert "narrowing" in error_text(narrowed)
        # Another agent's private memory is out of reach by id too.
        secret = (await call(arch, "add_memories", memories=[{"content": "s", "visibility": "private"}]))["results"]
        assert "no memory" in error_text(
            await dev.call_tool("update_memory", {"memory_id": secret[0]["id"], "content": "x"})
        )
