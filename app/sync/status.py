"""``engram sync status``: this node and every link, read from the database alone.

No network here, so the command imports neither httpx nor the sync protocol (tests/test_cli.py guards it); the
commands that talk to an edge (``app.sync.node_cli``) share this module's database and output.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from app.db import Database
from app.settings import Settings
from app.sync import links
from app.sync.changelog import load_node_id


@asynccontextmanager
async def node_database(settings: Settings) -> AsyncIterator[Database]:
    settings.ensure_data_dir()
    db = Database(settings.resolved_database_url)
    try:
        yield db
    finally:
        await db.dispose()


def print_json(value: dict[str, Any]) -> None:
    print(json.dumps(value))


def run_status(_: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_status(settings))


async def _status(settings: Settings) -> int:
    async with node_database(settings) as db:
        node_id = await load_node_id(db)
        async with db.session() as session:
            described = [await links.describe(session, link) for link in await links.all_links(session)]
    print_json({"node_id": node_id, "links": described})
    return 0
