"""Every HTML page the app serves, the API's docs and error pages included, carries the page policy: a
Content-Security-Policy that forbids framing, and X-Frame-Options for browsers that predate it."""

from __future__ import annotations

import re
from collections.abc import Callable

from litestar import Litestar
from litestar.routes import HTTPRoute

from tests.harness import RunningServer
from tests.web.conftest import Browser

# Path parameters, filled with values that name something or at least parse.
_PARAMETERS = {"session": "s1", "client_name": "claude-code", "path": "missing", "file_path": "missing.css"}


def _get_paths(app: Litestar, user_id: str) -> list[str]:
    """Every GET route, its parameters filled in; event streams left out (they never end)."""
    values = {**_PARAMETERS, "user_id": user_id}
    paths = []
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or "GET" not in route.methods or route.path.endswith("/events"):
            continue
        paths.append(re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values.get(m.group(1), "x"), route.path))
    return paths


def test_every_html_answer_carries_the_page_policy(api: RunningServer, browser: Callable[[], Browser]) -> None:
    visitor, member = browser(), browser().signup()
    assert member.user_id is not None
    app: Litestar = api.server.config.app  # type: ignore[attr-defined]
    paths = [*_get_paths(app, member.user_id), "/no-such-page", "/docs/no-such-page", "/dashboard/sessions/a b"]
    pages: list[str] = []
    for who in (visitor, member):
        for path in paths:
            response = who.get(path)
            if not response.headers.get("content-type", "").startswith("text/html"):
                continue
            pages.append(f"{response.status_code} {path}")
            policy = response.headers.get("content-security-policy", "")
            assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy, (path, policy)
            assert response.headers.get("x-frame-options") == "DENY", path
    # The pages themselves were reached, not only their error pages.
    for reached in ("200 /docs", "200 /dashboard", "200 /login", "200 /signup", "404 /no-such-page"):
        assert reached in pages, pages
