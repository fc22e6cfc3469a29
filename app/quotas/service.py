"""Quotas and rate limits per key and per user, by the user's plan; and what the usage page reads of them."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.accounts.principal import Principal
from app.db import Database, bounded_waits
from app.errors import QuotaExceeded, RateLimited
from app.group_commit import holds_write_lock
from app.memories.models import MemoryRecord
from app.quotas.limiter import RateLimiter, retry_after_header
from app.quotas.plans import Plan

# The request tallies behind the usage page: per hour for its 24-hour chart (kept a day and an hour), per minute for
# its requests-per-minute gauge (kept two minutes).
HOUR_TALLY_SECONDS = 90_000
MINUTE_TALLY_SECONDS = 120
# Plans change rarely (an upgrade); a minute's staleness saves a query on every request.
PLAN_CACHE_SECONDS = 60.0
# Users whose stored-memory count this process remembers for the pre-check of their writes (the most recent writers).
COUNTS_KEPT = 10_000


class Quotas:
    def __init__(self, db: Database, limiter: RateLimiter, plans: dict[str, Plan], default_plan: str) -> None:
        self.db = db
        self.limiter = limiter
        self.plans = plans
        self.default_plan = default_plan
        self._plan_cache: dict[str, tuple[float, Plan]] = {}
        # The count each user's last write here saw (or made). ``check_memories`` skips its query while that count
        # leaves room: if it is low (another instance wrote since), ``reserve_memories`` still refuses in the write's
        # transaction; if it is high (memories were deleted since), the check counts again.
        self._counts: OrderedDict[str, int] = OrderedDict()

    async def plan_for(self, user_id: str) -> Plan:
        """The user's plan; an unknown plan name falls back to the default plan."""
        cached = self._plan_cache.get(user_id)
        now = time.monotonic()
        if cached and now - cached[0] < PLAN_CACHE_SECONDS:
            return cached[1]
        row = await self.db.first(select(User.plan).where(User.id == user_id))
        name = row[0] if row is not None else None
        plan = self.plans.get(name or self.default_plan, self.plans[self.default_plan])
        self._plan_cache[user_id] = (now, plan)
        return plan

    async def check_request(self, principal: Principal) -> Plan:
        """Count one request against the key's and the user's per-minute limits; 429 with Retry-After beyond.
        Returns the user's plan."""
        plan = await self.plan_for(principal.user_id)
        limits = [(f"user:{principal.user_id}", plan.requests_per_minute)]
        if principal.key_id is not None:
            limits.insert(0, (f"key:{principal.key_id}", plan.key_requests_per_minute))
        now = time.time()
        tallies = [
            (_tally_key(principal.user_id, "h", int(now // 3600)), HOUR_TALLY_SECONDS),
            (_tally_key(principal.user_id, "m", int(now // 60)), MINUTE_TALLY_SECONDS),
        ]
        refused = await self.limiter.acquire(limits, tallies)
        if refused is None:
            return plan
        index, wait = refused
        who = "key" if principal.key_id is not None and index == 0 else "account"
        raise RateLimited(
            f"this {who} is over its limit of {limits[index][1]} requests per minute ({plan.name} plan); "
            f"retry after {max(1, math.ceil(wait))} s",
            headers=retry_after_header(wait),
        )

    async def check_memories(self, user_id: str, adding: int) -> None:
        """Refuse early (before any embedding) a write that would take the user past the plan's stored memories.

        Concurrent writes can all pass this check; ``reserve_memories`` in the write's own transaction decides."""
        plan = await self.plan_for(user_id)
        seen = self._counts.get(user_id)
        if seen is not None and seen + adding <= plan.max_memories:
            return
        async with bounded_waits(), self.db.engine.connect() as conn:
            stored = (await conn.execute(self._stored(user_id))).scalar_one_or_none() or 0
        self._remember(user_id, stored)
        _refuse_beyond(plan, stored, adding)

    async def reserve_memories(self, session: AsyncSession, user_id: str, adding: int) -> None:
        """``reserve_memories_within`` on an async session, with the user's plan."""
        if adding <= 0:
            return
        plan = await self.plan_for(user_id)
        await session.run_sync(self.reserve_memories_within, plan, user_id, adding)

    def reserve_memories_within(self, session: Session, plan: Plan, user_id: str, adding: int) -> None:
        """Within the transaction that inserts ``adding`` memories: count and refuse atomically per user.

        Touching the user's row first serialises the writers of one user until they commit: a row lock on
        PostgreSQL, the database's write lock on SQLite (where a read-then-write transaction could not upgrade),
        unless a group commit's transaction holds that lock already."""
        if adding <= 0:
            return
        if not holds_write_lock(session):
            session.execute(
                update(User).where(User.id == user_id).values(plan=User.plan),
                execution_options={"synchronize_session": False},
            )
        stored = session.execute(self._stored(user_id)).scalar_one_or_none() or 0
        _refuse_beyond(plan, stored, adding)
        self._remember(user_id, stored + adding)

    def _stored(self, user_id: str) -> Any:
        """The user's live memories. On SQLite its row holds the number (triggers, migration 0056): a count scans the
        user's memories (20 ms at 200,000), inside the write lock every tenant's writes share. PostgreSQL counts."""
        if self.db.engine.dialect.name == "sqlite":
            return select(User.memories_stored).where(User.id == user_id)
        return select(func.count()).where(MemoryRecord.user_id == user_id, MemoryRecord.deleted_at.is_(None))

    def _remember(self, user_id: str, stored: int) -> None:
        self._counts[user_id] = stored
        self._counts.move_to_end(user_id)
        if len(self._counts) > COUNTS_KEPT:
            self._counts.popitem(last=False)

    async def requests_by_hour(self, user_id: str, hours: int = 24) -> list[tuple[datetime, int]]:
        """The user's allowed requests in each of the last ``hours`` hours (the current one last), by hour start."""
        now = int(time.time() // 3600)
        starts = list(range(now - hours + 1, now + 1))
        counts = await self.limiter.tallies([_tally_key(user_id, "h", hour) for hour in starts])
        return [(datetime.fromtimestamp(hour * 3600, UTC), n) for hour, n in zip(starts, counts, strict=True)]

    async def requests_by_minute(self, user_id: str) -> tuple[int, int]:
        """The user's allowed requests in this minute so far, and in the minute before."""
        now = int(time.time() // 60)
        current, previous = await self.limiter.tallies(
            [_tally_key(user_id, "m", now), _tally_key(user_id, "m", now - 1)]
        )
        return current, previous

    async def close(self) -> None:
        await self.limiter.close()


def _tally_key(user_id: str, unit: str, number: int) -> str:
    """The counter of a user's requests in one hour ("h") or minute ("m") since the epoch."""
    return f"requests:{user_id}:{unit}{number}"


def _refuse_beyond(plan: Plan, stored: int, adding: int) -> None:
    if stored + adding > plan.max_memories:
        # Retry-After because every 429 carries one; deleting memories frees room at once.
        raise QuotaExceeded(
            f"the {plan.name} plan stores at most {plan.max_memories} memories; {stored} are stored and this "
            f"would add {adding}. Delete memories or upgrade the plan.",
            headers=retry_after_header(60),
        )
