"""Change-feed cursors ("<ms>-<seq>", the shape of Redis stream ids) and the millisecond clock they come from."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from app.errors import ValidationFailed

MAX_PART = 2**64 - 1
START = "0-0"
_CURSOR_RE = re.compile(r"^(\d{1,20})-(\d{1,20})$")


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


def parse_cursor(cursor: str) -> tuple[int, int]:
    """``"<ms>-<seq>"`` as a pair that orders like the feed; anything else raises ``ValidationFailed``."""
    match = _CURSOR_RE.match(cursor) if isinstance(cursor, str) else None
    if match is None or int(match[1]) > MAX_PART or int(match[2]) > MAX_PART:
        shown = cursor[:40] if isinstance(cursor, str) else type(cursor).__name__
        raise ValidationFailed(
            f"invalid cursor {shown!r}: pass back a cursor that a sync or a change returned (like '1700000000000-0')"
        )
    return int(match[1]), int(match[2])


# Cursors are stream ids stamped by a clock (Redis's or this process's); allow for skew between machines.
FUTURE_SLACK_MS = 5 * 60 * 1000


def parse_resume_cursor(cursor: str) -> tuple[int, int]:
    """A cursor to read after: well formed, and not ahead of the feed, which would silently skip every change."""
    position = parse_cursor(cursor)
    if position[0] > now_ms() + FUTURE_SLACK_MS:
        raise ValidationFailed(
            f"cursor {cursor[:40]!r} is ahead of the change feed: pass back a cursor that a sync or a change returned"
        )
    return position


def format_cursor(ms: int, seq: int) -> str:
    """The cursor string of a feed position."""
    return f"{ms}-{seq}"


def cursor_before(ms: int) -> str:
    """The cursor just before everything at or after ``ms``: reading after it starts exactly at ``ms``."""
    if ms <= 0:
        return START
    return format_cursor(ms - 1, MAX_PART)
