"""Keys bound to one session and agent on MCP: such a key opens only its own session URL, and through it the agent
reads its own private memories and never another agent's, whoever wrote them and however it asks."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.harness import RunningServer, add_key, make_account
from tests.mcp.conftest import connect, mcp_url, session_id
from tests.mcp.test_endpoint import initialize, post
from tests.mcp.test_tools import error_text, structured

SESSIONS = ["alpha", "beta"]
AGENTS = ["coder", "tester"]
PAIRS = [(s, a) for s in SESSIONS for a in AGENTS]


def test_a_bound_key_opens_only_its_own_session_url(api: RunningServer) -> None:
    rng = random.Random(20261127)
    me, other = make_account(api), make_account(api)
    keys = {pair: add_key(api, me.user_id, session=pair[0], agent=pair[1]).key for pair in PAIRS}
    client_names = ["claude code", "cursor"]
    for _ in range(30):
        (session, agent), key = rng.choice(list(keys.items()))
        target = rng.choice([me.user_id, *(session_id(me.user_id, s, a) for s, a in PAIRS)])
        response = post(mcp_url(api, target, rng.choice(client_names)), initialize(), key)
        if target == session_id(me.user_id, session, agent):
            assert response.status_code == 200, response.text
            continue
        assert response.status_code == 403, f"{session}/{agent} opened {target}: {response.text}"
        assert f"bound to session {session!r} and agent {agent!r}" in response.json()["error"]["message"]
    # Another user's URL stays another user's, bound or not.
    foreign = post(mcp_url(api, session_id(other.user_id, "alpha", "coder")), initialize(), keys[("alpha", "coder")])
    assert foreign.status_code == 403 and "another user" in foreign.text


@pytest.mark.anyio
async def test_bound_agents_never_read_each_others_private_memories_over_mcp(api: RunningServer) -> None:
    rng = random.Random(202611271)
    me = make_account(api)
    keys = {pair: add_key(api, me.user_id, session=pair[0], agent=pair[1]).key for pair in PAIRS}
    # (id, session, agent, scope, private) of everything written; the owner's unbound key writes as any agent too.
    written: list[tuple[str, str, str, str, bool]] = []
    with api.client(me.key) as owner:
        for step in range(24):
            session, agent = rng.choice(PAIRS)
            scope, private = rng.choice(["user", "session", "agent"]), rng.random() < 0.6
            body: dict[str, Any] = {"content": f"deploy note {step}", "scope": scope, "session": session}
            body.update(agent=agent, visibility="private" if private else "public")
            if rng.random() < 0.5:
                created = owner.post("/v1/memories", json=body)
                assert created.status_code == 201, created.text
                written.append((created.json()["id"], session, agent, scope, private))
                continue
            url_id = session_id(me.user_id, session, agent)
            async with connect(api, keys[(session, agent)], url_id) as client:
                item = {"content": body["content"], "scope": scope, "visibility": body["visibility"]}
                (memory,) = structured(await client.call_tool("add_memories", {"memories": [item]}))["results"]
                written.append((memory["id"], session, agent, scope, private))

    def readable(session: str, agent: str) -> set[str]:
        return {
            memory_id
            for memory_id, s, a, scope, private in written
            if (s, a) == (session, agent)
            or (not private and (scope == "user" or (scope == "session" and s == session)))
        }

    assert any(private for *_, private in written) and any(not private for *_, private in written)
    for session, agent in PAIRS:
        allowed = readable(session, agent)
        async with connect(api, keys[(session, agent)], session_id(me.user_id, session, agent)) as client:
            listed = structured(await client.call_tool("list_memories", {"limit": 200}))["memories"]
            assert {m["id"] for m in listed} == allowed, f"list as bound {session}/{agent}"
            found = structured(await client.call_tool("search_memory", {"query": "deploy note", "limit": 100}))
            assert {m["id"] for m in found["results"]} <= allowed, f"search as bound {session}/{agent}"
            # Naming another agent in a tool call is refused, and another agent's private memory is not there.
            other_agent = next(a for a in AGENTS if a != agent)
            named = await client.call_tool("list_memories", {"session": session, "agent": other_agent})
            assert named.is_error
            for memory_id, *_ in written:
                if memory_id not in allowed:
                    changed = await client.call_tool("update_memory", {"memory_id": memory_id, "content": "x"})
                    assert "no memory" in error_text(changed)
