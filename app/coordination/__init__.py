"""Coordination of the agents sharing a session: claims, change feed, presence, live events."""

from __future__ import annotations

from app.coordination.backend import Coordination
from app.coordination.errors import CoordinationUnavailable
from app.coordination.lives import Lives
from app.coordination.memory_backend import MemoryCoordination
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
from app.coordination.redis_backend import RedisCoordination
from app.coordination.rules import DEFAULT_PRESENCE_TTL_SECONDS
from app.redis_breaker import RedisBreaker

__all__ = [
    "Change",
    "ChangePage",
    "Claim",
    "ClaimConflict",
    "ClaimResult",
    "Coordination",
    "CoordinationUnavailable",
    "Event",
    "MemoryCoordination",
    "Presence",
    "RedisCoordination",
    "ReleaseResult",
    "SessionKey",
    "create_coordination",
]


def create_coordination(
    redis_url: str | None,
    *,
    presence_ttl_seconds: float = DEFAULT_PRESENCE_TTL_SECONDS,
    breaker: RedisBreaker | None = None,
    command_timeout: float = 2.0,
    lives: Lives | None = None,
) -> Coordination:
    """Redis when a URL is configured (any number of instances), else in-process (a single instance only).

    ``lives`` (the database's, in a server) numbers each fresh start of a session's state; see cursors."""
    if redis_url:
        return RedisCoordination(
            redis_url,
            presence_ttl_seconds=presence_ttl_seconds,
            breaker=breaker,
            command_timeout=command_timeout,
            lives=lives,
        )
    return MemoryCoordination(presence_ttl_seconds=presence_ttl_seconds, lives=lives)
