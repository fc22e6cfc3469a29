"""The values the coordination layer hands out. Every datetime is timezone-aware UTC."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class SessionKey:
    """One shared session of one tenant: the unit every claim, change and presence belongs to."""

    user_id: str
    session: str


@dataclass(frozen=True, slots=True)
class Claim:
    """A file held by an agent until ``expires_at``; ``fencing_token`` grows with every grant of the file."""

    path: str
    agent: str
    operation: str
    fencing_token: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ClaimConflict:
    """A file someone else holds."""

    path: str
    holder: str
    operation: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """All or nothing: ``granted`` is empty exactly when ``conflicts`` is not."""

    granted: list[Claim]
    conflicts: list[ClaimConflict]


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    """``not_held`` holds a bare path when nobody holds it, a ``ClaimConflict`` when another agent does."""

    released: list[str]
    not_held: list[ClaimConflict | str]


@dataclass(frozen=True, slots=True)
class Change:
    """A change an agent announced; ``cursor`` orders changes within the session."""

    cursor: str
    agent: str
    file_paths: list[str]
    summary: str
    at: datetime


@dataclass(frozen=True, slots=True)
class ChangePage:
    """Changes in order, and the cursor to pass next time (unchanged when nothing is new)."""

    changes: list[Change]
    cursor: str
    # True when the cursor read from belonged to an earlier life of the session's feed (Redis lost its data, the
    # in-process server restarted): changes after it may be lost, and ``changes`` starts at the current feed's start.
    reset: bool = False


@dataclass(frozen=True, slots=True)
class Presence:
    """An agent seen in the session recently."""

    agent: str
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class Event:
    """A live event of a session: ``kind`` is "claim", "release" or "change", or one the teams layer publishes
    ("agent", "message", "task"); ``agent`` is the agent that caused it."""

    kind: str
    agent: str
    data: dict[str, Any]
    at: datetime
