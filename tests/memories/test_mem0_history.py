"""mem0 keeps no second history beside Engram's: its in-memory copy grew by a row per write for the server's life."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.memories.embedder import OnnxMiniLMEmbedder
from app.memories.engine import MemoryEngine
from tests.memories.test_engine_contract import add

pytestmark = pytest.mark.anyio


def _mem0_history_rows(engine: MemoryEngine) -> int:
    db = engine._memory.db
    store = getattr(db, "_manager", db)  # mem0's own SQLite store, behind the wrapper that drops its history
    return int(store.connection.execute("SELECT COUNT(*) FROM history").fetchone()[0])


async def test_writes_leave_nothing_in_mem0s_history(tmp_path: Path, embedder: OnnxMiniLMEmbedder) -> None:
    engine = MemoryEngine.open(data_dir=tmp_path, embedder=embedder)
    try:
        ids = [await add(engine, f"Note number {n} about the release train") for n in range(20)]
        await engine.update(user_id="u_1", memory_id=ids[0], content="Edited note", tags=None, metadata=None)
        await engine.delete(user_id="u_1", memory_id=ids[1])
        assert _mem0_history_rows(engine) == 0
        await engine.reset()  # mem0 makes its store anew here: it must come without history too
        await add(engine, "After the reset")
        assert _mem0_history_rows(engine) == 0
        assert await engine.count() == 1
    finally:
        engine.close()
