"""The dashboard with 10,000 memories: the pages page through them and count them without reading them all into
the page. The only time limit is the client's timeout, which catches a hang (speed belongs in bench/)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from app.memories.models import MemoryRecord
from tests.harness import RunningServer
from tests.web.conftest import Browser

MEMORIES = 10_000
SESSIONS = 25


def _seed(api: RunningServer, user_id: str) -> None:
    """10,000 memory rows written through the server's own database session (the pages read the database, not the
    vector index; adding them through MemoryService.add, with embedding, took 11 minutes on this shared machine)."""
    container = api.container
    start = datetime.now(UTC) - timedelta(days=30)

    def row(n: int) -> MemoryRecord:
        session = f"s{n % SESSIONS}" if n % 4 else None
        return MemoryRecord(
            id=str(uuid.uuid4()),
            user_id=user_id,
            session=session,
            agent="a1" if session else None,
            scope="session" if session else "user",
            visibility=f"s:{session}" if session else "user",
            content=f"fact {n}: the service on port {8000 + n % 97} restarts nightly",
            tags=[f"t{n % 7}"],
            metadata_={},
            created_at=start + timedelta(seconds=n),
            updated_at=start + timedelta(seconds=n),
        )

    async def seed() -> None:
        async with container.db.session() as session:
            session.add_all(row(n) for n in range(MEMORIES))

    api.run(seed())


def test_the_pages_stay_usable_with_ten_thousand_memories(
    api: RunningServer, browser: Callable[[], Browser], chromium: Any
) -> None:
    me = browser().signup()
    assert me.user_id
    _seed(api, me.user_id)
    me.http.timeout = 120  # a hang guard only

    page = me.get("/dashboard/memories")
    assert page.status_code == 200
    assert f"<h2>{MEMORIES} memories</h2>" in page.text
    assert len(re.findall(r'<li class="memory"', page.text)) == 20
    assert re.search(r'data-count-tag="t0">#t0</a> <span class="n">1429</span>', page.text)
    assert re.search(r'data-count-scope="session">session</a> <span class="n">7500</span>', page.text)
    seen: set[str] = set()
    url: str | None = "/dashboard/memories?per=200"
    for _ in range(5):  # keyset pages: each as quick to reach as the first
        assert url
        listing = me.get(url.replace("&amp;", "&"))
        assert listing.status_code == 200
        ids = re.findall(r'<li class="memory" data-memory-id="([^"]+)"', listing.text)
        assert len(ids) == 200 and not seen & set(ids)
        seen |= set(ids)
        match = re.search(r'<a href="([^"]+)" rel="next">', listing.text)
        url = match.group(1) if match else None

    memory = me.get(f"/dashboard/memories/{next(iter(seen))}")
    assert memory.status_code == 200 and "fact " in memory.text
    for path in ("/dashboard", "/dashboard/sessions", "/dashboard/usage", "/dashboard/memories?session=s1"):
        assert me.get(path).status_code == 200, path

    # And in Chromium, logged in as the same browser session: the page renders its 20 memories and the counts.
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, base_url=api.base_url)
    cookies = [{"name": c.name, "value": c.value or "", "url": api.base_url} for c in me.http.cookies.jar]
    context.add_cookies(cookies)
    page = context.new_page()
    page.set_default_timeout(120_000)  # a hang guard only
    page.goto("/dashboard/memories")
    assert page.locator("li.memory").count() == 20
    assert page.inner_text("#counts h2") == f"{MEMORIES} memories"
    page.locator("a[rel=next]").click()
    page.wait_for_url("**cursor=**")
    assert page.locator("li.memory").count() == 20
    context.close()
