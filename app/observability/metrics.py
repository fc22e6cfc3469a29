"""Every Prometheus metric Engram exports, in a registry of its own per app (several apps may share a process).

Labels are bounded sets only: route templates (never raw paths), HTTP methods, status codes, tool names, outcomes.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
TOOL_OUTCOMES = ("ok", "tool_error", "error")
CLAIM_OUTCOMES = ("granted", "conflict")
QUEUE_DELAY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
GC_PAUSE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5)


class Metrics:
    """The counters, histograms and gauges of one server; services receive it from the composition root."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.http_requests = Counter(
            "engram_http_requests",
            "HTTP requests, by method, route template and status code.",
            ["method", "path", "status"],
            registry=registry,
        )
        self.http_duration = Histogram(
            "engram_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response, by method and route template.",
            ["method", "path"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.http_in_progress = Gauge(
            "engram_http_requests_in_progress", "Requests being served, open streams included.", registry=registry
        )
        self.tool_calls = Counter(
            "engram_mcp_tool_calls",
            "MCP tool calls, by tool and outcome (ok, tool_error: the caller's mistake, error: ours).",
            ["tool", "outcome"],
            registry=registry,
        )
        self.tool_duration = Histogram(
            "engram_mcp_tool_call_duration_seconds",
            "Time spent running an MCP tool call, by tool.",
            ["tool"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.mcp_sessions = Gauge("engram_mcp_sessions", "Open MCP sessions on this instance.", registry=registry)
        self.claims = Counter(
            "engram_claims", "File claim requests, by outcome (granted, conflict).", ["outcome"], registry=registry
        )
        self.memories_added = Counter("engram_memories_added", "Memories stored.", registry=registry)
        self.memories_deleted = Counter("engram_memories_deleted", "Memories deleted.", registry=registry)
        self.redis_up = Gauge(
            "engram_redis_up",
            "1 while Redis answers, 0 while the breaker is open (no Redis: absent).",
            registry=registry,
        )
        self.redis_fallbacks = Counter(
            "engram_redis_fallbacks",
            "Calls that went on without Redis because it did not answer, by component (quotas: counted in-process).",
            ["component"],
            registry=registry,
        )

        # Load: admission control and the stages with queues of their own (app.admission).
        self.admission = Counter(
            "engram_admission_requests",
            "Requests admitted (immediate, queued) or refused (over_fair_share: 429, queue_timeout: 503), by the "
            "tenant's plan.",
            ["outcome", "reason", "tenant_class"],
            registry=registry,
        )
        self.admission_limit = Gauge(
            "engram_admission_limit",
            "Requests allowed in service at once, as learned from their latency.",
            registry=registry,
        )
        self.admission_in_flight = Gauge(
            "engram_admission_in_flight", "Requests in service (streams never count).", registry=registry
        )
        self.stage_queue_depth = Gauge(
            "engram_stage_queue_depth",
            "Waiting in a stage's queue: admission (requests), embedder (texts), db_writer (transactions).",
            ["stage"],
            registry=registry,
        )
        self.stage_queue_delay = Histogram(
            "engram_stage_queue_delay_seconds",
            "Time spent waiting in a stage's queue before its work started.",
            ["stage"],
            buckets=QUEUE_DELAY_BUCKETS,
            registry=registry,
        )
        self.stage_batch_size = Histogram(
            "engram_stage_batch_size",
            "Items done together: embedder (texts in one model run), db_writer (transactions in one commit).",
            ["stage"],
            buckets=BATCH_SIZE_BUCKETS,
            registry=registry,
        )

        self.gc_pauses = Histogram(
            "engram_gc_pause_seconds",
            "Garbage collections in `engram serve`, by generation: every thread stands still meanwhile.",
            ["generation"],
            buckets=GC_PAUSE_BUCKETS,
            registry=registry,
        )
        self.gc_frozen = Gauge(
            "engram_gc_frozen_objects",
            "Objects left out of garbage collection since start-up finished (`engram serve`; 0 elsewhere).",
            registry=registry,
        )

    # --- app.admission's probes ---

    def admitted(self, tenant_class: str, how: str, waited: float) -> None:
        self.admission.labels("admitted", how, tenant_class or "none").inc()
        self.stage_queue_delay.labels("admission").observe(waited)

    def refused(self, tenant_class: str, reason: str) -> None:
        self.admission.labels("refused", reason, tenant_class or "none").inc()

    def state(self, in_flight: int, queued: int, limit: int) -> None:
        self.admission_in_flight.set(in_flight)
        self.stage_queue_depth.labels("admission").set(queued)
        self.admission_limit.set(limit)

    def waited(self, stage: str, seconds: float) -> None:
        self.stage_queue_delay.labels(stage).observe(seconds)

    def depth(self, stage: str, queued: int) -> None:
        self.stage_queue_depth.labels(stage).set(queued)

    def batch(self, stage: str, size: int) -> None:
        self.stage_batch_size.labels(stage).observe(size)

    def count_sessions_with(self, open_sessions: Callable[[], int]) -> None:
        """Read the MCP session gauge from ``open_sessions`` at every scrape."""
        self.mcp_sessions.set_function(lambda: float(open_sessions()))

    def render(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)
