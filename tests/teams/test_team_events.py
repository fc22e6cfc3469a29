"""The session's SSE stream carries the team's events; an agent idle for five minutes shows as idle."""

from __future__ import annotations

import queue
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import update

from app.db import utcnow
from app.teams.models import SessionAgent
from tests.harness import RunningServer, add_key, make_account
from tests.sessions.test_sessions_api import _read_until, sse_stream  # noqa: F401  (the fixture)
from tests.teams.conftest import Agent


def test_the_sse_stream_carries_joins_messages_and_tasks(
    api: RunningServer,
    sse_stream: tuple[Any, queue.Queue[dict[str, Any]]],  # noqa: F811
) -> None:
    me, received = sse_stream
    with api.client(me.key) as http:
        a, b = Agent(http, "web", "a"), Agent(http, "web", "b")
        a.join("lead")
        b.inbox()
        sent = a.send("b", "take the parser", kind="task")
        a.create({"id": "parser", "description": "write it"})
        b.claim("parser")
        Agent(http, "other", "z").join("elsewhere")  # another session: never on this stream
        events = [received.get(timeout=30) for _ in range(4)]
    assert [(e["event"], e["agent"]) for e in events] == [
        ("agent", "a"),
        ("message", "a"),
        ("task", "a"),
        ("task", "b"),
    ]
    assert events[0]["data"] == {"action": "joined", "role": "lead"}
    assert events[1]["data"]["id"] == sent["id"] and events[1]["data"]["recipients"] == ["b"]
    assert events[2]["data"] == {"action": "created", "tasks": ["parser"]}
    assert events[3]["data"] == {"action": "claimed", "tasks": ["parser"], "assignee": "b"}
    try:
        extra = received.get(timeout=0.3)
    except queue.Empty:
        extra = None
    assert extra is None


def test_an_agent_without_a_call_for_five_minutes_is_idle(api: RunningServer) -> None:
    me = make_account(api)
    http = api.client(me.key)
    Agent(http, "nap", "sleeper").join("backend")
    Agent(http, "nap", "awake").join("backend")

    async def age() -> None:
        async with api.container.db.session() as db:
            await db.execute(
                update(SessionAgent)
                .where(SessionAgent.user_id == me.user_id, SessionAgent.agent == "sleeper")
                .values(last_seen_at=utcnow() - timedelta(minutes=6))
            )

    api.run(age())
    agents = {a["agent"]: a for a in http.get("/v1/sessions/nap/agents").json()["agents"]}
    assert agents["sleeper"]["status"] == agents["sleeper"]["state"] == "idle" and agents["sleeper"]["joined"] is True
    assert agents["awake"]["state"] == "active"


def test_a_key_bound_to_an_agent_hears_only_the_messages_meant_for_it(api: RunningServer) -> None:
    """The owner's stream carries every message; a bound agent's carries what its inbox would get, as on MCP."""
    owner = make_account(api)
    qa_key = add_key(api, owner.user_id, session="heard", agent="qa")
    with (
        api.client(owner.key) as http,
        httpx.Client(
            base_url=api.base_url, headers={"Authorization": f"Bearer {qa_key.key}"}, timeout=httpx.Timeout(30.0)
        ) as streams,
    ):
        dev, qa, ops = (Agent(http, "heard", name) for name in ("dev", "qa", "ops"))
        dev.join("developer")
        qa.join("tester")
        ops.join("operator")

        def conversation() -> None:
            dev.send("ops", "dev to ops")  # between two others: never on qa's stream
            dev.send("qa", "dev to qa")
            ops.send("role:developer", "ops to the developers")
            ops.send("*", "ops to everyone")
            dev.send("role:tester", "dev to the testers")

        with streams.stream("GET", "/v1/sessions/heard/events", params={"agent": "qa"}) as response:
            assert response.status_code == 200, response.read()
            heard = [e for e in _read_until(response, 3, after_ready=conversation) if e["kind"] == "message"]
    assert [e["data"]["content"] for e in heard] == ["dev to qa", "ops to everyone", "dev to the testers"]
