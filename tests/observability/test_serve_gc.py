"""`engram serve` leaves what start-up built out of garbage collection, and shows what collections cost."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.observability.conftest import value
from tests.sync.processes import Deployment


def _metrics(server: Deployment) -> str:
    response = httpx.get(f"{server.url}/metrics", timeout=30)
    response.raise_for_status()
    return response.text


def test_serve_freezes_what_start_up_built_and_times_each_collection(tmp_path: Path) -> None:
    server = Deployment(tmp_path / "node")
    server.setup()
    _, key = server.user()
    server.start()
    try:
        with server.client(key) as http:
            for n in range(5):  # enough new objects for collections to run after start-up
                batch = [{"content": f"note {n}.{i} about the build"} for i in range(50)]
                http.post("/v1/memories", json={"memories": batch}).raise_for_status()
                http.post("/v1/memories/search", json={"query": f"build {n}"}).raise_for_status()
        text = _metrics(server)
    finally:
        server.stop()
    # The model, mem0, SQLAlchemy and litestar: hundreds of thousands of objects no collection walks again.
    assert value(text, "engram_gc_frozen_objects") > 100_000
    assert value(text, "engram_gc_pause_seconds_count", generation="0") > 0
    assert value(text, "engram_gc_pause_seconds_sum", generation="0") > 0
