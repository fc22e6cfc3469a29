"""The neighbour a memory is indexed with: the batched lookup picks what the one-record lookup picks."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.memories import repository
from app.memories.models import MemoryRecord
from tests.sync.conftest import node_settings, open_node

T0 = datetime(2026, 11, 1, tzinfo=UTC)
WINDOW = timedelta(minutes=30)


@pytest.mark.anyio
async def test_batched_neighbours_match_one_lookup_per_record(tmp_path: Path, embedder: Any) -> None:
    rng = random.Random(11)
    async with open_node(node_settings(tmp_path), embedder) as node:
        users = [(await node.user()).user_id for _ in range(2)]
        records = []
        for n in range(300):
            # Minutes apart or at the very same instant, some deleted, across users and places.
            at = T0 + timedelta(minutes=rng.choice([0, 1, 7, 29, 30, 31, 45, 90]) * rng.randint(0, 3))
            records.append(
                MemoryRecord(
                    id=str(uuid.uuid4()),
                    user_id=rng.choice(users),
                    visibility=rng.choice(["user", "s:web", "s:web:a"]),
                    scope="user",
                    content=f"memory {n}",
                    tags=[],
                    metadata_={},
                    created_at=at,
                    updated_at=at,
                    deleted_at=at if rng.random() < 0.2 else None,
                )
            )
        async with node.container.db.session() as session:
            session.add_all(records)
            await session.flush()
            batched = await repository.previous_contents(session, records, within=WINDOW)
            one_by_one = {}
            for r in records:
                one = repository.previous_content_query(r.user_id, r.visibility, r.created_at, within=WINDOW)
                found = (await session.execute(one)).scalar_one_or_none()
                if found is not None:
                    one_by_one[r.id] = found
            # A synced batch is part of what is stored: neighbours before its earliest record and between its
            # records are read, not taken from the batch.
            parts = [rng.sample(records, k) for k in (1, 2, 5, 40, 150) for _ in range(3)]
            by_part = [await repository.previous_contents(session, part, within=WINDOW) for part in parts]
        assert batched == one_by_one
        assert 50 < len(batched) < len(records), "the data has records with and without a neighbour"
        for part, found in zip(parts, by_part, strict=True):
            assert found == {r.id: one_by_one[r.id] for r in part if r.id in one_by_one}
