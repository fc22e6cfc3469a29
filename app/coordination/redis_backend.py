"""Coordination in Redis, shared by every server instance.

Key layout (``{tag}`` is ``{user_id:session}``, percent-encoded, so one session's keys share a cluster slot):
``claim:PATH`` hash per held file (expires with the claim), ``claims`` zset index of held paths,
``fences`` hash of per-file fencing counters, ``feed`` stream of changes, ``presence`` zset agent -> last-seen ms,
``request:ID`` the result of one write call, kept briefly so that a retried call is not applied twice, ``life`` the
number of the session's current life (see cursors: begun from the database whenever the session's state is found
empty, so fencing tokens never go backwards and an old cursor is answered with ``reset``), and the pub/sub channel
``events``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from typing import Any, cast
from urllib.parse import quote

from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from app.coordination import redis_scripts, rules
from app.coordination.cursors import (
    START,
    cursor_before,
    datetime_to_ms,
    ms_to_datetime,
    now_ms,
    parse_resume_cursor,
    stream_id,
    with_life,
)
from app.coordination.errors import CoordinationUnavailable
from app.coordination.events import change_event, claim_event, decode_event, encode_event, release_event
from app.coordination.lives import CountingLives, Lives
from app.coordination.models import (
    Change,
    ChangePage,
    Claim,
    ClaimConflict,
    ClaimResult,
    Event,
    Presence,
    ReleaseResult,
    SessionKey,
)
from app.errors import ValidationFailed
from app.redis_breaker import UNAVAILABLE, BreakerOpen, RedisBreaker

logger = logging.getLogger(__name__)

_UNAVAILABLE = UNAVAILABLE
# How often a live subscription looks whether the breaker opened meanwhile (a hung Redis sends nothing at all).
_LISTEN_TICK_SECONDS = 0.5
# A subscription quiet this long pings on its own connection: one that silently stopped carrying anything (Redis
# restarted behind a NAT, a failover, a partition that dropped it) hears no error, while the breaker's own connection
# may well be fine again.
_LIVENESS_SECONDS = 5.0
_LIVENESS_PING = "engram-liveness"


class RedisCoordination:
    """Coordination shared through one Redis server."""

    name: str = "redis"

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "engram:coord:",
        presence_ttl_seconds: float = rules.DEFAULT_PRESENCE_TTL_SECONDS,
        retention_seconds: int = rules.DEFAULT_RETENTION_SECONDS,
        max_connections: int = 64,
        max_subscribers: int = 1000,
        connect_timeout: float = 2.0,
        command_timeout: float = 2.0,
        breaker: RedisBreaker | None = None,
        lives: Lives | None = None,
    ) -> None:
        if "{" in prefix or "}" in prefix:
            raise ValueError("prefix must not contain braces: they would change the cluster hash tag")
        self._prefix = prefix
        # Every call, its retries included, ends within the command timeout; the breaker remembers a hang.
        self._budget = command_timeout
        self._own_breaker = breaker is None
        self._breaker = breaker or RedisBreaker(url)
        self._presence_ttl_ms = int(presence_ttl_seconds * 1000)
        self._retention_ms = retention_seconds * 1000
        self._lives = lives or CountingLives()

        def options() -> dict[str, Any]:
            return {
                "decode_responses": True,
                "socket_connect_timeout": connect_timeout,
                "socket_timeout": command_timeout,
                "health_check_interval": 15,
                # Few quick retries: enough to replace a connection the server dropped, few enough to fail fast.
                "retry": Retry(ExponentialWithJitterBackoff(base=0.02, cap=0.25), retries=2),
            }

        # Callers wait up to the command timeout for a free connection instead of failing at once under load.
        pool = BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=command_timeout, **options()
        )
        self._client = Redis.from_pool(pool)
        # Each subscriber holds a connection for as long as it listens; keep them out of the command pool.
        self._pubsub_client = Redis.from_pool(
            ConnectionPool.from_url(url, max_connections=max_subscribers, **options())
        )
        self._claim_script = self._client.register_script(redis_scripts.CLAIM)
        self._release_script = self._client.register_script(redis_scripts.RELEASE)
        self._broadcast_script = self._client.register_script(redis_scripts.BROADCAST)
        self._touch_script = self._client.register_script(redis_scripts.TOUCH)
        self._begin_life_script = self._client.register_script(redis_scripts.BEGIN_LIFE)

    def _key(self, key: SessionKey, suffix: str) -> str:
        rules.check_key(key)
        tag = f"{quote(key.user_id, safe='')}:{quote(key.session, safe='')}"
        return f"{self._prefix}{{{tag}}}:{suffix}"

    @asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        """Within the budget, or CoordinationUnavailable; at once while the breaker is open. Bugs pass through."""
        if self._own_breaker:
            self._breaker.start()
        try:
            async with self._breaker.guard(self._budget):
                yield
        except BreakerOpen as exc:
            raise CoordinationUnavailable(str(exc)) from exc
        except _UNAVAILABLE as exc:
            # Callers see the kind of failure; the address and details stay in the chained exception for the logs.
            raise CoordinationUnavailable(f"redis did not answer ({type(exc).__name__})") from exc

    async def _life(self, key: SessionKey) -> int:
        """The session's life, begun now if it has none: a cursor handed out must name the life later writes use."""
        async with self._guard():
            life = await self._client.get(self._key(key, "life"))
        if life is None:
            await self._begin_life(key)
            async with self._guard():
                life = await self._client.get(self._key(key, "life"))
        return int(life or 0)

    async def _begin_life(self, key: SessionKey) -> None:
        """The session's state in Redis is new or was lost: begin a life numbered by the database."""
        life = await self._lives.next_life(key)
        async with self._guard():
            await self._begin_life_script(keys=[self._key(key, "life")], args=[life, self._retention_ms])
        logger.info("coordination: session %s/%s begins life %d", key.user_id, key.session, life)

    def _request_key(self, key: SessionKey) -> str:
        # Unique per call, reused by the client's retries of it: see redis_scripts.
        return self._key(key, f"request:{uuid.uuid4().hex}")

    async def _publish(self, key: SessionKey, event: Event) -> None:
        # Best effort: the claim or change is already stored, and failing the call now would hide that from the caller.
        try:
            async with self._guard():
                await self._client.publish(self._key(key, "events"), encode_event(event))
        except CoordinationUnavailable:
            logger.warning("coordination: could not publish a %s event", event.kind, exc_info=True)

    async def claim(
        self,
        key: SessionKey,
        agent: str,
        paths: Sequence[str],
        operation: str = "write",
        ttl_seconds: int = 1800,
        *,
        ttl_ms: int | None = None,
    ) -> ClaimResult:
        """Claim every path or none, atomically."""
        rules.check_agent(agent)
        wanted = rules.normalise_paths(paths)
        operation = rules.check_operation(operation)
        ttl = rules.ttl_millis(ttl_seconds, ttl_ms)
        args: list[str | int] = [agent, operation, ttl, self._retention_ms, self._presence_ttl_ms, *wanted]
        async with self._guard():
            result = await self._claim_script(keys=self._claim_keys(key, wanted), args=args)
        if result[0] == -1:
            await self._begin_life(key)
            async with self._guard():
                result = await self._claim_script(keys=self._claim_keys(key, wanted), args=args)
        if result[0] == 0:
            conflicts = [
                ClaimConflict(path, holder, op, ms_to_datetime(int(expires)))
                for path, holder, op, expires in result[2:]
            ]
            return ClaimResult(granted=[], conflicts=conflicts)
        now, expires_at = int(result[1]), ms_to_datetime(int(result[2]))
        granted = [
            Claim(path, agent, operation, int(token), expires_at)
            for path, token in zip(wanted, result[3:], strict=True)
        ]
        await self._publish(key, claim_event(agent, granted, ms_to_datetime(now)))
        return ClaimResult(granted=granted, conflicts=[])

    def _claim_keys(self, key: SessionKey, wanted: list[str]) -> list[str]:
        return [
            self._key(key, "claims"),
            self._key(key, "fences"),
            self._key(key, "presence"),
            self._key(key, "life"),
            *(self._key(key, f"claim:{p}") for p in wanted),
            self._request_key(key),
        ]

    async def release(self, key: SessionKey, agent: str, paths: Sequence[str]) -> ReleaseResult:
        """Release what ``agent`` holds among ``paths``, atomically."""
        rules.check_agent(agent)
        wanted = rules.normalise_paths(paths)
        keys = [
            self._key(key, "claims"),
            self._key(key, "presence"),
            *(self._key(key, f"claim:{p}") for p in wanted),
            self._request_key(key),
        ]
        released: list[str] = []
        not_held: list[ClaimConflict | str] = []
        async with self._guard():
            result = await self._release_script(keys=keys, args=[agent, self._presence_ttl_ms, *wanted])
            for path, entry in zip(wanted, result[1:], strict=True):
                if entry[0] == 1:
                    released.append(path)
                elif entry[0] == 0:
                    not_held.append(path)
                else:
                    not_held.append(ClaimConflict(path, entry[1], entry[2], ms_to_datetime(int(entry[3]))))
            if released:
                await self._publish(key, release_event(agent, released, ms_to_datetime(int(result[0]))))
        return ReleaseResult(released=released, not_held=not_held)

    async def claims(self, key: SessionKey) -> list[Claim]:
        """The unexpired claims, by path."""
        index = self._key(key, "claims")
        async with self._guard():
            paths = cast(list[str], await self._client.zrange(index, 0, -1))
            if not paths:
                return []
            paths.sort()
            pipe = self._client.pipeline(transaction=False)
            for path in paths:
                pipe.hmget(self._key(key, f"claim:{path}"), ["agent", "op", "token", "exp"])
            rows = await pipe.execute()
        # A claim hash outlives nothing: if it is gone, the claim expired or was released since the index was read.
        return [
            Claim(path, agent, op, int(token), ms_to_datetime(int(expires)))
            for path, (agent, op, token, expires) in zip(paths, rows, strict=True)
            if agent is not None
        ]

    async def broadcast(self, key: SessionKey, agent: str, paths: Sequence[str], summary: str) -> Change:
        """Append a change to the session's stream and announce it."""
        rules.check_agent(agent)
        files = rules.normalise_paths(paths, allow_empty=True)
        summary = rules.check_summary(summary)
        fields = {"agent": agent, "paths": json.dumps(files), "summary": summary}
        args: list[str | int] = [
            agent,
            fields["paths"],
            summary,
            self._presence_ttl_ms,
            rules.FEED_MAX_ENTRIES,
            self._retention_ms,
        ]

        def keys() -> list[str]:
            return [self._key(key, "feed"), self._key(key, "presence"), self._key(key, "life"), self._request_key(key)]

        async with self._guard():
            result = await self._broadcast_script(keys=keys(), args=args)
        if result[0] == -1:
            await self._begin_life(key)
            async with self._guard():
                result = await self._broadcast_script(keys=keys(), args=args)
        change = _change(int(result[0]), result[1], fields)
        await self._publish(key, change_event(change))
        return change

    async def changes(
        self,
        key: SessionKey,
        *,
        since: str | None = None,
        since_time: datetime | None = None,
        exclude_agent: str | None = None,
        limit: int = 100,
    ) -> ChangePage:
        """Changes after ``since`` (exclusive) or at/after ``since_time``, oldest first."""
        rules.check_limit(limit)
        if since is not None and since_time is not None:
            raise ValidationFailed("pass since or since_time, not both")
        if exclude_agent is not None:
            rules.check_agent(exclude_agent, "exclude_agent")
        feed = self._key(key, "feed")
        life = await self._life(key)
        reset = False
        if since is not None:
            position = parse_resume_cursor(since)
            # A cursor of another life points into a feed that is gone: read this life's from its start, and say so.
            reset = position[0] != life
            start = "-" if reset else f"({stream_id(position)}"
            cursor = with_life(life, START) if reset else since
        elif since_time is not None:
            cursor = with_life(life, cursor_before(datetime_to_ms(since_time)))
            start = f"({cursor_before(datetime_to_ms(since_time))}"
        else:
            cursor, start = with_life(life, START), "-"
        picked: list[Change] = []
        async with self._guard():
            while len(picked) < limit:
                entries = cast(
                    list[tuple[str, dict[str, str]]], await self._client.xrange(feed, min=start, max="+", count=limit)
                )
                for entry_id, fields in entries:
                    cursor = with_life(life, entry_id)
                    if fields.get("agent") != exclude_agent:
                        picked.append(_change(life, entry_id, fields))
                        if len(picked) == limit:
                            break
                if len(entries) < limit:
                    break
                start = f"({entry_id}"
        return ChangePage(changes=picked, cursor=cursor, reset=reset)

    async def touch(self, key: SessionKey, agent: str) -> None:
        """Record ``agent`` as present now."""
        rules.check_agent(agent)
        async with self._guard():
            # The same Lua as claim, release and broadcast use, on the same (Redis's) clock.
            await self._touch_script(keys=[self._key(key, "presence")], args=[agent, self._presence_ttl_ms])

    async def presence(self, key: SessionKey) -> list[Presence]:
        """Agents seen within the presence TTL, most recent first."""
        presence = self._key(key, "presence")
        cutoff = now_ms() - self._presence_ttl_ms
        async with self._guard():
            rows = cast(
                list[tuple[str, float]],
                await self._client.zrevrangebyscore(presence, "+inf", f"({cutoff}", withscores=True),
            )
        return [Presence(agent, ms_to_datetime(int(ms))) for agent, ms in rows]

    async def forget(self, key: SessionKey, agent: str) -> None:
        """Drop ``agent`` from presence."""
        rules.check_agent(agent)
        async with self._guard():
            await self._client.zrem(self._key(key, "presence"), agent)

    async def publish(self, key: SessionKey, event: Event) -> None:
        """Announce ``event`` on the session's channel; a Redis that cannot take it is logged, not raised."""
        await self._publish(key, event)

    @asynccontextmanager
    async def subscribe(self, key: SessionKey) -> AsyncIterator[AsyncIterator[Event]]:
        """Live events of the session while the context is open; a lost connection raises CoordinationUnavailable."""
        channel = self._key(key, "events")
        outages = self._breaker.outages
        pubsub = self._pubsub_client.pubsub()
        try:
            async with self._guard():
                await pubsub.subscribe(channel)
                # Wait for the confirmation so that nothing published after entering can be missed.
                async with asyncio.timeout(5):
                    while (message := await pubsub.get_message(timeout=1.0)) is None or message["type"] != "subscribe":
                        pass
            yield self._listen(pubsub, outages)
        finally:
            with suppress(*_UNAVAILABLE):
                await pubsub.aclose()

    async def erase_user(self, user_id: str) -> int:
        """Delete every key of ``user_id``'s sessions (claims, fences, presence, feeds, lives); the number deleted."""
        # quote() leaves no glob character in the user part ('*', '?', '[' become %XX).
        pattern = f"{self._prefix}{{{quote(user_id, safe='')}:*"
        deleted = 0
        async with self._guard():
            batch: list[str] = []
            async for name in self._client.scan_iter(match=pattern, count=500):
                batch.append(name)
                if len(batch) >= 500:
                    deleted += await self._client.unlink(*batch)
                    batch = []
            if batch:
                deleted += await self._client.unlink(*batch)
        return deleted

    async def ping(self) -> None:
        """Raise ``CoordinationUnavailable`` unless Redis answers: the breaker's own probe, which also closes it."""
        if not await self._breaker.ping():
            raise CoordinationUnavailable(f"redis is not answering: {self._breaker.reason}")

    async def close(self) -> None:
        """Close both connection pools (and the breaker, when it is this backend's own)."""
        await self._client.aclose()
        await self._pubsub_client.aclose()
        if self._own_breaker:
            await self._breaker.close()

    async def _listen(self, pubsub: PubSub, outages: int) -> AsyncIterator[Event]:
        """The subscription's events; ends with CoordinationUnavailable once Redis stops answering, once the breaker
        has opened since (messages published meanwhile may be lost), or once a liveness ping on the subscription's
        own connection goes unanswered. ``outages``: the breaker's count when the subscription began."""
        heard = asyncio.get_running_loop().time()
        pinged: float | None = None
        while True:
            try:
                # Read raw, then parse: any reply proves the connection alive (get_message drops our pong when
                # replies are decoded).
                response = await pubsub.parse_response(block=False, timeout=_LISTEN_TICK_SECONDS)
                message = await pubsub.handle_message(response, ignore_subscribe_messages=True) if response else None
            except _UNAVAILABLE as exc:
                # This one connection failed; whether Redis itself is gone is the breaker's probe to say.
                await self._breaker.ping()
                raise CoordinationUnavailable(f"redis did not answer ({type(exc).__name__})") from exc
            if self._breaker.outages != outages:
                raise CoordinationUnavailable("redis was unreachable meanwhile: messages may have been lost")
            now = asyncio.get_running_loop().time()
            if response:
                heard, pinged = now, None
                if message is not None and message["type"] == "message":
                    yield decode_event(message["data"])
                continue
            # A hung Redis sends nothing, not even an error: the breaker (its watchdog) is what notices.
            if self._breaker.is_open:
                raise CoordinationUnavailable(f"redis is not answering: {self._breaker.reason}")
            if pinged is not None and now - pinged > self._budget:
                raise CoordinationUnavailable("the subscription's connection stopped answering")
            if pinged is None and now - heard >= _LIVENESS_SECONDS:
                pinged = now
                try:
                    async with asyncio.timeout(self._budget):
                        await pubsub.ping(_LIVENESS_PING)
                except _UNAVAILABLE as exc:
                    raise CoordinationUnavailable(f"redis did not answer ({type(exc).__name__})") from exc


def _change(life: int, entry_id: str, fields: dict[str, str]) -> Change:
    ms = int(entry_id.partition("-")[0])
    cursor = with_life(life, entry_id)
    return Change(cursor, fields["agent"], json.loads(fields["paths"]), fields["summary"], ms_to_datetime(ms))
