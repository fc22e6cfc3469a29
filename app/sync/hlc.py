"""Hybrid logical clocks: wall-clock milliseconds in the high bits, a counter in the low 16. Pure.

A node's clock never goes backwards (it starts above every version in its database), every local write gets a
timestamp above the version it replaces, and observing a remote version pulls the clock past it, so a write made
after seeing a change always orders after it, whatever the machines' wall clocks say.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

from app.column_limits import MAX_INT64
from app.errors import ValidationFailed

LOGICAL_BITS = 16
# Versions are stored as 64-bit integers (bigint): the milliseconds get the 47 bits left above the counter.
MAX_MS = MAX_INT64 >> LOGICAL_BITS
_WIRE = re.compile(r"^(\d{1,15})\.(\d{1,5})$")
# The wire form as the schema states it: the counter below 2**16 (the milliseconds' bound is left to decode).
WIRE_PATTERN = r"^\d{1,15}\.(\d{1,4}|[0-5]\d{4}|6[0-4]\d{3}|65[0-4]\d{2}|655[0-2]\d|6553[0-5])$"


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def physical_ms(hlc: int) -> int:
    return hlc >> LOGICAL_BITS


def encode(hlc: int) -> str:
    """The wire form, ``"<milliseconds>.<counter>"``: exact in any JSON reader, readable by people."""
    return f"{hlc >> LOGICAL_BITS}.{hlc & ((1 << LOGICAL_BITS) - 1)}"


def decode(text: str) -> int:
    match = _WIRE.match(text) if isinstance(text, str) else None
    if match is None or int(match.group(2)) >= 1 << LOGICAL_BITS or int(match.group(1)) > MAX_MS:
        raise ValidationFailed(f"hlc {str(text)[:40]!r} is not '<milliseconds>.<counter>'", field="hlc")
    return (int(match.group(1)) << LOGICAL_BITS) | int(match.group(2))


class HybridClock:
    """One per process; safe to call from several threads."""

    def __init__(self, last: int = 0, now_ms: Callable[[], int] = wall_ms) -> None:
        self._last = last
        self._now_ms = now_ms
        self._lock = threading.Lock()

    @property
    def last(self) -> int:
        return self._last

    def tick(self, after: int = 0) -> int:
        """A new timestamp, above every one this clock issued or observed, and above ``after``."""
        with self._lock:
            self._last = max(self._now_ms() << LOGICAL_BITS, self._last + 1, after + 1)
            return self._last

    def observe(self, remote: int) -> None:
        """A version seen from elsewhere: later local timestamps order after it."""
        with self._lock:
            self._last = max(self._last, remote)
