"""What admission and batching tell the metrics: a narrow interface, so the gate and batcher stay testable alone."""

from __future__ import annotations

from typing import Protocol


class AdmissionProbe(Protocol):
    def admitted(self, tenant_class: str, how: str, waited: float) -> None: ...

    def refused(self, tenant_class: str, reason: str) -> None: ...

    def state(self, in_flight: int, queued: int, limit: int) -> None: ...


class StageProbe(Protocol):
    """A stage with a queue of its own (the embedder's batches, the database writer's group commits)."""

    def waited(self, stage: str, seconds: float) -> None: ...

    def depth(self, stage: str, queued: int) -> None: ...

    def batch(self, stage: str, size: int) -> None: ...


class NoProbe:
    def admitted(self, tenant_class: str, how: str, waited: float) -> None:
        pass

    def refused(self, tenant_class: str, reason: str) -> None:
        pass

    def state(self, in_flight: int, queued: int, limit: int) -> None:
        pass

    def waited(self, stage: str, seconds: float) -> None:
        pass

    def depth(self, stage: str, queued: int) -> None:
        pass

    def batch(self, stage: str, size: int) -> None:
        pass
