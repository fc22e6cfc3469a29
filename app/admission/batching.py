"""Embedding the texts of concurrent requests in one model run.

Every search and every add embeds one text, so the model sets the ceiling of what a box can serve, and one run over
many texts costs far less than as many runs over one. Waiting a few milliseconds to gather a batch would tax every
lone request, so nothing waits on purpose: a caller that finds a free runner (one per core) runs at once, alone and
unpadded, as before. Callers that arrive while every runner is busy queue up, and when a run finishes they go
together in the next one (one of them runs it; the others sleep). Batches therefore grow exactly as fast as load
does.

A batch that fails is tried again one text at a time, so a text the model cannot take fails only its own request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.admission.probe import NoProbe, StageProbe
from app.memories.embedder import BATCH_CHUNK, Embedder

STAGE = "embedder"


@dataclass(eq=False)
class _Job:
    text: str
    arrived: float
    ready: threading.Event = field(default_factory=threading.Event)
    vector: list[float] | None = None
    error: BaseException | None = None
    # Set when this job's caller is to run the next batch (these jobs, its own first).
    lead: list[_Job] | None = None


class BatchingEmbedder:
    """An ``Embedder`` over another, batching concurrent ``embed`` calls. Safe to call from many threads."""

    def __init__(
        self, inner: Embedder, *, max_batch: int = 32, runners: int = 2, probe: StageProbe | None = None
    ) -> None:
        self.inner = inner
        self.dims = inner.dims
        self.model_id = getattr(inner, "model_id", "")
        self.max_batch = max_batch
        self.runners = max(1, runners)
        self.probe: StageProbe = probe or NoProbe()
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: list[_Job] = []

    def embed(self, text: str) -> list[float]:
        job = _Job(text, time.perf_counter())
        with self._lock:
            if self._running >= self.runners:
                self._waiting.append(job)
                self.probe.depth(STAGE, len(self._waiting))
            else:
                self._running += 1
                job.lead = [job]
        if job.lead is None:
            job.ready.wait()
        if job.lead is not None:
            self._run(job.lead)
            self._hand_over()
        if job.error is not None:
            raise job.error
        assert job.vector is not None
        return job.vector

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """A caller's own batch (an add of many memories, an import, a document) is model runs of its own, which the
        probe counts as the model makes them: chunks of at most ``BATCH_CHUNK`` texts."""
        for start in range(0, len(texts), BATCH_CHUNK):
            self.probe.batch(STAGE, min(BATCH_CHUNK, len(texts) - start))
        return self.inner.embed_batch(texts)

    def _run(self, jobs: list[_Job]) -> None:
        started = time.perf_counter()
        for job in jobs:
            self.probe.waited(STAGE, started - job.arrived)
        self.probe.batch(STAGE, len(jobs))
        try:
            if len(jobs) == 1:
                jobs[0].vector = self.inner.embed(jobs[0].text)
            else:
                for job, vector in zip(jobs, self.inner.embed_batch([j.text for j in jobs]), strict=True):
                    job.vector = vector
        except Exception:
            for job in jobs:  # one by one: only the text that fails fails its request
                try:
                    job.vector = self.inner.embed(job.text)
                except Exception as exc:
                    job.error = exc
        for job in jobs[1:]:
            job.ready.set()

    def _hand_over(self) -> None:
        """The next batch to the first of those waiting, or this runner goes idle."""
        with self._lock:
            if not self._waiting:
                self._running -= 1
                return
            batch, self._waiting = self._waiting[: self.max_batch], self._waiting[self.max_batch :]
            self.probe.depth(STAGE, len(self._waiting))
        batch[0].lead = batch
        batch[0].ready.set()
