"""Admission: who runs now, who waits its turn, and who hears 429 or 503 at once."""

from __future__ import annotations

import asyncio

import pytest

from app.admission.gate import Admission, AdmissionConfig, Ticket
from app.errors import OverFairShare, Overloaded
from app.observability.metrics import Metrics

pytestmark = pytest.mark.anyio

# Generous: only a hang should reach it.
HANG = 30.0


def fixed(limit: int, **overrides: float) -> AdmissionConfig:
    """A limit that stays put (the adaptive part is tested on its own below)."""
    values: dict[str, float] = {"queue_timeout": HANG, **overrides}
    return AdmissionConfig(initial_limit=limit, min_limit=limit, max_limit=limit, **values)  # type: ignore[arg-type]


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_request_on_an_idle_server_runs_at_once_and_gives_its_slot_back() -> None:
    gate = Admission(fixed(1))
    ticket = await gate.enter("alice", "search")
    assert gate.in_flight == 1
    gate.leave(ticket)
    gate.leave(ticket)  # leaving twice gives back one slot, not two
    assert gate.in_flight == 0 and gate.queued == 0


async def test_a_waiting_request_gets_the_next_free_slot() -> None:
    gate = Admission(fixed(1))
    first = await gate.enter("alice", "search")
    waiting = asyncio.ensure_future(gate.enter("alice", "search"))
    await _settle()
    assert not waiting.done() and gate.queued == 1
    gate.leave(first)
    second = await asyncio.wait_for(waiting, HANG)
    assert gate.in_flight == 1 and gate.queued == 0
    gate.leave(second)


async def test_freed_slots_go_to_the_tenants_in_turn_by_weight() -> None:
    gate = Admission(fixed(1, min_share=100))
    running = await gate.enter("holder", "search")
    order: list[str] = []

    async def one(tenant: str, weight: int) -> None:
        ticket = await gate.enter(tenant, "search", weight=weight)
        order.append(tenant)
        await asyncio.sleep(0)
        gate.leave(ticket)

    # The flood queues first; the heavier quiet tenant still gets two turns to its one.
    tasks = [asyncio.ensure_future(one("flood", 1)) for _ in range(6)]
    await _settle()
    tasks += [asyncio.ensure_future(one("quiet", 2)) for _ in range(4)]
    await _settle()
    gate.leave(running)
    await asyncio.wait_for(asyncio.gather(*tasks), HANG)
    assert order == ["flood", "quiet", "quiet", "flood", "quiet", "quiet", "flood", "flood", "flood", "flood"]


async def test_a_freed_slot_goes_first_to_the_waiting_tenant_with_the_fewest_in_service_for_its_weight() -> None:
    """Round robin alone would hand every other freed slot to the flood, whose requests already fill the server."""
    gate = Admission(fixed(4, min_share=100))
    flood = [await gate.enter("flood", "search") for _ in range(4)]
    flood_waiting = [asyncio.ensure_future(gate.enter("flood", "search")) for _ in range(6)]
    await _settle()
    quiet_waiting = [asyncio.ensure_future(gate.enter("quiet", "search")) for _ in range(2)]
    await _settle()
    gate.leave(flood.pop())  # the flood's turn in round robin, but it holds 3 slots to the quiet tenant's none
    await _settle()
    assert quiet_waiting[0].done() and not any(t.done() for t in flood_waiting)
    gate.leave(flood.pop())  # 2 to 1: the quiet tenant again
    await _settle()
    assert quiet_waiting[1].done() and not any(t.done() for t in flood_waiting)
    gate.leave(await quiet_waiting[0])  # nobody of the quiet tenant waits: the flood's turn
    await _settle()
    assert sum(t.done() for t in flood_waiting) == 1
    for ticket in flood:
        gate.leave(ticket)
    gate.leave(await quiet_waiting[1])
    for waiting in flood_waiting:
        gate.leave(await asyncio.wait_for(waiting, HANG))
        await _settle()
    assert gate.in_flight == 0 and gate.queued == 0


async def _flood_refused_beside_a_quiet_tenant(
    clock: list[float],
) -> tuple[Admission, Ticket, asyncio.Future[Ticket], asyncio.Future[Ticket], asyncio.Future[Ticket]]:
    """Two slots: the flood, just refused for being over its share, holds one and waits for another; the quiet
    tenant holds the other and waits for a second. Returns the gate, the flood's ticket, the flood's waiting request
    and the quiet tenant's two."""
    gate = Admission(fixed(2, min_share=3, over_share_memory=1.0), clock=lambda: clock[0])
    flood = [await gate.enter("flood", "search") for _ in range(2)]
    flood_waiting = asyncio.ensure_future(gate.enter("flood", "search"))
    await _settle()
    first = asyncio.ensure_future(gate.enter("quiet", "search"))
    await _settle()
    with pytest.raises(OverFairShare):  # 3 outstanding is its share of 2 slots and room to wait, split by two
        await gate.enter("flood", "search")
    gate.leave(flood.pop())
    await _settle()
    assert first.done()
    second = asyncio.ensure_future(gate.enter("quiet", "search"))
    await _settle()
    return gate, flood[0], flood_waiting, first, second


async def test_a_tenant_refused_for_being_over_its_share_is_served_after_the_others() -> None:
    """Even when it holds fewer slots: the flood's 429s keep it at its share, and fewest-in-service alone would then
    split the server evenly between it and a few clients that a quiet server served back to back."""
    clock = [0.0]
    gate, flood, flood_waiting, first, second = await _flood_refused_beside_a_quiet_tenant(clock)
    gate.leave(flood)  # the flood holds no slot now, the quiet tenant one: the quiet tenant's all the same
    await _settle()
    assert second.done() and not flood_waiting.done()
    gate.leave(await first)
    await _settle()
    assert flood_waiting.done()  # nobody else waits: the flood's turn
    gate.leave(await flood_waiting)
    gate.leave(await second)
    assert gate.in_flight == 0 and gate.queued == 0


async def test_a_tenant_refused_for_being_over_its_share_is_served_in_turn_again_once_the_memory_passes() -> None:
    clock = [0.0]
    gate, flood, flood_waiting, first, second = await _flood_refused_beside_a_quiet_tenant(clock)
    clock[0] = 1.5  # past the memory: fewest in service decides, and the flood holds none
    gate.leave(flood)
    await _settle()
    assert flood_waiting.done() and not second.done()
    gate.leave(await flood_waiting)
    await _settle()
    gate.leave(await first)
    gate.leave(await second)
    assert gate.in_flight == 0 and gate.queued == 0


async def test_a_tenant_over_its_share_still_gets_one_freed_slot_in_over_share_turns() -> None:
    """Served only after the others, a flood beside a few clients that keep a small server busy got nothing at all."""
    gate = Admission(fixed(1, min_share=10, over_share_turns=4, over_share_memory=HANG))
    running = await gate.enter("flood", "search")
    order: list[str] = []

    async def one(tenant: str) -> None:
        ticket = await gate.enter(tenant, "search")
        order.append(tenant)
        await asyncio.sleep(0)
        gate.leave(ticket)

    tasks = [asyncio.ensure_future(one("flood")) for _ in range(9)]
    await _settle()
    tasks += [asyncio.ensure_future(one("quiet")) for _ in range(6)]
    await _settle()
    with pytest.raises(OverFairShare):
        await gate.enter("flood", "search")
    gate.leave(running)
    await asyncio.wait_for(asyncio.gather(*tasks), HANG)
    assert order[:8] == ["quiet", "quiet", "quiet", "flood", "quiet", "quiet", "quiet", "flood"]


async def test_a_flood_over_its_share_is_told_to_retry_as_late_as_its_share_serves_the_clients_it_turns_away() -> None:
    """150 clients told "1 s" came back every second, each time a refusal's work that other tenants waited behind."""
    clock = [0.0]
    gate = Admission(fixed(1, min_share=2, max_retry_after=10), clock=lambda: clock[0])
    running = await gate.enter("flood", "search")
    queued = [asyncio.ensure_future(gate.enter(tenant, "search")) for tenant in ("flood", "quiet")]
    await _settle()
    told: list[str] = []
    for _ in range(12):
        with pytest.raises(OverFairShare) as refused:
            await gate.enter("flood", "search")
        told.append(refused.value.headers["Retry-After"])
    # One admitted so far: each refusal more is a second more, up to the longest.
    assert told == ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "10", "10"]
    clock[0] = 2.5  # what was counted has gone by
    with pytest.raises(OverFairShare) as refused:
        await gate.enter("flood", "search")
    assert refused.value.headers["Retry-After"] == "1"
    gate.leave(running)
    gate.leave(await asyncio.wait_for(queued[1], HANG))  # the quiet tenant first: the flood was refused just now
    gate.leave(await asyncio.wait_for(queued[0], HANG))
    assert gate.in_flight == 0 and gate.queued == 0


async def test_a_request_that_waits_its_whole_budget_hears_503_with_retry_after() -> None:
    metrics = Metrics()
    gate = Admission(fixed(1, queue_timeout=0.01), probe=metrics)
    running = await gate.enter("alice", "add", tenant_class="free")
    with pytest.raises(Overloaded) as refused:
        await gate.enter("alice", "add", tenant_class="free")
    assert refused.value.status_code == 503 and refused.value.headers["Retry-After"] == "1"
    assert gate.queued == 0 and gate.in_flight == 1  # the refused request left nothing behind
    assert metrics.admission.labels("refused", "queue_timeout", "free")._value.get() == 1
    gate.leave(running)


async def test_a_tenant_over_its_share_of_a_busy_server_hears_429_at_once() -> None:
    gate = Admission(fixed(1, min_share=2, capacity_factor=1.0))
    running = await gate.enter("quiet", "search")
    flood = [asyncio.ensure_future(gate.enter("flood", "search")) for _ in range(2)]
    await _settle()
    with pytest.raises(OverFairShare) as refused:
        await gate.enter("flood", "search")
    assert refused.value.status_code == 429 and refused.value.headers["Retry-After"] == "1"
    # The quiet tenant is within its share: it queues.
    quiet = asyncio.ensure_future(gate.enter("quiet", "search"))
    await _settle()
    assert not quiet.done()
    gate.leave(running)
    # Drain: each admitted ticket leaves in turn.
    pending = [*flood, quiet]
    while pending:
        await _settle()
        done = [t for t in pending if t.done()]
        assert done, "a queued request was never admitted"
        for task in done:
            gate.leave(task.result())
            pending.remove(task)


async def test_a_lone_tenant_is_never_over_its_share_it_waits_or_hears_503() -> None:
    gate = Admission(fixed(1, min_share=1, capacity_factor=1.0, queue_timeout=0.01))
    running = await gate.enter("alice", "search")
    with pytest.raises(Overloaded):
        await gate.enter("alice", "search")
    gate.leave(running)


async def test_once_waits_stand_above_target_new_arrivals_wait_only_the_short_budget() -> None:
    gate = Admission(fixed(1, target=0.001, interval=0.0, queue_timeout=HANG, overloaded_wait=0.01, min_share=1))
    running = await gate.enter("alice", "add")
    queued = [asyncio.ensure_future(gate.enter("alice", "add")) for _ in range(3)]
    await asyncio.sleep(0.01)  # every waiter is now past the target
    gate.leave(running)
    first = await asyncio.wait_for(queued[0], HANG)
    gate.leave(first)
    second = await asyncio.wait_for(queued[1], HANG)
    assert gate.overloaded
    # With the full budget this would wait until the test's hang guard; overloaded, it is refused quickly.
    with pytest.raises(Overloaded):
        await asyncio.wait_for(gate.enter("alice", "add"), HANG / 2)
    gate.leave(second)
    gate.leave(await asyncio.wait_for(queued[2], HANG))
    assert not gate.overloaded  # the queue drained


async def test_a_tenant_with_min_share_or_fewer_requests_keeps_the_full_budget_though_its_queue_stands() -> None:
    """A few clients beside a flood are never over their share: not for 429, not for CoDel's short budget."""
    gate = Admission(fixed(1, target=0.001, interval=0.0, queue_timeout=HANG, overloaded_wait=0.01, min_share=4))
    running = await gate.enter("alice", "add")
    queued = [asyncio.ensure_future(gate.enter("alice", "add")) for _ in range(3)]
    await asyncio.sleep(0.01)  # every waiter is now past the target
    gate.leave(running)
    first = await asyncio.wait_for(queued[0], HANG)
    gate.leave(first)
    second = await asyncio.wait_for(queued[1], HANG)
    assert gate.overloaded  # alice's waits stood above target, and one of hers still waits
    # Two outstanding, the arrival's third: within min_share, so it may wait the full budget.
    arrival = asyncio.ensure_future(gate.enter("alice", "add"))
    await asyncio.sleep(0.1)  # ten short budgets
    assert not arrival.done()
    gate.leave(second)
    for waiting in (queued[2], arrival):
        gate.leave(await asyncio.wait_for(waiting, HANG))
    assert gate.in_flight == 0 and gate.queued == 0


async def test_a_standing_queue_keeps_the_full_budget_while_its_tenant_holds_less_than_its_part_of_the_slots() -> None:
    """Its waits stand above target because another tenant holds the slots, not because it floods."""
    gate = Admission(fixed(3, target=0.001, interval=0.0, queue_timeout=HANG, overloaded_wait=0.01, min_share=100))
    flood = [await gate.enter("flood", "search") for _ in range(3)]
    queued = [asyncio.ensure_future(gate.enter("steady", "search")) for _ in range(3)]
    await asyncio.sleep(0.01)  # every waiter of the steady tenant is now past the target
    gate.leave(flood.pop())
    gate.leave(await asyncio.wait_for(queued[0], HANG))
    second = await asyncio.wait_for(queued[1], HANG)
    assert gate.overloaded  # the steady tenant's waits stood above target, and one of its requests still waits
    # It holds 1 slot of 3 beside the flood's 2, less than its half: a new arrival may wait the full budget.
    arrival = asyncio.ensure_future(gate.enter("steady", "search"))
    await asyncio.sleep(0.1)  # ten short budgets
    assert not arrival.done()
    for ticket in [second, *flood]:
        gate.leave(ticket)
    for waiting in (queued[2], arrival):
        gate.leave(await asyncio.wait_for(waiting, HANG))
    assert gate.in_flight == 0 and gate.queued == 0


async def test_a_tenant_beside_another_tenants_standing_queue_keeps_the_full_budget() -> None:
    """CoDel per tenant, as FQ-CoDel keeps it per flow: the flood's standing queue shortens the flood's waits only."""
    gate = Admission(fixed(1, target=0.001, interval=0.0, queue_timeout=HANG, overloaded_wait=0.01, min_share=2))
    running = await gate.enter("flood", "add")
    queued = [asyncio.ensure_future(gate.enter("flood", "add")) for _ in range(3)]
    await asyncio.sleep(0.01)  # every waiter of the flood is now past the target
    gate.leave(running)
    first = await asyncio.wait_for(queued[0], HANG)
    gate.leave(first)
    second = await asyncio.wait_for(queued[1], HANG)
    assert gate.overloaded
    with pytest.raises(Overloaded):  # the flood's own new arrival waits only the short budget
        await asyncio.wait_for(gate.enter("flood", "add"), HANG / 2)
    quiet = asyncio.ensure_future(gate.enter("quiet", "search"))
    await asyncio.sleep(0.1)  # ten short budgets: with one CoDel state for the server it would have heard 503
    assert not quiet.done()
    gate.leave(second)  # the slot goes to whichever tenant's turn it is; then to the other
    await _settle()
    turns = [queued[2], quiet] if queued[2].done() else [quiet, queued[2]]
    for waiting in turns:
        gate.leave(await asyncio.wait_for(waiting, HANG))
        await _settle()
    assert not gate.overloaded and gate.in_flight == 0 and gate.queued == 0


async def test_a_queue_emptied_by_waiters_that_went_away_is_no_longer_standing() -> None:
    gate = Admission(fixed(1, target=0.001, interval=0.0, queue_timeout=HANG, overloaded_wait=0.01))
    running = await gate.enter("alice", "add")
    queued = [asyncio.ensure_future(gate.enter("alice", "add")) for _ in range(3)]
    await asyncio.sleep(0.01)  # every waiter is now past the target
    gate.leave(running)
    first = await asyncio.wait_for(queued[0], HANG)
    gate.leave(first)
    second = await asyncio.wait_for(queued[1], HANG)
    assert gate.overloaded
    queued[2].cancel()  # the last waiter's client goes away: nothing of alice's waits any more
    with pytest.raises(asyncio.CancelledError):
        await queued[2]
    assert not gate.overloaded
    later = asyncio.ensure_future(gate.enter("alice", "add"))
    await asyncio.sleep(0.1)  # ten short budgets: a queue still taken for standing would have answered 503
    assert not later.done()
    gate.leave(second)
    gate.leave(await asyncio.wait_for(later, HANG))


async def test_a_client_that_goes_away_while_waiting_leaves_nothing_behind() -> None:
    gate = Admission(fixed(1))
    running = await gate.enter("alice", "search")
    waiting = asyncio.ensure_future(gate.enter("alice", "search"))
    await _settle()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert gate.queued == 0
    gate.leave(running)
    assert gate.in_flight == 0
    assert isinstance(await gate.enter("bob", "search"), Ticket)
