"""Garbage collection for a long-running server.

After start-up a server holds about 300,000 objects (mem0, SQLAlchemy, litestar, their modules) that live as long
as the process. Each full collection walked all of them: 140-220 ms with every thread stopped, every few seconds under a
steady write load, and four times in a row while an edge took in a node's backlog. Frozen once start-up is done,
they are left out of every collection; a full collection walks only what was made since (2-4 ms under the same load).
"""

from __future__ import annotations

import gc
import time
from typing import Any

from litestar import Litestar
from prometheus_client import Histogram


def tune_for_serving(app: Litestar) -> None:
    """An ``on_startup`` hook of ``engram serve``: runs once the lifespans loaded the model and opened the stores."""
    gc.collect()  # what start-up left behind goes now, not into the frozen set for good
    gc.freeze()
    metrics = app.state.container.metrics
    # Counted once, here: ``gc.get_freeze_count`` walks the whole frozen list, which took 40 ms of the event loop's
    # time on every scrape of /metrics (a sixth of the main thread at 50 clients while bench/load.py read it twice a
    # second). Nothing freezes objects after this.
    metrics.gc_frozen.set(gc.get_freeze_count())
    gc.callbacks.append(PauseTimer(metrics.gc_pauses))


class PauseTimer:
    """Observes how long each collection stopped the process (``gc.callbacks``: a start and a stop per collection,
    never nested, whichever thread set it off)."""

    def __init__(self, pauses: Histogram) -> None:
        self.pauses = pauses
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.labels(str(info["generation"])).observe(time.perf_counter() - self._started)
