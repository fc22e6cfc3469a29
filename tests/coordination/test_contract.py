"""The coordination contract, run unchanged against the in-process backend and against the real Redis."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import anyio
import anyio.lowlevel
import pytest

from app.coordination import ClaimConflict, Coordination, Event, SessionKey
from app.coordination.cursors import now_ms
from app.errors import ValidationFailed
from tests.coordination.conftest import MakeBackend, eventually

pytestmark = pytest.mark.anyio


def other_key(key: SessionKey, *, user_id: str | None = None, session: str | None = None) -> SessionKey:
    return SessionKey(user_id=user_id or key.user_id, session=session or key.session)


async def wait_until_claims_gone(coord: Coordination, key: SessionKey) -> None:
    """Expiry happens on the store's clock (Redis server time), so poll for it, bounded."""

    async def gone() -> bool:
        return not await coord.claims(key)

    await eventually(gone)


async def next_millisecond() -> None:
    """Let the clock tick so that the next write gets a later millisecond than the last one."""
    start = now_ms()

    async def ticked() -> bool:
        return now_ms() > start

    await eventually(ticked, within=10)


# --- claims ---------------------------------------------------------------------------------------------------------


async def test_grant_lists_claims_with_expiry_and_token(coord: Coordination, key: SessionKey) -> None:
    before = datetime.now(UTC)
    result = await coord.claim(key, "alice", ["src/a.py", "src/b.py"], ttl_seconds=600)
    assert result.conflicts == []
    assert [c.path for c in result.granted] == ["src/a.py", "src/b.py"]
    for claim in result.granted:
        assert claim.agent == "alice" and claim.operation == "write" and claim.fencing_token >= 1
        assert claim.expires_at.tzinfo is not None
        assert before + timedelta(seconds=590) < claim.expires_at < before + timedelta(seconds=660)
    assert await coord.claims(key) == result.granted


async def test_conflict_names_holder_and_grants_nothing(coord: Coordination, key: SessionKey) -> None:
    held = (await coord.claim(key, "bob", ["b.py"], operation="read")).granted[0]
    result = await coord.claim(key, "alice", ["a.py", "b.py", "c.py"])
    assert result.granted == []
    assert result.conflicts == [ClaimConflict(path="b.py", holder="bob", operation="read", expires_at=held.expires_at)]
    # All or nothing: neither a.py nor c.py was taken.
    assert [c.path for c in await coord.claims(key)] == ["b.py"]
    later = await coord.claim(key, "alice", ["a.py", "c.py"])
    assert [c.path for c in later.granted] == ["a.py", "c.py"]


async def test_conflicts_list_every_file_held_by_others(coord: Coordination, key: SessionKey) -> None:
    await coord.claim(key, "bob", ["x.py"])
    await coord.claim(key, "carol", ["y.py"])
    result = await coord.claim(key, "alice", ["y.py", "free.py", "x.py"])
    assert [(c.path, c.holder) for c in result.conflicts] == [("y.py", "carol"), ("x.py", "bob")]
    assert result.granted == []


async def test_same_agent_reclaim_extends_with_larger_token(coord: Coordination, key: SessionKey) -> None:
    first = (await coord.claim(key, "alice", ["a.py"], ttl_seconds=60)).granted[0]
    second = (await coord.claim(key, "alice", ["a.py"], operation="refactor", ttl_seconds=3600)).granted[0]
    assert second.fencing_token > first.fencing_token
    assert second.expires_at > first.expires_at + timedelta(seconds=3000)
    assert await coord.claims(key) == [second]
    conflict = (await coord.claim(key, "bob", ["a.py"])).conflicts[0]
    assert conflict.expires_at == second.expires_at and conflict.operation == "refactor"


async def test_expiry_frees_the_file_and_tokens_keep_increasing(coord: Coordination, key: SessionKey) -> None:
    first = (await coord.claim(key, "alice", ["a.py"], ttl_ms=50)).granted[0]
    await wait_until_claims_gone(coord, key)
    second = await coord.claim(key, "bob", ["a.py"])
    assert second.conflicts == []
    assert second.granted[0].fencing_token > first.fencing_token
    # The expired holder cannot release what is now bob's.
    refused = await coord.release(key, "alice", ["a.py"])
    assert refused.released == [] and isinstance(refused.not_held[0], ClaimConflict)
    await coord.release(key, "bob", ["a.py"])
    third = (await coord.claim(key, "alice", ["a.py"])).granted[0]
    assert third.fencing_token > second.granted[0].fencing_token


async def test_release_by_holder(coord: Coordination, key: SessionKey) -> None:
    await coord.claim(key, "alice", ["a.py", "b.py"])
    result = await coord.release(key, "alice", ["a.py", "never.py"])
    assert result.released == ["a.py"]
    assert result.not_held == ["never.py"]
    assert [c.path for c in await coord.claims(key)] == ["b.py"]
    assert (await coord.claim(key, "bob", ["a.py"])).conflicts == []


async def test_release_by_non_holder_is_refused(coord: Coordination, key: SessionKey) -> None:
    held = (await coord.claim(key, "alice", ["a.py"])).granted[0]
    result = await coord.release(key, "bob", ["a.py"])
    assert result.released == []
    assert result.not_held == [ClaimConflict("a.py", "alice", "write", held.expires_at)]
    assert await coord.claims(key) == [held]


# --- change feed ----------------------------------------------------------------------------------------------------


async def test_broadcast_and_changes_in_order(coord: Coordination, key: SessionKey) -> None:
    written = [await coord.broadcast(key, f"agent{i % 2}", [f"f{i}.py"], f"change {i}") for i in range(5)]
    page = await coord.changes(key)
    assert page.changes == written
    assert page.cursor == written[-1].cursor
    assert [c.summary for c in page.changes] == [f"change {i}" for i in range(5)]
    assert page.changes[0].file_paths == ["f0.py"] and page.changes[1].agent == "agent1"
    assert all(c.at.tzinfo is not None for c in page.changes)
    empty = await coord.changes(key, since=page.cursor)
    assert empty.changes == [] and empty.cursor == page.cursor
    middle = await coord.changes(key, since=written[1].cursor, limit=2)
    assert middle.changes == written[2:4] and middle.cursor == written[3].cursor


async def test_empty_feed_returns_a_usable_cursor(coord: Coordination, key: SessionKey) -> None:
    page = await coord.changes(key)
    assert page.changes == []
    change = await coord.broadcast(key, "alice", [], "first")
    assert (await coord.changes(key, since=page.cursor)).changes == [change]


async def test_cursor_never_skips_or_repeats_under_interleaving(coord: Coordination, key: SessionKey) -> None:
    total = 150
    seen: list[str] = []
    written = 0

    async def write() -> None:
        nonlocal written
        for i in range(total):
            await coord.broadcast(key, "alice" if i % 3 else "bob", [], f"c{i}")
            written += 1
            if i % 7 == 0:
                await anyio.lowlevel.checkpoint()

    async def read() -> None:
        cursor: str | None = None
        while len(seen) < total:
            page = await coord.changes(key, since=cursor, limit=4)
            seen.extend(c.summary for c in page.changes)
            if cursor is not None and not page.changes:
                assert page.cursor == cursor
            cursor = page.cursor
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            tg.start_soon(read)
    assert seen == [f"c{i}" for i in range(total)]


async def test_exclude_agent_skips_own_changes_and_moves_the_cursor(coord: Coordination, key: SessionKey) -> None:
    for i, agent in enumerate(["me", "bob", "me", "me", "carol", "me"]):
        await coord.broadcast(key, agent, [], f"c{i}")
    page = await coord.changes(key, exclude_agent="me")
    assert [(c.agent, c.summary) for c in page.changes] == [("bob", "c1"), ("carol", "c4")]
    # The cursor covers the excluded tail too, so the caller does not read its own changes again and again.
    assert (await coord.changes(key, since=page.cursor)).changes == []
    collected: list[str] = []
    cursor = None
    for _ in range(5):
        one = await coord.changes(key, since=cursor, exclude_agent="me", limit=1)
        collected.extend(c.summary for c in one.changes)
        cursor = one.cursor
    assert collected == ["c1", "c4"]


async def test_since_time_starts_at_that_time(coord: Coordination, key: SessionKey) -> None:
    first = await coord.broadcast(key, "alice", [], "old")
    await next_millisecond()
    second = await coord.broadcast(key, "bob", [], "new")
    third = await coord.broadcast(key, "alice", [], "newer")
    assert second.at > first.at
    page = await coord.changes(key, since_time=second.at)
    assert page.changes == [second, third] and page.cursor == third.cursor
    assert (await coord.changes(key, since_time=first.at)).changes == [first, second, third]
    assert (await coord.changes(key, since_time=datetime.now(UTC) + timedelta(hours=1))).changes == []
    # The cursor handed back for a time picks up what comes next.
    mark = await coord.changes(key, since_time=datetime.now(UTC))
    later = await coord.broadcast(key, "carol", [], "latest")
    assert (await coord.changes(key, since=mark.cursor)).changes[-1] == later
    # A naive datetime is taken as UTC.
    naive = second.at.replace(tzinfo=None)
    assert (await coord.changes(key, since_time=naive)).changes[0] == second


@pytest.mark.parametrize("cursor", ["", "abc", "1-2-3", "-1-0", "12", "1.2.5-0", "a.5-0", "99999999999999999999999-0"])
async def test_invalid_cursor_is_a_validation_error(coord: Coordination, key: SessionKey, cursor: str) -> None:
    with pytest.raises(ValidationFailed, match="invalid cursor"):
        await coord.changes(key, since=cursor)


@pytest.mark.parametrize("cursor", ["9999999999999-0", "18446744073709551615-18446744073709551615"])
async def test_a_cursor_ahead_of_the_feed_is_refused_not_a_silent_skip(
    coord: Coordination, key: SessionKey, cursor: str
) -> None:
    with pytest.raises(ValidationFailed, match="ahead of the change feed"):
        await coord.changes(key, since=cursor)
    # A cursor the feed handed out, even the newest, is fine.
    change = await coord.broadcast(key, "alice", [], "now")
    assert (await coord.changes(key, since=change.cursor)).changes == []


async def test_since_and_since_time_together_are_refused(coord: Coordination, key: SessionKey) -> None:
    with pytest.raises(ValidationFailed, match="not both"):
        await coord.changes(key, since="0-0", since_time=datetime.now(UTC))


# --- presence -------------------------------------------------------------------------------------------------------


async def test_presence_lists_agents_most_recent_first(coord: Coordination, key: SessionKey) -> None:
    assert await coord.presence(key) == []
    await coord.touch(key, "alice")
    await next_millisecond()
    await coord.touch(key, "bob")
    seen = await coord.presence(key)
    assert [p.agent for p in seen] == ["bob", "alice"]
    assert seen[0].last_seen >= seen[1].last_seen
    assert abs(seen[0].last_seen - datetime.now(UTC)) < timedelta(seconds=60)
    await next_millisecond()
    await coord.touch(key, "alice")
    assert [p.agent for p in await coord.presence(key)] == ["alice", "bob"]


async def test_claiming_releasing_and_broadcasting_mark_the_agent_present(coord: Coordination, key: SessionKey) -> None:
    await coord.claim(key, "alice", ["a.py"])
    await coord.claim(key, "bob", ["a.py"])  # refused, but bob showed up
    await coord.release(key, "carol", ["b.py"])  # nothing to release, but carol showed up
    await coord.broadcast(key, "dave", [], "hello")
    assert {p.agent for p in await coord.presence(key)} == {"alice", "bob", "carol", "dave"}


async def test_presence_expires(make_backend: MakeBackend, key: SessionKey) -> None:
    coord = await make_backend(presence_ttl_seconds=0.05)
    await coord.touch(key, "alice")

    async def gone() -> bool:
        return not await coord.presence(key)

    await eventually(gone)


async def test_forget_drops_an_agent_until_it_acts_again(coord: Coordination, key: SessionKey) -> None:
    await coord.touch(key, "alice")
    await coord.claim(key, "bob", ["b.py"])
    await coord.forget(key, "alice")
    assert [p.agent for p in await coord.presence(key)] == ["bob"]
    await coord.forget(key, "nobody")  # forgetting an agent never seen is harmless
    await coord.forget(other_key(key, session="other"), "bob")  # another session's presence is its own
    assert [p.agent for p in await coord.presence(key)] == ["bob"]
    await coord.broadcast(key, "alice", [], "back")
    assert {p.agent for p in await coord.presence(key)} == {"alice", "bob"}
    with pytest.raises(ValidationFailed, match="agent"):
        await coord.forget(key, "")


# --- live events ----------------------------------------------------------------------------------------------------


async def test_published_events_reach_every_instance_subscribed_to_that_session_only(
    make_backend: MakeBackend, key: SessionKey
) -> None:
    first = await make_backend()
    # With Redis a second backend is a second server instance; in-process there is only one instance.
    second = await make_backend() if first.name == "redis" else first
    at = datetime.now(UTC)
    message = Event(kind="message", agent="alice", data={"id": 7, "content": "hi", "recipients": ["bob"]}, at=at)
    task = Event(kind="task", agent="bob", data={"action": "completed", "tasks": ["t1"], "unblocked": ["t2"]}, at=at)
    async with first.subscribe(key) as here, second.subscribe(key) as there:
        await second.publish(other_key(key, session="other"), task)  # another session: never seen here
        await second.publish(key, message)
        await first.publish(key, task)
        for events in (here, there):
            received = []
            with anyio.fail_after(30):
                async for event in events:
                    received.append(event)
                    if len(received) == 2:
                        break
            assert received == [message, task]
    with pytest.raises(ValidationFailed, match="session"):
        await first.publish(SessionKey("u", ""), task)


async def test_subscribe_gets_own_session_events_only(coord: Coordination, key: SessionKey) -> None:
    sibling = other_key(key, session="other")
    stranger = other_key(key, user_id=f"u-{uuid.uuid4().hex[:8]}")
    received: list[Event] = []
    async with coord.subscribe(key) as events:
        # Events of another session of this tenant, and of another tenant's session of the same name, come first:
        # had any leaked through, it would be received before ours.
        for other in (sibling, stranger):
            await coord.claim(other, "mallory", ["a.py"])
            await coord.release(other, "mallory", ["a.py"])
            await coord.broadcast(other, "mallory", ["a.py"], "elsewhere")
        held = (await coord.claim(key, "alice", ["a.py", "b.py"])).granted
        await coord.claim(key, "bob", ["a.py"])  # refused: publishes nothing
        await coord.release(key, "alice", ["a.py"])
        await coord.release(key, "bob", ["b.py"])  # not bob's: publishes nothing
        change = await coord.broadcast(key, "alice", ["a.py"], "did it")
        with anyio.fail_after(30):
            async for event in events:
                received.append(event)
                if len(received) == 3:
                    break
    assert [(e.kind, e.agent) for e in received] == [("claim", "alice"), ("release", "alice"), ("change", "alice")]
    claim, release, announced = received
    assert claim.data["paths"] == ["a.py", "b.py"]
    assert claim.data["operation"] == "write"
    assert claim.data["fencing_tokens"] == {c.path: c.fencing_token for c in held}
    assert datetime.fromisoformat(claim.data["expires_at"]) == held[0].expires_at
    assert release.data == {"paths": ["a.py"]}
    assert announced.data == {"cursor": change.cursor, "paths": ["a.py"], "summary": "did it"}
    assert all(e.at.tzinfo is not None for e in received)


# --- isolation ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (SessionKey("tenant-a", "s1"), SessionKey("tenant-a", "s2")),
        (SessionKey("tenant-a", "s1"), SessionKey("tenant-b", "s1")),
        # Separators inside names must not let two tenants' sessions meet.
        (SessionKey("a:b", "c"), SessionKey("a", "b:c")),
        (SessionKey("a}x", "{c"), SessionKey("a", "}x:{c")),
    ],
)
async def test_sessions_and_tenants_are_isolated(coord: Coordination, first: SessionKey, second: SessionKey) -> None:
    salt = uuid.uuid4().hex[:6]
    first = SessionKey(first.user_id + salt, first.session)
    second = SessionKey(second.user_id + salt, second.session)
    assert (await coord.claim(first, "alice", ["same.py"])).granted
    assert (await coord.claim(second, "bob", ["same.py"])).granted
    assert [c.agent for c in await coord.claims(first)] == ["alice"]
    assert [c.agent for c in await coord.claims(second)] == ["bob"]
    assert (await coord.release(second, "alice", ["same.py"])).released == []
    await coord.broadcast(first, "alice", [], "first only")
    assert [c.summary for c in (await coord.changes(first)).changes] == ["first only"]
    assert (await coord.changes(second)).changes == []
    await coord.touch(first, "zoe")
    assert {p.agent for p in await coord.presence(first)} == {"alice", "zoe"}
    assert {p.agent for p in await coord.presence(second)} == {"alice", "bob"}  # alice tried to release there


# --- validation -----------------------------------------------------------------------------------------------------


async def test_paths_are_normalised_and_deduplicated(coord: Coordination, key: SessionKey) -> None:
    result = await coord.claim(key, "alice", ["./src/a.py", "src//a.py", "src\\a.py", " src/x/../a.py ", "b.py"] * 30)
    assert [c.path for c in result.granted] == ["src/a.py", "b.py"]
    change = await coord.broadcast(key, "alice", ["./src/a.py", "src/a.py"], "  trimmed  ")
    assert change.file_paths == ["src/a.py"] and change.summary == "trimmed"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"paths": []}, "no paths"),
        ({"paths": "a.py"}, "not one string"),
        ({"paths": [""]}, "empty"),
        ({"paths": ["   "]}, "empty"),
        ({"paths": ["."]}, "does not name a file"),
        ({"paths": ["a" * 1025]}, "longer than 1024"),
        ({"paths": ["a\x00b"]}, "control characters"),
        ({"paths": [f"f{i}" for i in range(101)]}, "at most 100"),
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"ttl_seconds": 59}, "ttl_seconds"),
        ({"ttl_seconds": 86_401}, "ttl_seconds"),
        ({"ttl_ms": 0}, "ttl_ms"),
        ({"operation": ""}, "operation"),
        ({"operation": "x" * 33}, "operation"),
        ({"agent": ""}, "agent"),
        ({"agent": "a" * 65}, "agent"),
    ],
)
async def test_claim_validation(coord: Coordination, key: SessionKey, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"agent": "alice", "paths": ["a.py"], **kwargs}
    with pytest.raises(ValidationFailed, match=message):
        await coord.claim(key, **args)  # type: ignore[arg-type]
    assert await coord.claims(key) == []


async def test_other_validation(coord: Coordination, key: SessionKey) -> None:
    with pytest.raises(ValidationFailed, match="user_id"):
        await coord.claims(SessionKey("", "s"))
    with pytest.raises(ValidationFailed, match="session"):
        await coord.touch(SessionKey("u", "s" * 65), "alice")
    with pytest.raises(ValidationFailed, match="summary"):
        await coord.broadcast(key, "alice", [], "  ")
    with pytest.raises(ValidationFailed, match="limit"):
        await coord.changes(key, limit=0)
    with pytest.raises(ValidationFailed, match="limit"):
        await coord.changes(key, limit=1001)
    with pytest.raises(ValidationFailed, match="no paths"):
        await coord.release(key, "alice", [])
    with pytest.raises(ValidationFailed, match="agent"):
        await coord.touch(key, "")
    await coord.ping()


async def test_erase_user_drops_every_session_of_that_user_and_no_one_elses(
    coord: Coordination, key: SessionKey
) -> None:
    second = other_key(key, session="another")
    stranger = other_key(key, user_id=f"u_{uuid.uuid4().hex[:10]}")
    for k in (key, second, stranger):
        await coord.claim(k, "alice", ["a.py"])
        await coord.broadcast(k, "alice", ["a.py"], "edited")
    assert await coord.erase_user(key.user_id) > 0
    for k in (key, second):
        assert await coord.claims(k) == [] and await coord.presence(k) == []
        assert (await coord.changes(k)).changes == []
    assert [c.path for c in await coord.claims(stranger)] == ["a.py"]
    assert len((await coord.changes(stranger)).changes) == 1
