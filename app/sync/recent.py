"""The changes an edge took in lately, kept as it sends them, so that the pulls following close behind a push are
served without reading each memory's vector back from the index and building its change again (together about
half of what serving a pull cost the edge).

An entry is served only for the version the database holds now: a version is one write, so its content never
changes, and the pull still reads each memory's current record to know which version that is. Entries go oldest
first once they pass a byte budget; a miss costs only the read the edge would have done anyway.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from app.memories.models import StoredMemory
from app.sync.metrics import SyncMetrics
from app.sync.protocol import ChangeWire, Incoming, SentChange, SentRecord, outgoing

# What an entry costs beyond its content and vector: its dicts, strings and keys.
_OVERHEAD_BYTES = 1024


class RecentChanges:
    """Per process, across tenants (keys carry the user id); ``max_bytes`` 0 keeps nothing."""

    def __init__(self, max_bytes: int, metrics: SyncMetrics | None = None) -> None:
        self.max_bytes = max_bytes
        self.metrics = metrics
        self._entries: OrderedDict[tuple[str, str], tuple[tuple[int, str], SentChange, int]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """The estimated bytes held."""
        return self._bytes

    def remember(
        self, user_id: str, model_id: str, received: Sequence[ChangeWire], batch: Sequence[Incoming],
        changed: Sequence[StoredMemory],
    ) -> None:  # fmt: skip
        """Keep the changes a push just applied (``changed``: the records as committed), each as ``outgoing``
        builds it. A live memory is kept only when it was indexed with the vector the push shipped, whose bytes go
        out again as they came; one the edge embedded itself is left to be read back from the index."""
        if self.max_bytes <= 0:
            return
        shipped = {
            change.memory_id: (change.version, wire.vector.data)
            for wire, change in zip(received, batch, strict=True)
            if change.vector is not None and wire.vector is not None
        }
        for record in changed:
            version = (record.hlc, record.origin)
            if record.deleted_at is not None:
                self._put(user_id, version, outgoing(record))
                continue
            found = shipped.get(record.id)
            if found is not None and found[0] == version:
                self._put(user_id, version, outgoing(record, {"model": model_id, "data": found[1]}))

    def take(self, user_id: str, records: Sequence[SentRecord]) -> dict[str, SentChange]:
        """The kept changes for those of ``records`` whose current version was kept, by memory id."""
        found: dict[str, SentChange] = {}
        for record in records:
            entry = self._entries.get((user_id, record.id))
            if entry is not None and entry[0] == (record.hlc, record.origin):
                found[record.id] = entry[1]
        self.hits += len(found)
        self.misses += len(records) - len(found)
        if self.metrics is not None:
            self.metrics.pull_cache.labels("hit").inc(len(found))
            self.metrics.pull_cache.labels("miss").inc(len(records) - len(found))
        return found

    def _put(self, user_id: str, version: tuple[int, str], change: SentChange) -> None:
        vector = change["vector"]
        size = len(change["record"]["content"]) + (len(vector["data"]) if vector else 0) + _OVERHEAD_BYTES
        key = (user_id, change["memory_id"])
        replaced = self._entries.pop(key, None)
        if replaced is not None:
            self._bytes -= replaced[2]
        self._entries[key] = (version, change, size)
        self._bytes += size
        while self._bytes > self.max_bytes and self._entries:
            _, (_, _, dropped) = self._entries.popitem(last=False)
            self._bytes -= dropped
