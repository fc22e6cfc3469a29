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
    # Every violation of the page's Content-Security-Policy, as the browser reports it (and the console's errors).
    context.add_init_script(
        "window.__violations = [];"
        "document.addEventListener('securitypolicyviolation',"
        " e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));"
    )
    page = context.new_page()
    console_errors: list[str] = []
    page.on("console", lambda message: console_errors.append(message.text) if message.type == "error" else None)
    page.set_default_timeout(20_000)
    response = page.goto("/docs")
    assert response is not None
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"
    page.wait_for_selector(".opblock-summary-path")
    paths = set(page.locator(".opblock-summary-path").all_inner_texts())
    assert {"/v1/memories", "/v1/memories/search", "/v1/sessions/{session}/claims"} <= {p.strip() for p in paths}
    # An operation opens to show its documented errors, in the API's own shape.
    page.locator(".opblock-summary-path", has_text="/v1/memories/search").first.click()
    page.wait_for_selector(".response[data-code='401']")
    page.screenshot(path=str(tmp_path / "docs.png"), full_page=False)
    assert not outside, f"the docs page reached outside the server: {outside}"
    assert page.evaluate("window.__violations") == [], "Swagger UI broke the page's Content-Security-Policy"
    assert not console_errors, console_errors
    context.close()
