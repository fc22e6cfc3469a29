"""``/docs`` renders the API's operations in a real browser that can reach nothing but our server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness import RunningServer
from tests.web.conftest import LAPTOP


def test_the_api_docs_render_with_no_network_but_the_server(chromium: Any, api: RunningServer, tmp_path: Path) -> None:
    context = chromium.new_context(viewport=LAPTOP, base_url=api.base_url)
    outside: list[str] = []

    def only_our_server(route: Any) -> None:
        url = route.request.url
        if url.startswith(api.base_url + "/") or url.startswith("data:"):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    context.route("**/*", only_our_server)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto("/docs")
    page.wait_for_selector(".opblock-summary-path")
    paths = set(page.locator(".opblock-summary-path").all_inner_texts())
    assert {"/v1/memories", "/v1/memories/search", "/v1/sessions/{session}/claims"} <= {p.strip() for p in paths}
    # An operation opens to show its documented errors, in the API's own shape.
    page.locator(".opblock-summary-path", has_text="/v1/memories/search").first.click()
    page.wait_for_selector(".response[data-code='401']")
    page.screenshot(path=str(tmp_path / "docs.png"), full_page=False)
    assert not outside, f"the docs page reached outside the server: {outside}"
    context.close()
