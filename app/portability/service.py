"""The portability operations as a running server (or the CLI) does them, from the parts the container holds."""

from __future__ import annotations

from collections.abc import AsyncIterator

from app.container import Container
from app.portability.erase import Erased, delete_account
from app.portability.export import export_lines
from app.portability.importer import Importer, Parsed, Progress, Summary


def dims_of(container: Container) -> int:
    return container.sync.dims if container.sync is not None else 0


def export(container: Container, user_id: str, *, session: str | None, vectors: bool) -> AsyncIterator[str]:
    """The account's export lines (of one session when given), vectors from the index when asked for."""
    return export_lines(
        container.db,
        user_id,
        model=container.engine.model_id,
        dims=dims_of(container),
        session=session,
        engine=container.engine if vectors else None,
    )


async def import_into(container: Container, user_id: str, parsed: Parsed, progress: Progress | None = None) -> Summary:
    """Import a parsed export into ``user_id``'s account (see ``app.portability.importer``)."""
    importer = Importer(
        container.db,
        container.engine,
        changes=container.memories.changes,
        quotas=container.quotas,
        max_memory_chars=container.settings.max_memory_chars,
        dims=dims_of(container),
        max_conflicts=container.settings.sync_max_conflicts_per_memory,
    )
    return await importer.run(user_id, parsed, progress)


async def delete(container: Container, user_id: str) -> Erased:
    """Delete the account everywhere (see ``app.portability.erase``)."""
    return await delete_account(
        container.db, container.engine, container.coordination, user_id, container.revocations.announce
    )
