"""How many requests may run at once, learned from how long they take (an adaptive concurrency limit).

Nobody knows the right number of concurrent requests for a machine: it depends on its cores, on the mix of adds and
searches, and on what else runs beside it. So it is measured, in the manner of TCP Vegas (as Netflix's
concurrency-limits and Envoy's adaptive concurrency filter do): every completed request is compared with the
fastest recent request of its kind (its no-load time). While the requests of a window take no longer than
``tolerance`` times that, the limit grows by one when it was reached; when they take longer, requests are waiting
on one another inside (for the cores, the model, the database) rather than in our queue, where waiting is bounded
and fair, so the limit shrinks by a tenth. The no-load time drifts up slowly, so that a machine that became slower
for good (another tenant of the box, a bigger index) is re-learned instead of being taken for overload forever.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Baseline:
    fastest: float
    refreshed_at: float


@dataclass
class AdaptiveLimit:
    """The limit; ``sample`` feeds it each completed request's time in service (seconds) at time ``now``."""

    initial: int = 8
    minimum: int = 2
    maximum: int = 64
    tolerance: float = 2.0
    window_seconds: float = 0.25
    # The no-load time of a kind rises by this factor per second when nothing faster is seen.
    drift_per_second: float = 0.02
    limit: float = field(init=False)
    _baselines: dict[str, _Baseline] = field(default_factory=dict, init=False)
    _window_start: float | None = field(default=None, init=False)
    _ratios: list[float] = field(default_factory=list, init=False)
    _reached: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.initial <= self.maximum:
            raise ValueError("the limits must satisfy 1 <= minimum <= initial <= maximum")
        self.limit = float(self.initial)

    @property
    def current(self) -> int:
        return int(self.limit)

    def sample(self, kind: str, seconds: float, in_flight: int, now: float) -> None:
        """One request of ``kind`` took ``seconds`` in service while ``in_flight`` requests (itself included) ran."""
        seconds = max(seconds, 1e-4)
        base = self._baselines.get(kind)
        if base is None:
            base = self._baselines[kind] = _Baseline(seconds, now)
        else:
            drifted = base.fastest * (1 + self.drift_per_second * max(0.0, now - base.refreshed_at))
            if seconds <= drifted:
                base.fastest, base.refreshed_at = seconds, now
            else:
                base.fastest, base.refreshed_at = drifted, now
        self._ratios.append(seconds / base.fastest)
        self._reached = self._reached or in_flight >= self.current
        if self._window_start is None:
            self._window_start = now
        if now - self._window_start >= self.window_seconds:
            self._adjust()
            self._window_start = now

    def _adjust(self) -> None:
        ratios = sorted(self._ratios)
        typical = ratios[len(ratios) // 2]  # the median: one slow outlier (a big batch) does not shrink the limit
        if typical > self.tolerance:
            self.limit = max(float(self.minimum), self.limit * 0.9)
        elif self._reached:
            self.limit = min(float(self.maximum), self.limit + 1)
        self._ratios.clear()
        self._reached = False
