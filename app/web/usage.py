"""The usage page: how much of the plan is used, against each of its limits, and the requests of the last 24 hours
drawn as a small bar chart (inline SVG, served with the page)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from litestar import Request, Response, get

from app.accounts import service as accounts
from app.accounts.models import User
from app.container import Container
from app.projects import repository as projects
from app.sync import peers
from app.web.pages import render, web_principal

CHART_WIDTH = 480
CHART_HEIGHT = 120
LABEL_SPACE = 18


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    count: int
    hour: datetime
    label: str  # the hour under every sixth bar, else empty


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    peak: int
    total: int
    baseline: int


def chart(hours: list[tuple[datetime, int]]) -> Chart:
    """One bar per hour, scaled to the busiest hour; an hour with requests gets at least a sliver."""
    peak = max((n for _, n in hours), default=0)
    plot = CHART_HEIGHT - LABEL_SPACE
    slot = CHART_WIDTH / max(1, len(hours))
    bars = []
    for i, (hour, n) in enumerate(hours):
        height = 0.0 if peak == 0 else max(2.0 if n else 0.0, plot * n / peak)
        label = f"{hour:%H}:00" if i % 6 == 0 else ""
        bars.append(
            Bar(round(i * slot + 1, 1), round(plot - height, 1), round(slot - 2, 1), round(height, 1), n, hour, label)
        )
    return Chart(CHART_WIDTH, CHART_HEIGHT, bars, peak, sum(n for _, n in hours), plot)


@get("/dashboard/usage", name="web:usage")
async def usage(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    quotas = container.quotas
    plan = await quotas.plan_for(user.id)
    counts = await container.memories.counts(web_principal(user))
    async with container.db.session() as db_session:
        keys = [k for k in await accounts.list_keys(db_session, user.id) if k.revoked_at is None]
        documents = await projects.totals_by_session(db_session, user.id)
        machines = [m for m in await peers.linked_machines(db_session, user.id) if m.cut_off_at is None]
    return render(
        request,
        "usage.html",
        user=user,
        plan=plan,
        counts=counts,
        per_minute=await quotas.requests_by_minute(user.id),
        chart=chart(await quotas.requests_by_hour(user.id)),
        keys=len(keys),
        documents=documents,
        files=sum(files for files, _ in documents.values()),
        chunks=sum(chunks for _, chunks in documents.values()),
        machines=len(machines),
    )
