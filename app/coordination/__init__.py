"""Coordination of the agents sharing a session: claims, change feed, presence, live events."""

from __future__ import annotations

from app.coordination.backend import Coordination
from app.coordination.errors import CoordinationUnavailable
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
    redis_url: str | None, *, presence_ttl_seconds: float = DEFAULT_PRESENCE_TTL_SECONDS
) -> Coordination:
    """Redis when a URL is configured (any number of instances), else in-process (a single instance only)."""
    if redis_url:
        return RedisCoordination(redis_url, presence_ttl_seconds=presence_ttl_seconds)
    return MemoryCoordination(presence_ttl_seconds=presence_ttl_seconds)
