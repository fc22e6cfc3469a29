"""Session mode through the official MCP client: agents coordinating, isolation, and live push."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.types import LoggingMessageNotificationParams

from tests.harness import RunningServer, add_key, make_account, revoke_key
from tests.mcp.conftest import connect, session_id
from tests.mcp.test_tools import structured


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    return structured(await client.call_tool(tool, arguments))


@asynccontextmanager
async def agents(
    server: RunningServer, key: str, user_id: str, session: str, *names: str
) -> AsyncIterator[list[Client]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(connect(server, key, session_id(user_id, session, n))) for n in names]


@pytest.mark.anyio
async def test_three_agents_claim_release_broadcast_sync_and_status(api: RunningServer) -> None:
    me = make_account(api)
    async with agents(api, me.key, me.user_id, "webscraper", "research", "coder", "tester") as (a, b, c):
        first = await call(a, "session_claim_files", file_paths=["src/a.py", "src/b.py"], duration_minutes=10)
        assert first["granted"] is True
        tokens = {claim["file_path"]: claim["fencing_token"] for claim in first["claims"]}

        clash = await call(b, "session_claim_files", file_paths=["src/c.py", "src/b.py"])
        assert clash["granted"] is False and clash["claims"] == []
        assert [(x["file_path"], x["holder"]) for x in clash["conflicts"]] == [("src/b.py", "research")]
        assert clash["conflicts"][0]["expires_at"] == first["claims"][1]["expires_at"]

        # All or none: the free file of the refused claim was not taken either.
        assert (await call(c, "session_claim_files", file_paths=["src/c.py"]))["granted"] is True
        assert (await call(c, "session_release_files", file_paths=["src/c.py"]))["released"] == ["src/c.py"]

        refused = await call(b, "session_release_files", file_paths=["src/a.py"])
        assert refused["released"] == [] and refused["not_released"][0]["holder"] == "research"
        assert (await call(a, "session_release_files", file_paths=["src/b.py"]))["released"] == ["src/b.py"]
        retry = await call(b, "session_claim_files", file_paths=["src/b.py"])
        assert retry["granted"] is True and retry["claims"][0]["fencing_token"] > tokens["src/b.py"]

        extended = await call(a, "session_claim_files", file_paths=["src/a.py"], duration_minutes=60)
        assert extended["granted"] is True and extended["claims"][0]["expires_at"] > first["claims"][0]["expires_at"]

        summaries = []
        for agent, name in [(a, "research"), (c, "tester"), (a, "research"), (c, "tester")]:
            summary = f"{name} change {len(summaries)}"
            summaries.append(summary)
            await call(agent, "session_broadcast_change", file_paths=["src/a.py"], changes_summary=summary)
        synced = await call(b, "session_sync_changes")
        assert [x["changes_summary"] for x in synced["changes"]] == summaries
        assert [x["agent"] for x in synced["changes"]] == ["research", "tester", "research", "tester"]

        later = []
        for i in range(3):
            later.append(f"later {i}")
            await call(a, "session_broadcast_change", changes_summary=later[-1])
        cursor = synced["cursor"]
        seen: list[str] = []
        # From a cursor nothing is skipped or repeated, whatever the page boundaries.
        for _ in range(2):
            page = await call(b, "session_sync_changes", since=cursor)
            seen += [x["changes_summary"] for x in page["changes"]]
            cursor = page["cursor"]
        assert seen == later
        assert (await call(b, "session_sync_changes", since=cursor))["changes"] == []

        own_excluded = await call(c, "session_sync_changes")
        assert {x["agent"] for x in own_excluded["changes"]} == {"research"}
        with_own = await call(c, "session_sync_changes", include_own=True)
        assert len(with_own["changes"]) == len(summaries) + len(later)

        status = await call(b, "session_status")
        assert status["session"] == "webscraper" and status["you"] == "coder"
        assert {x["agent"] for x in status["agents"]} == {"research", "coder", "tester"}
        assert all(x["last_seen"] for x in status["agents"])
        assert {(x["file_path"], x["agent"]) for x in status["claims"]} == {
            ("src/a.py", "research"),
            ("src/b.py", "coder"),
        }
        assert status["recent_changes"][-1]["changes_summary"] == "later 2"


@pytest.mark.anyio
async def test_sessions_and_tenants_are_isolated(api: RunningServer) -> None:
    me, other = make_account(api), make_account(api)
    async with (
        agents(api, me.key, me.user_id, "web", "a", "b") as (web_a, web_b),
        agents(api, me.key, me.user_id, "docs", "a") as (docs_a,),
        agents(api, other.key, other.user_id, "web", "a") as (tenant_a,),
    ):
        assert (await call(web_a, "session_claim_files", file_paths=["README.md"]))["granted"] is True
        await call(web_a, "session_broadcast_change", changes_summary="web only")
        await call(
            web_a,
            "add_memories",
            memories=[
                {"content": "The web session scrapes example.org"},
                {"content": "Our team writes Python 3.11", "scope": "user"},
                {"content": "Agent a's private scratch note", "scope": "agent"},
            ],
        )

        for outsider in (docs_a, tenant_a):
            assert (await call(outsider, "session_claim_files", file_paths=["README.md"]))["granted"] is True
            assert (await call(outsider, "session_sync_changes", minutes=60))["changes"] == []
            status = await call(outsider, "session_status")
            assert [x["agent"] for x in status["agents"]] == ["a"]
            assert [x["agent"] for x in status["claims"]] == ["a"] and status["recent_changes"] == []

        assert [x["changes_summary"] for x in (await call(web_b, "session_sync_changes"))["changes"]] == ["web only"]
        web_b_sees = {m["content"] for m in (await call(web_b, "list_memories"))["memories"]}
        assert web_b_sees == {"The web session scrapes example.org", "Our team writes Python 3.11"}
        docs_sees = {m["content"] for m in (await call(docs_a, "list_memories"))["memories"]}
        assert docs_sees == {"Our team writes Python 3.11"}
        docs_search = await call(docs_a, "search_memory", query="which site does the scraper target")
        assert "The web session scrapes example.org" not in {m["content"] for m in docs_search["results"]}
        assert (await call(tenant_a, "list_memories"))["memories"] == []
        assert (await call(tenant_a, "search_memory", query="Python"))["results"] == []


class Inbox:
    """What a client's logging_callback received, with arrival times."""

    def __init__(self) -> None:
        self.events: list[tuple[float, dict[str, Any]]] = []
        self._arrived = anyio.Event()

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        if params.logger == "engram.session" and isinstance(params.data, dict):
            self.events.append((time.perf_counter(), params.data))
            self._arrived.set()

    async def wait(self) -> None:
        while not self.events:
            await self._arrived.wait()
            self._arrived = anyio.Event()

    async def next(self, within: float = 30.0) -> tuple[float, dict[str, Any]]:
        with anyio.fail_after(within):
            await self.wait()
        return self.events.pop(0)


@pytest.mark.anyio
async def test_live_push_reaches_the_other_agents_in_order(either_backend: RunningServer) -> None:
    server = either_backend
    me = make_account(server)
    inbox_b, inbox_c = Inbox(), Inbox()
    url_b, url_c = session_id(me.user_id, "live", "b"), session_id(me.user_id, "live", "c")
    async with (
        agents(server, me.key, me.user_id, "live", "a") as (a,),
        connect(server, me.key, url_b, logging_callback=inbox_b) as b,
        connect(server, me.key, url_c, logging_callback=inbox_c),
    ):
        # The GET streams open just after the handshake; announce until both are seen to be listening.
        with anyio.fail_after(60):
            while not (inbox_b.events and inbox_c.events):
                await call(a, "session_broadcast_change", changes_summary="warm-up")
                with anyio.move_on_after(0.2):
                    await inbox_b.wait()
                    await inbox_c.wait()
        # A warm-up may still be on its way: pushes keep their order, so once a last marker has arrived at both,
        # nothing sent before it can arrive later and pass for the first measured change.
        await call(a, "session_broadcast_change", changes_summary="warmed up")
        for inbox in (inbox_b, inbox_c):
            while (await inbox.next())[1]["data"].get("summary") != "warmed up":
                pass

        # How fast a push arrives is measured by bench/coordination.py; here only that each one does, in order.
        for i in range(20):
            await call(a, "session_broadcast_change", file_paths=["x.py"], changes_summary=f"change {i}")
            _, event = await inbox_b.next()
            _, seen_by_c = await inbox_c.next()
            assert event["kind"] == "change" and event["agent"] == "a" and event["data"]["summary"] == f"change {i}"
            assert event["session"] == "live" and seen_by_c == event

        # Claims and releases are pushed too, and nobody hears their own events.
        await call(b, "session_claim_files", file_paths=["x.py"])
        await call(a, "session_claim_files", file_paths=["y.py"])
        claim = (await inbox_b.next())[1]
        assert (claim["kind"], claim["agent"], claim["data"]["paths"]) == ("claim", "a", ["y.py"])
        await call(a, "session_release_files", file_paths=["y.py"])
        release = (await inbox_b.next())[1]
        assert (release["kind"], release["agent"]) == ("release", "a")
        kinds_at_c = [(await inbox_c.next())[1]["kind"] for _ in range(3)]
        assert kinds_at_c == ["claim", "claim", "release"]


@pytest.mark.anyio
async def test_live_push_stops_once_the_listening_key_is_revoked(api: RunningServer) -> None:
    me = make_account(api)
    listener = add_key(api, me.user_id)
    inbox = Inbox()
    async with (
        agents(api, me.key, me.user_id, "revoked", "a") as (a,),
        connect(api, listener.key, session_id(me.user_id, "revoked", "b"), logging_callback=inbox),
    ):
        with anyio.fail_after(60):
            while not inbox.events:
                await call(a, "session_broadcast_change", changes_summary="warm-up")
                with anyio.move_on_after(0.2):
                    await inbox.wait()
        inbox.events.clear()

        await anyio.to_thread.run_sync(lambda: revoke_key(api, listener.key_id))
        await anyio.sleep(api.settings.stream_recheck_seconds)
        await call(a, "session_broadcast_change", changes_summary="after the revocation")
        await anyio.sleep(1.0)  # a push arrives within milliseconds (bench/coordination.py); none may come now
        assert inbox.events == []
