"""Edge sync's Prometheus metrics, in the server's registry. Labels: link ids (as many as links), directions,
states and outcomes (fixed sets)."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge


class SyncMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.pending = Gauge(
            "engram_sync_pending_changes",
            "Changes written here and not yet pushed, by link.",
            ["link"],
            registry=registry,
        )
        self.push_lag = Gauge(
            "engram_sync_push_lag_seconds",
            "Age of the oldest change not yet pushed (0 when none), by link.",
            ["link"],
            registry=registry,
        )
        self.pull_lag = Gauge(
            "engram_sync_pull_lag_seconds",
            "Seconds since the link last had everything the edge had, by link.",
            ["link"],
            registry=registry,
        )
        self.pushed = Counter("engram_sync_pushed_changes", "Changes pushed, by link.", ["link"], registry=registry)
        self.pulled = Counter("engram_sync_pulled_changes", "Changes pulled, by link.", ["link"], registry=registry)
        self.failures = Counter(
            "engram_sync_failures",
            "Pushes and pulls that failed, by link, direction (push, pull) and state (offline, unauthorized, refused).",
            ["link", "direction", "state"],
            registry=registry,
        )
        self.received = Counter(
            "engram_sync_received_changes",
            "On an edge: changes pushed to it, by outcome (applied, unchanged, conflict, discarded).",
            ["outcome"],
            registry=registry,
        )

        self.pull_cache = Counter(
            "engram_sync_pull_cache_changes",
            "On an edge: changes pulls sent as kept from their push (hit) or read back from the index (miss).",
            ["outcome"],
            registry=registry,
        )

    def forget(self, link_id: str) -> None:
        """A removed link's series go away with it."""
        for metric in (self.pending, self.push_lag, self.pull_lag, self.pushed, self.pulled):
            with contextlib.suppress(KeyError):
                metric.remove(link_id)
        for direction in ("push", "pull"):
            for state in ("offline", "unauthorized", "refused"):
                with contextlib.suppress(KeyError):
                    self.failures.remove(link_id, direction, state)
