"""Change-feed cursors and the millisecond clock they come from.

A cursor is ``"<life>.<ms>-<seq>"``: a feed position (the shape of a Redis stream id) within one *life* of the
session's coordination state. A life begins whenever that state starts empty (a new session, a Redis that lost its
data, a restarted in-process server) and its number comes from the database, so it only ever grows. A cursor of an
older life cannot be resumed from: the feed it pointed into is gone, and the reader is told so (``reset``). Cursors
without a life part (``"<ms>-<seq>"``, from before lives existed) belong to life 0.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from app.errors import ValidationFailed

MAX_PART = 2**64 - 1
MAX_LIFE = 2**20
START = "0-0"
_CURSOR_RE = re.compile(r"^(?:(\d{1,7})\.)?(\d{1,20})-(\d{1,20})$")
# The form the schemas state: a shade narrower than _CURSOR_RE, so that every cursor it allows is within the bounds.
CURSOR_PATTERN = r"^(\d{1,6}\.)?\d{1,19}-\d{1,19}$"
# Fencing tokens of a life count up from life * 2**32: a later life's tokens exceed every earlier one's.
LIFE_TOKEN_BASE = 2**32

Position = tuple[int, int, int]


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def ms_to_datetime(ms: int) -> datetime:
    """Milliseconds since the epoch as an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, UTC)


def datetime_to_ms(value: datetime) -> int:
    """An aware datetime (naive ones are taken as UTC) as milliseconds since the epoch."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def parse_cursor(cursor: str) -> Position:
    """A cursor as (life, ms, seq), which orders like the feed; anything else raises ``ValidationFailed``."""
    match = _CURSOR_RE.match(cursor) if isinstance(cursor, str) else None
    if match is None or int(match[2]) > MAX_PART or int(match[3]) > MAX_PART or int(match[1] or 0) > MAX_LIFE:
        shown = cursor[:40] if isinstance(cursor, str) else type(cursor).__name__
        raise ValidationFailed(
            f"invalid cursor {shown!r}: pass back a cursor that a sync or a change returned (like '3.1700000000000-0')"
        )
    return int(match[1] or 0), int(match[2]), int(match[3])


# Cursors are stream ids stamped by a clock (Redis's or this process's); allow for skew between machines.
FUTURE_SLACK_MS = 5 * 60 * 1000


def parse_resume_cursor(cursor: str) -> Position:
    """A cursor to read after: well formed, and not ahead of the feed, which would silently skip every change."""
    position = parse_cursor(cursor)
    if position[1] > now_ms() + FUTURE_SLACK_MS:
        raise ValidationFailed(
            f"cursor {cursor[:40]!r} is ahead of the change feed: pass back a cursor that a sync or a change returned"
        )
    return position


def format_cursor(life: int, ms: int, seq: int) -> str:
    """The cursor string of a feed position in a life."""
    return f"{life}.{ms}-{seq}" if life else f"{ms}-{seq}"


def stream_id(position: Position) -> str:
    """The Redis stream id (``"<ms>-<seq>"``) of a position, without its life."""
    return f"{position[1]}-{position[2]}"


def with_life(life: int, stream_position: str) -> str:
    """A Redis stream id as the cursor of that position in ``life``."""
    return f"{life}.{stream_position}" if life else stream_position


def cursor_before(ms: int) -> str:
    """The stream id just before everything at or after ``ms``: reading after it starts exactly at ``ms``."""
    if ms <= 0:
        return START
    return f"{ms - 1}-{MAX_PART}"


def fencing_token(life: int, count: int) -> int:
    """The token of a file's ``count``-th claim in ``life``: never smaller than any token of an earlier life."""
    return life * LIFE_TOKEN_BASE + count
