"""The long-lived parts of edge sync, built once by the composition root and kept on the container."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from app.db import Database
from app.memories.engine import MemoryEngine
from app.quotas.service import Quotas
from app.settings import Settings
from app.sync.apply import Applier
from app.sync.changelog import ChangeLog, load_node_id, open_clock
from app.sync.edge import EdgeSync
from app.sync.follower import STATE_FILE, LogFollower, index_writer
from app.sync.metrics import SyncMetrics
from app.sync.peers import PeerBook
from app.sync.recent import RecentChanges
from app.sync.worker import SyncContext, SyncWorker


@dataclass
class SyncRuntime:
    node_id: str
    changes: ChangeLog
    applier: Applier
    edge: EdgeSync | None
    follower: LogFollower
    worker: SyncWorker
    metrics: SyncMetrics | None
    # The dense vectors' length: a shipped vector of another length is not used.
    dims: int

    def stop_long_polls(self) -> None:
        """The server is stopping: the edge's long polls answer now (see app.sync.stopping)."""
        if self.edge is not None:
            self.edge.stop()


async def open_sync(
    settings: Settings,
    db: Database,
    engine: MemoryEngine | None,
    *,
    dims: int,
    quotas: Quotas | None = None,
    writer: str | None = None,
    registry: CollectorRegistry | None = None,
) -> SyncRuntime:
    """``engine`` None: a process that writes the database only (the server's follower indexes what it writes)."""
    data_dir: Path = settings.ensure_data_dir()
    node_id = await load_node_id(db)
    clock = await open_clock(db)
    if writer is None:
        writer = index_writer(data_dir, engine.backend if engine is not None else "none")
    changes = ChangeLog(node_id, clock, writer)
    applier = Applier(
        db,
        engine,
        changes,
        max_memory_chars=settings.max_memory_chars,
        max_clock_skew_seconds=settings.sync_max_clock_skew_seconds,
        quotas=quotas,
        max_conflicts_per_memory=settings.sync_max_conflicts_per_memory,
    )
    metrics = SyncMetrics(registry) if registry is not None else None
    edge = None
    if engine is not None:
        recent = RecentChanges(settings.sync_pull_cache_bytes, metrics)
        edge = EdgeSync(db, engine, applier, changes.feed, PeerBook(db), dims, metrics, recent)
    follower = LogFollower(
        db,
        engine,
        writer,
        changes.feed,
        changes.guard,
        state_path=data_dir / STATE_FILE,
        interval=settings.index_follow_seconds,
    )
    context = SyncContext(settings, db, engine, applier, changes.feed, node_id, dims, metrics)
    return SyncRuntime(
        node_id=node_id,
        changes=changes,
        applier=applier,
        edge=edge,
        follower=follower,
        worker=SyncWorker(context),
        metrics=metrics,
        dims=dims,
    )
