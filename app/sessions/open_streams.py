"""How many event streams (Server-Sent Events) each user holds open on this instance, and the most it may.

A stream costs a connection, a subscription and a task for as long as the client keeps it, and the per-minute rate
limit counts only its opening: without a cap, one key could hold thousands (MCP sessions have the same kind of cap,
``ENGRAM_MCP_SESSIONS_PER_USER``). One stream more than ``per_user`` is refused with 429 and ``Retry-After``; a
client that closes one may open another at once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from app.errors import RateLimited
from app.quotas.limiter import retry_after_header

# Streams are long-lived: a client refused one should wait a little, not hammer.
RETRY_SECONDS = 5


class OpenStreams:
    def __init__(self, per_user: int) -> None:
        self.per_user = per_user
        self._open: Counter[str] = Counter()

    def count(self, user_id: str) -> int:
        return self._open[user_id]

    @contextmanager
    def hold(self, user_id: str) -> Iterator[None]:
        """One open stream of ``user_id`` for as long as the block runs; RateLimited when it holds the most already."""
        if self._open[user_id] >= self.per_user:
            raise RateLimited(
                f"this account holds {self.per_user} open event streams on this server, the most it may; "
                "close one before opening another",
                headers=retry_after_header(RETRY_SECONDS),
            )
        self._open[user_id] += 1
        try:
            yield
        finally:
            self._open[user_id] -= 1
            if self._open[user_id] <= 0:
                del self._open[user_id]
