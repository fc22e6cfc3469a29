"""The usage page: the plan's limits with what is used of each, and the last 24 hours of requests as a chart."""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.web.conftest import Browser


def _used(html: str, what: str) -> str:
    match = re.search(rf'data-used="{what}">([^<]*)<', html)
    assert match, html
    return match.group(1)


def test_usage_shows_each_limit_of_the_plan_and_the_last_day(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    empty = me.get("/dashboard/usage")
    assert empty.status_code == 200
    assert _used(empty.text, "memories") == "0" and _used(empty.text, "requests") == "0"
    assert re.search(r'id="requests-24h">0<', empty.text)

    with me.api(me.create_key()) as api:
        for n in range(3):
            assert api.post("/v1/memories", json={"content": f"web note {n}", "session": "web"}).status_code == 201
        assert api.post("/v1/memories", json={"content": "user-wide"}).status_code == 201
        for _ in range(6):
            assert api.get("/v1/memories").status_code == 200
        doc = {"path": "docs/ops.md", "content": "# Ops\n\nBackups run nightly.\n"}
        assert api.put("/v1/sessions/web/documents", json=doc).status_code == 200

    page = me.get("/dashboard/usage").text
    assert 'id="plan-name">free<' in page
    assert _used(page, "memories") == "5"  # four notes and one document chunk
    assert re.search(r'data-limit="memories">10,000,000<', page)  # the test servers' plan
    assert re.search(r'data-session="web">4<', page) and re.search(r'data-session="">1<', page)
    assert re.search(r'data-scope="session">4<', page) and re.search(r'data-scope="user">1<', page)
    # Every API request was counted, per minute and per hour: 4 + 6 + 1 (the test may straddle a minute or an hour).
    assert int(_used(page, "requests")) + int(_used(page, "requests-before")) == 11
    assert re.search(r'id="requests-24h">11<', page)
    bars = [int(n) for n in re.findall(r'<g class="hour" data-count="(\d+)">', page)]
    assert len(bars) == 24 and sum(bars) == 11 and bars[-1] > 0
    assert _used(page, "keys") == "1" and _used(page, "links") == "0"
    assert _used(page, "documents").startswith("1 file, 1 chunk in 1 session")
    # Another user's requests are theirs.
    assert re.search(r'id="requests-24h">0<', browser().signup().get("/dashboard/usage").text)
