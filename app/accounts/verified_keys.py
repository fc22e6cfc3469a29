"""API keys verified lately, so that a request need not read the database for its credential.

Every request presents a key, and looking it up was a database read on the event loop: a fifth of the loop's time
when it was saturated (`bench/load.py`, 50 clients, py-spy). A key seen lately is answered from here instead. Its
revocation still takes effect as before: the revoking transaction announces its user (``app.accounts.revocations``),
in this process at once and from other processes through Redis or the database poll (``revocation_poll_seconds``),
and the announcement drops every entry of that user. An entry is also checked again once it is ``max_age`` old, so
an announcement that never arrives (Redis down and the poll failing) costs at most that long.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict

from app.accounts.principal import Principal
from app.accounts.revocations import concerns

MAX_AGE_SECONDS = 5.0
MAX_ENTRIES = 10_000


class VerifiedKeys:
    def __init__(self, max_age: float = MAX_AGE_SECONDS, size: int = MAX_ENTRIES) -> None:
        self.max_age = max_age
        self.size = size
        # By a digest of the key: the plaintext is not kept.
        self._entries: OrderedDict[bytes, tuple[float, Principal]] = OrderedDict()
        # Raised by every announcement: a lookup that began before one must not store what it read.
        self._epoch = 0

    @property
    def epoch(self) -> int:
        """Take this before reading the database; pass it to ``put``."""
        return self._epoch

    def get(self, presented: str) -> Principal | None:
        digest = _digest(presented)
        found = self._entries.get(digest)
        if found is None:
            return None
        stored_at, principal = found
        if time.monotonic() - stored_at > self.max_age:
            del self._entries[digest]
            return None
        return principal

    def put(self, presented: str, principal: Principal, *, epoch: int) -> None:
        """Keep what a lookup that began at ``epoch`` found, unless a revocation was announced meanwhile."""
        if epoch != self._epoch:
            return
        digest = _digest(presented)
        self._entries[digest] = (time.monotonic(), principal)
        self._entries.move_to_end(digest)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def forget(self, announced: str) -> None:
        """A revocation listener (``Revocations.listen``): drop the entries of the user ``announced`` names."""
        self._epoch += 1
        for digest in [d for d, (_, p) in self._entries.items() if concerns(announced, p.user_id)]:
            del self._entries[digest]


def _digest(presented: str) -> bytes:
    return hashlib.blake2b(presented.encode(), digest_size=16).digest()
