"""The vectors of recent search queries, kept per tenant.

Agents repeat their searches: every agent of a session asks the same opening questions, and one waiting for a
teammate's write searches for it again and again. A repeat then costs a lookup instead of a model run (2.8 ms of both
cores for a short query here, more than the rest of the search). Entries are keyed by tenant as well as text, so how
fast one tenant's search answers never tells whether another tenant asked the same thing.
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar

# The tenant a search runs for; the engine sets it around each search (mem0 embeds the query on the same thread).
SEARCHING_AS: ContextVar[str | None] = ContextVar("engram_searching_as", default=None)
# A memory's text and the vector the index holds for it, set by the engine around an update that keeps the text:
# mem0 embeds the unchanged text again for a tags or metadata change (a model run for nothing), and gets this instead.
STORED_VECTOR: ContextVar[tuple[str, list[float]] | None] = ContextVar("engram_stored_vector", default=None)


class QueryVectors:
    """The last ``size`` (tenant, query) vectors, least recently used out first; ``size`` 0 keeps none."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.hits = 0
        self.misses = 0
        # Arrays of doubles: exactly the floats the embedder gave, at a third of a list of floats' memory.
        self._vectors: OrderedDict[bytes, array[float]] = OrderedDict()
        self._lock = threading.Lock()

    def vector(self, tenant: str, text: str, embed: Callable[[str], list[float]]) -> list[float]:
        if self.size <= 0:
            return embed(text)
        key = _key(tenant, text)
        with self._lock:
            found = self._vectors.get(key)
            if found is not None:
                self._vectors.move_to_end(key)
                self.hits += 1
                return found.tolist()
            self.misses += 1
        vector = embed(text)
        with self._lock:
            self._vectors[key] = array("d", vector)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector

    def __len__(self) -> int:
        return len(self._vectors)


def _key(tenant: str, text: str) -> bytes:
    """A digest, so a long query costs 16 bytes to keep (the separator keeps ("ab", "c") apart from ("a", "bc"))."""
    return hashlib.blake2b(f"{tenant}\x00{text}".encode(errors="surrogatepass"), digest_size=16).digest()
