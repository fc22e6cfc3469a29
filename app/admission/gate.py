"""Admission: which request runs now, which waits, and which is refused at once, fairly between tenants.

At most ``AdaptiveLimit.current`` requests are in service. One that finds the server busy waits in its tenant's
queue; a freed slot goes to the waiting tenant with the fewest requests in service for its weight, and among equals
in turn (weighted round robin: a tenant of weight 3 gets three turns to another's one), so a tenant that sends 150
requests at once makes its own queue long, not anyone else's. While a tenant refused for being over its share
(below) in the last ``over_share_memory`` seconds waits beside tenants that were not, it gets one freed slot in
``over_share_turns`` at most, so a few clients beside a flood have most of the server and the flood is not starved.

Refusals are quick and honest:
- 429 ``over_fair_share`` at arrival, for a tenant already holding more than its share of the server (the limit
  plus room to queue, split by weight between the tenants with requests in), while other tenants are waiting too.
  Its Retry-After spreads the tenant's clients over the time its share serves them: refused over admitted in the
  last second (1 s at least, ``max_retry_after`` at most), so a flood's 150 clients come back about as fast as it
  is served instead of every second, each time costing a refusal's work that other tenants' requests wait behind.
  A tenant with ``min_share`` or fewer requests outstanding is never over its share, for this or for CoDel.
- 503 ``overloaded`` for a request that waited its whole budget without a slot. The budget is CoDel's, kept for each
  tenant's queue as FQ-CoDel keeps it for each flow: while a tenant's queue drains (one of its waiters in the last
  ``interval`` started within ``target``) its requests may wait ``queue_timeout``; once its waits stand above
  ``target`` for a whole interval, its new arrivals wait at most ``overloaded_wait``, so a standing queue is not kept
  standing and its clients hear "retry later" in a fraction of a second. A tenant sending a few requests beside a
  flood keeps the full budget: the flood's standing queue is the flood's, and round robin serves the few in turn.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from app.admission.limit import AdaptiveLimit
from app.admission.probe import AdmissionProbe, NoProbe
from app.errors import OverFairShare, Overloaded
from app.quotas.limiter import retry_after_header


@dataclass(frozen=True)
class AdmissionConfig:
    queue_timeout: float = 0.5
    target: float = 0.02
    interval: float = 0.1
    overloaded_wait: float = 0.1
    min_share: int = 8
    # A tenant's share is of the limit times this: what runs plus what may wait its turn.
    capacity_factor: float = 3.0
    initial_limit: int = 8
    min_limit: int = 2
    max_limit: int = 32
    # How much longer than the fastest recent request of its kind a window's median may take before the limit shrinks.
    tolerance: float = 2.0
    # How long a tenant refused for being over its share is served after the tenants that were not: about as long as
    # the Retry-After it was given.
    over_share_memory: float = 1.0
    # Of this many freed slots, one is handed out as if nobody had been over its share.
    over_share_turns: int = 4
    # The longest Retry-After a 429 over_fair_share gives (seconds).
    max_retry_after: int = 10


@dataclass(eq=False)
class Ticket:
    """A request's place: in a queue, then in service. ``leave`` it exactly once when admitted."""

    tenant: str
    kind: str
    tenant_class: str
    arrived: float
    admitted: asyncio.Future[float]
    started: float = 0.0
    gone: bool = False


@dataclass
class _Tenant:
    weight: int
    outstanding: int = 0  # queued + in service
    queue: deque[Ticket] = field(default_factory=deque)
    credit: int = 0
    # CoDel's state for this tenant's queue: since when every wait has stood above target, and whether for a whole
    # interval (its new arrivals then wait only the short budget).
    above_since: float | None = None
    overloaded: bool = False
    # When it was last refused for being over its share (429).
    refused_at: float | None = None
    # 429s and admissions in the current second (since ``counted_since``) and in the one before.
    counted_since: float = 0.0
    refused: int = 0
    admitted: int = 0
    refused_before: int = 0
    admitted_before: int = 0

    def count(self, now: float, *, refused: int = 0, admitted: int = 0) -> None:
        if now - self.counted_since >= 1.0:
            recent = now - self.counted_since < 2.0
            self.refused_before = self.refused if recent else 0
            self.admitted_before = self.admitted if recent else 0
            self.refused, self.admitted, self.counted_since = 0, 0, now
        self.refused += refused
        self.admitted += admitted

    def retry_after(self, longest: int) -> int:
        """Refused over admitted lately: how many seconds its share takes to serve the clients it turns away."""
        refused = max(1, self.refused + self.refused_before)
        admitted = max(1, self.admitted + self.admitted_before)
        return max(1, min(longest, math.ceil(refused / admitted)))

    def drained(self) -> None:
        """Nothing of this tenant waits any more (served or gone): no queue of its stands."""
        self.above_since, self.overloaded = None, False


class Admission:
    """One per server process; every admitted request must be left (``slot`` does it)."""

    def __init__(
        self,
        config: AdmissionConfig | None = None,
        probe: AdmissionProbe | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or AdmissionConfig()
        self.limit = AdaptiveLimit(
            initial=self.config.initial_limit,
            minimum=self.config.min_limit,
            maximum=self.config.max_limit,
            tolerance=self.config.tolerance,
        )
        self.probe = probe or NoProbe()
        self.clock = clock
        self.in_flight = 0
        self._tenants: dict[str, _Tenant] = {}
        self._turns: deque[str] = deque()  # tenants with someone queued, in turn order
        self._queued = 0
        self._dispatched = 0

    @property
    def queued(self) -> int:
        return self._queued

    @property
    def overloaded(self) -> bool:
        """Whether some tenant's waits have stood above target for an interval (its arrivals get the short budget)."""
        return any(state.overloaded for state in self._tenants.values())

    @asynccontextmanager
    async def slot(self, tenant: str, kind: str, *, weight: int = 1, tenant_class: str = "") -> AsyncIterator[None]:
        ticket = await self.enter(tenant, kind, weight=weight, tenant_class=tenant_class)
        try:
            yield
        finally:
            self.leave(ticket)

    async def enter(self, tenant: str, kind: str, *, weight: int = 1, tenant_class: str = "") -> Ticket:
        """Wait for a slot; ``OverFairShare`` (429) or ``Overloaded`` (503), both with Retry-After, when refused."""
        now = self.clock()
        loop = asyncio.get_running_loop()
        ticket = Ticket(tenant, kind, tenant_class, now, loop.create_future())
        state = self._tenants.get(tenant)
        if state is None:
            state = self._tenants[tenant] = _Tenant(max(1, weight))
        state.weight = max(1, weight)
        if self.in_flight < self.limit.current and not self._queued:
            state.outstanding += 1
            self._start(ticket, now)
            self.probe.admitted(tenant_class, "immediate", 0.0)
            return ticket
        if state.outstanding >= self._share(tenant) and self._others_waiting(tenant):
            state.refused_at = now
            state.count(now, refused=1)
            wait = state.retry_after(self.config.max_retry_after)
            self._forget_if_idle(tenant)
            self.probe.refused(tenant_class, "over_fair_share")
            raise OverFairShare(
                f"this account has more requests in progress than its share of a busy server; retry after {wait} s",
                headers=retry_after_header(wait),
            )
        # CoDel's short budget is for a queue of the tenant's own making: one holding less than its part of the slots
        # waits because others hold them, and keeps the full budget; so does one with min_share or fewer requests
        # outstanding, which is never over its share (as for 429): a few clients' standing queue beside a flood is
        # the flood's doing, and round robin serves them within the full budget.
        short = state.overloaded and self._over_service_share(state) and state.outstanding >= self.config.min_share
        budget = self.config.overloaded_wait if short else self.config.queue_timeout
        state.outstanding += 1
        self._enqueue(state, ticket)
        try:
            await asyncio.wait_for(asyncio.shield(ticket.admitted), budget)
        except TimeoutError:
            if not ticket.admitted.done():
                self._abandon(ticket)
                self.probe.refused(tenant_class, "queue_timeout")
                raise Overloaded(
                    f"the server is at capacity: no slot within {budget * 1000:.0f} ms; retry after 1 s",
                    headers=retry_after_header(1),
                ) from None
        except asyncio.CancelledError:
            # The client went away while waiting. If a slot was handed over meanwhile, give it back.
            if ticket.admitted.done():
                self.leave(ticket)
            else:
                self._abandon(ticket)
            raise
        self.probe.admitted(tenant_class, "queued", ticket.started - ticket.arrived)
        return ticket

    def leave(self, ticket: Ticket) -> None:
        if ticket.gone:
            return
        ticket.gone = True
        now = self.clock()
        self.limit.sample(ticket.kind, now - ticket.started, self.in_flight, now)
        self.in_flight -= 1
        state = self._tenants[ticket.tenant]
        state.outstanding -= 1
        self._forget_if_idle(ticket.tenant)
        self._dispatch(now)
        self.probe.state(self.in_flight, self._queued, self.limit.current)

    # --- internals ------------------------------------------------------------------------------------------------

    def _share(self, tenant: str) -> int:
        state = self._tenants[tenant]
        capacity = self.limit.current * self.config.capacity_factor
        return max(self.config.min_share, math.ceil(capacity * state.weight / self._active_weight(state)))

    def _over_service_share(self, state: _Tenant) -> bool:
        """Whether this tenant has more in service than its weight's part of the limit (while others want slots)."""
        in_service = state.outstanding - len(state.queue)
        return in_service >= self.limit.current * state.weight / self._active_weight(state)

    def _active_weight(self, state: _Tenant) -> int:
        """The weights of the tenants with requests in, ``state``'s own counted whether or not it has any yet."""
        return max(1, sum(t.weight for t in self._tenants.values() if t.outstanding > 0 or t is state))

    def _others_waiting(self, tenant: str) -> bool:
        return any(name != tenant and state.outstanding > 0 for name, state in self._tenants.items())

    def _start(self, ticket: Ticket, now: float) -> None:
        self._tenants[ticket.tenant].count(now, admitted=1)
        self.in_flight += 1
        ticket.started = now
        ticket.admitted.set_result(now)
        self.probe.state(self.in_flight, self._queued, self.limit.current)

    def _enqueue(self, state: _Tenant, ticket: Ticket) -> None:
        if not state.queue:
            state.credit = state.weight
            self._turns.append(ticket.tenant)
        state.queue.append(ticket)
        self._queued += 1
        self.probe.state(self.in_flight, self._queued, self.limit.current)

    def _abandon(self, ticket: Ticket) -> None:
        state = self._tenants[ticket.tenant]
        ticket.gone = True
        try:
            state.queue.remove(ticket)
        except ValueError:
            pass
        else:
            self._queued -= 1
            if not state.queue:
                self._turns.remove(ticket.tenant)
                state.drained()
        state.outstanding -= 1
        self._forget_if_idle(ticket.tenant)
        self.probe.state(self.in_flight, self._queued, self.limit.current)

    def _forget_if_idle(self, tenant: str) -> None:
        state = self._tenants.get(tenant)
        if state is not None and state.outstanding <= 0 and not state.queue:
            del self._tenants[tenant]

    def _dispatch(self, now: float) -> None:
        while self._turns and self.in_flight < self.limit.current:
            self._dispatched += 1
            tenant = self._neediest(now, mind_share=self._dispatched % self.config.over_share_turns != 0)
            state = self._tenants[tenant]
            ticket = state.queue.popleft()
            self._queued -= 1
            state.credit -= 1
            self._note_wait(state, now - ticket.arrived, now)
            if not state.queue:
                self._turns.remove(tenant)
                state.drained()
            elif state.credit <= 0:
                state.credit = state.weight
                self._turns.remove(tenant)
                self._turns.append(tenant)
            self._start(ticket, now)

    def _neediest(self, now: float, *, mind_share: bool = True) -> str:
        """Whose request takes a freed slot: of the tenants waiting, one not refused for being over its share lately
        before one that was (unless ``mind_share`` is false), then the one with the fewest requests in service for
        its weight, in turn among equals.

        A tenant sending a few requests beside a flood gets the next free slot instead of waiting for its turn behind
        the flood's in-service share, so its waits stay those of a quiet server's (and its queue never stands, which
        would cut its budget). Fewest-in-service alone split the slots evenly between the two, since the flood's 429s
        keep it at its share: a few clients that a quiet server served back to back then had half of it, and took
        2.4-3x their p99 alone (bench/load.py's neighbour, on a machine where they kept it busy alone). Served only
        after them, the flood got 0.8 requests a second to their 51; one slot in ``over_share_turns`` is its floor."""
        memory = self.config.over_share_memory
        best, fewest = self._turns[0], (True, math.inf)
        for tenant in self._turns:
            state = self._tenants[tenant]
            over = mind_share and state.refused_at is not None and now - state.refused_at < memory
            need = (over, (state.outstanding - len(state.queue)) / state.weight)
            if need < fewest:
                best, fewest = tenant, need
        return best

    def _note_wait(self, state: _Tenant, waited: float, now: float) -> None:
        """CoDel's test, for one tenant's queue: has every wait of its last interval been above target?"""
        if waited < self.config.target:
            state.above_since, state.overloaded = None, False
        elif state.above_since is None:
            state.above_since = now
        elif now - state.above_since >= self.config.interval:
            state.overloaded = True
