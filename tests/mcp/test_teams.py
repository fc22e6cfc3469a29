"""Teams through the official MCP client: the registry, messages pushed to their addressees, and the task graph."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.shared.subscriptions import ResourceUpdated

from tests.harness import RunningServer, make_account
from tests.mcp.conftest import connect, session_id
from tests.mcp.test_listen import MODERN, next_event
from tests.mcp.test_sessions import Inbox, agents, call
from tests.mcp.test_tools import error_text, structured


async def warm_up(sender: Any, *inboxes: Inbox) -> None:
    """GET streams open just after the handshake: broadcast until every listener has heard one."""
    with anyio.fail_after(10):
        while not all(inbox.events for inbox in inboxes):
            await call(sender, "session_broadcast_change", changes_summary="warm-up")
            with anyio.move_on_after(0.2):
                for inbox in inboxes:
                    await inbox.wait()
    await anyio.sleep(0.05)  # let the last warm-up pushes land before clearing
    for inbox in inboxes:
        inbox.events.clear()


async def next_of(inbox: Inbox, kind: str, within: float = 2.0) -> dict[str, Any]:
    """The next pushed event of ``kind``, skipping the others (stragglers from the warm-up, say)."""
    with anyio.fail_after(within):
        while True:
            _, event = await inbox.next(within=within)
            if event["kind"] == kind:
                return event


@pytest.mark.anyio
async def test_a_team_joins_talks_and_works_a_task_graph(either_backend: RunningServer) -> None:
    server = either_backend
    me = make_account(server)
    at_back, at_front = Inbox(), Inbox()
    async with (
        agents(server, me.key, me.user_id, "team", "arch") as (arch,),
        connect(server, me.key, session_id(me.user_id, "team", "back"), logging_callback=at_back) as back,
        connect(server, me.key, session_id(me.user_id, "team", "front"), logging_callback=at_front) as front,
    ):
        joined = structured(
            await back.call_tool(
                "session_join", {"role": "backend", "capabilities": ["python", "sql"], "client": "cursor"}
            )
        )
        assert (joined["role"], joined["client"], joined["joined"]) == ("backend", "cursor", True)
        await call(front, "session_join", role="frontend")
        await call(arch, "session_join", role="architect")
        await warm_up(arch, at_back, at_front)

        # A message reaches its addressee live and in its inbox; nobody else is pushed it.
        sent = await call(arch, "session_send_message", to="back", kind="question", content="Which ORM?")
        pushed = await next_of(at_back, "message")
        assert pushed["agent"] == "arch" and pushed["data"]["content"] == "Which ORM?"
        assert pushed["data"]["id"] == sent["id"] and pushed["data"]["from"] == "arch"
        to_role = await call(
            arch,
            "session_send_message",
            to="role:frontend",
            kind="contract",
            content="GET /users returns {id, name}",
            attachments=[{"file": "api/users.yaml", "content": "openapi: 3.1"}],
        )
        assert (await next_of(at_front, "message"))["data"]["id"] == to_role["id"]
        await call(arch, "session_send_message", to="*", kind="status", content="standup")
        assert (await next_of(at_back, "message"))["data"]["content"] == "standup"
        assert (await next_of(at_front, "message"))["data"]["content"] == "standup"
        inbox = await call(back, "session_inbox")
        assert [m["content"] for m in inbox["messages"]] == ["Which ORM?", "standup"]
        assert inbox["messages"][0]["from"] == "arch" and inbox["messages"][0]["kind"] == "question"
        assert (await call(back, "session_inbox"))["messages"] == []
        answer = await call(
            back, "session_send_message", to="arch", kind="answer", content="SQLAlchemy 2", reply_to=sent["id"]
        )
        assert answer["reply_to"] == sent["id"]

        # Tasks: creating, claiming and completing are pushed to the others; completion unblocks at once.
        created = await call(
            arch,
            "session_task_create",
            tasks=[
                {"id": "schema", "description": "tables", "files": ["db/schema.sql"]},
                {"id": "api", "description": "endpoints", "deps": ["schema"]},
            ],
        )
        assert [t["status"] for t in created["tasks"]] == ["available", "blocked"]
        for inbox in (at_back, at_front):
            assert (await next_of(inbox, "task"))["data"] == {"action": "created", "tasks": ["schema", "api"]}
        blocked = await back.call_tool("session_task_claim", {"task_id": "api"})
        assert "task 'api' is blocked: it waits for schema (not started)" in error_text(blocked)
        await call(back, "session_task_claim", task_id="schema")
        claimed = await next_of(at_front, "task")
        assert claimed["agent"] == "back" and claimed["data"]["action"] == "claimed"
        done = await call(
            back, "session_task_complete", task_id="schema", result="2 tables", files_modified=["db/s.sql"]
        )
        assert done["unblocked"] == ["api"]
        completed = await next_of(at_front, "task")
        assert completed["data"]["action"] == "completed" and completed["data"]["unblocked"] == ["api"]
        assert (await call(front, "session_task_list", status="available"))["tasks"][0]["id"] == "api"
        await call(front, "session_task_claim", task_id="api")
        released = await call(front, "session_task_release", task_id="api")
        assert released["status"] == "available"

        status = await call(arch, "session_status")
        by_name = {a["agent"]: a for a in status["agents"]}
        assert by_name["back"]["role"] == "backend" and by_name["back"]["capabilities"] == ["python", "sql"]
        assert by_name["back"]["state"] == "active" and by_name["front"]["role"] == "frontend"

        left = await call(back, "session_leave")
        assert left["agent"] == "back"
        assert "back" not in {a["agent"] for a in (await call(arch, "session_status"))["agents"]}


@pytest.mark.anyio
async def test_team_tools_refuse_bad_input_precisely(api: RunningServer) -> None:
    me = make_account(api)
    async with agents(api, me.key, me.user_id, "strict", "a", "b") as (a, b):
        await call(b, "session_inbox")
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("session_join", {}, "role"),
            ("session_join", {"role": "two words"}, "role"),
            ("session_send_message", {"to": "b", "kind": "rumour", "content": "x"}, "kind"),
            ("session_send_message", {"to": "nobody", "kind": "status", "content": "x"}, "agents: b"),
            ("session_send_message", {"to": "role:qa", "kind": "status", "content": "x"}, "roles: none yet"),
            (
                "session_send_message",
                {"to": "b", "kind": "diff", "content": "x", "attachments": [{"file": "a"}]},
                "one",
            ),
            ("session_inbox", {"limit": 0}, "limit"),
            ("session_inbox", {"since": 3}, "since"),
            ("session_task_create", {"tasks": []}, "tasks"),
            ("session_task_create", {"tasks": [{"id": "x", "description": "d", "deps": ["y"]}]}, "'y', which does not"),
            ("session_task_claim", {"task_id": "nope"}, "no task 'nope' in this session"),
            ("session_task_claim", {}, "task_id"),
            ("session_task_complete", {"task_id": "nope", "result": "r"}, "no task 'nope'"),
            ("session_task_complete", {"task_id": "nope"}, "result"),
            ("session_task_release", {"task_id": "nope"}, "no task 'nope'"),
            ("session_task_list", {"status": "finished"}, "status"),
        ]
        for tool, arguments, fragment in cases:
            result = await a.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            assert fragment in error_text(result), (tool, arguments, error_text(result))
        assert (await call(b, "session_inbox"))["messages"] == []
        assert (await call(a, "session_task_list"))["tasks"] == []

    async with connect(api, me.key, me.user_id) as plain:
        for tool in ("session_join", "session_inbox", "session_task_list", "session_send_message"):
            assert "only in session mode" in error_text(await plain.call_tool(tool, {}))


@pytest.mark.anyio
async def test_listen_notifies_the_inbox_of_the_addressee_only(either_backend: RunningServer) -> None:
    server = either_backend
    me = make_account(server)
    inbox_b, tasks_b = "engram://sessions/hear/inbox", "engram://sessions/hear/tasks"
    async with (
        connect(server, me.key, session_id(me.user_id, "hear", "a"), mode=MODERN) as a,
        connect(server, me.key, session_id(me.user_id, "hear", "b"), mode=MODERN) as b,
        connect(server, me.key, session_id(me.user_id, "hear", "c"), mode=MODERN) as c,
        b.listen(resource_subscriptions=[inbox_b, tasks_b, "engram://sessions/other/inbox"]) as feed,
    ):
        assert sorted(feed.honored.resource_subscriptions or []) == [inbox_b, tasks_b]
        await call(c, "session_inbox")
        await call(a, "session_send_message", to="c", kind="status", content="for c only")
        await call(a, "session_send_message", to="b", kind="question", content="for b")
        assert await next_event(feed) == ResourceUpdated(uri=inbox_b)
        read = await b.read_resource(inbox_b)
        assert "for b" in read.contents[0].text and "for c only" not in read.contents[0].text  # type: ignore[union-attr]
        assert [m["content"] for m in (await call(b, "session_inbox"))["messages"]] == ["for b"]
        await call(a, "session_task_create", tasks=[{"id": "t", "description": "x"}])
        assert await next_event(feed) == ResourceUpdated(uri=tasks_b)


@pytest.mark.anyio
async def test_any_call_on_a_session_url_shows_the_agent(either_backend: RunningServer) -> None:
    server = either_backend
    me = make_account(server)
    http = server.client(me.key)
    async with connect(server, me.key, session_id(me.user_id, "seen", "searcher")) as searcher:
        await call(searcher, "search_memory", query="anything")
        async with connect(server, me.key, session_id(me.user_id, "seen", "lister")):
            pass  # connecting is a call too
        agents_now = http.get("/v1/sessions/seen/status").json()["agents"]
        assert {a["agent"] for a in agents_now} == {"searcher", "lister"}
        assert all(a["joined"] is False and a["role"] is None for a in agents_now)


@pytest.mark.anyio
async def test_messages_and_tasks_keep_working_while_redis_is_down(redis_down_api: RunningServer) -> None:
    server = redis_down_api
    me = make_account(server)
    async with agents(server, me.key, me.user_id, "down", "a", "b") as (a, b):
        await call(b, "session_join", role="backend")
        await call(a, "session_send_message", to="role:backend", kind="status", content="Redis is down")
        assert [m["content"] for m in (await call(b, "session_inbox"))["messages"]] == ["Redis is down"]
        await call(a, "session_task_create", tasks=[{"id": "t", "description": "x"}])
        assert (await call(b, "session_task_claim", task_id="t"))["assignee"] == "b"
        assert (await call(b, "session_task_complete", task_id="t", result="ok"))["task"]["status"] == "completed"
        claim = await a.call_tool("session_claim_files", {"file_paths": ["x.py"]})
        assert "coordination unavailable" in error_text(claim)


@pytest.mark.anyio
async def test_an_agent_that_left_stays_gone_when_its_client_closes(either_backend: RunningServer) -> None:
    """Closing the client (its DELETE, its GET stream) is no sign of life; calling a tool again is."""
    server = either_backend
    me = make_account(server)

    def listed() -> set[str]:
        with server.client(me.key) as http:
            return {agent["agent"] for agent in http.get("/v1/sessions/gone/agents").json()["agents"]}

    async with connect(server, me.key, session_id(me.user_id, "gone", "quitter")) as quitter:
        await call(quitter, "session_join", role="backend")
        await call(quitter, "session_leave")
        assert "quitter" not in listed()
    assert "quitter" not in listed()
    async with connect(server, me.key, session_id(me.user_id, "gone", "quitter")):
        assert "quitter" not in listed()  # connecting again is not calling a tool
    async with connect(server, me.key, session_id(me.user_id, "gone", "quitter")) as back:
        await call(back, "session_task_list")
        assert "quitter" in listed()
