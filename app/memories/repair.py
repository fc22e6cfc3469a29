"""Index repair for MemoryService: the vector index rebuilt or brought back in step with the database."""

from __future__ import annotations

from app.memories import repository
from app.memories.records import with_context
from app.memories.service_base import MemoryServiceBase


class MemoryRepair(MemoryServiceBase):
    """The index is derived from the database; these make it match again."""

    async def reindex(self) -> int:
        """Rebuild the whole vector index from the database."""
        await self.engine.reset()
        total = 0
        async with self.db.session() as session:
            async for batch in repository.stream_live(session):
                await self.engine.upsert(await with_context(session, batch))
                total += len(batch)
        return total

    async def repair(self) -> tuple[int, int]:
        """Make the index match the database: add live rows it lacks, drop points no live row backs."""
        async with self.db.session() as session:
            live = await repository.live_ids(session)
        indexed = await self.engine.ids()
        missing = sorted(live - indexed)
        orphans = sorted(indexed - live)
        for start in range(0, len(missing), 500):
            async with self.db.session() as session:
                rows = await with_context(session, await repository.by_ids(session, missing[start : start + 500]))
            await self.engine.upsert(rows)
        if orphans:
            await self.engine.purge(orphans)
        return len(missing), len(orphans)
