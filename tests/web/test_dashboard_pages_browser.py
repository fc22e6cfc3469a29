"""The dashboard's pages in Chromium at phone and laptop widths: the main page's three steps (with the connection
test filled from the new key), the memory page (markdown, history, edit with metadata), the browser's bulk actions,
and nothing wider than the screen. Screenshots land in ENGRAM_SHOTS when set (to look at while building), else in
tmp_path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import RunningServer
from tests.web.conftest import PASSWORD, PHONE, new_email

DESKTOP = {"width": 1280, "height": 900}
OVERFLOW = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
HOSTILE = (
    "# Deploy notes\n\nUse **pnpm** and `make ship`.\n\n- step one\n- step two\n\n"
    '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">\n\n'
    "[click](javascript:window.pwned=3) [docs](https://example.test/docs)\n"
)


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("ENGRAM_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _sign_up(page: Any) -> None:
    page.goto("/signup")
    page.fill("#f-email", new_email())
    page.fill("#f-password", PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/dashboard")


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_dashboard_pages_in_chromium(chromium: Any, api: RunningServer, tmp_path: Path, viewport: Any) -> None:
    shots, width = _shots(tmp_path), viewport["width"]
    context = chromium.new_context(viewport=viewport, base_url=api.base_url)
    page = context.new_page()
    page.set_default_timeout(30_000)
    _sign_up(page)
    # The bind checkbox sits at the start of its own words' line (inputs fill their field; a checkbox did too, and
    # floated alone above its label).
    box = page.locator("[data-test-bind]").bounding_box()
    words = page.locator("label:has([data-test-bind])").bounding_box()
    assert box is not None and words is not None
    assert box["width"] < 40 and abs(box["x"] - words["x"]) < 8, (box, words)
    assert box["y"] < words["y"] + words["height"] / 2, (box, words)
    page.fill("#f-name", "laptop")
    page.get_by_role("button", name="Create key").click()
    page.wait_for_selector("#new-key:not([hidden])")
    key = page.inner_text("#cmd-new-key").strip()
    # Step 3 is filled with the key the page keeps, and one click tests it for real.
    assert page.input_value("#f-key") == key
    page.get_by_role("button", name="Test connection").click()
    page.wait_for_selector("#connection-result")
    assert "Connected: the key works" in page.inner_text("#connection-result")
    assert page.evaluate(OVERFLOW) <= 0
    page.screenshot(path=str(shots / f"dashboard-{width}.png"), full_page=True)

    with httpx.Client(base_url=api.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        made = http.post("/v1/memories", json={"content": HOSTILE, "tags": ["ops"], "session": "web", "agent": "a1"})
        assert made.status_code == 201, made.text
        memory_id = made.json()["id"]
        for n in range(3):
            assert http.post("/v1/memories", json={"content": f"Note {n}", "tags": ["bulk"]}).status_code == 201
        doc = {"path": "docs/ops.md", "content": "# Ops\n\n## Backups\n\nBackups run nightly at 02:00.\n"}
        assert http.put("/v1/sessions/web/documents", json=doc).status_code == 200

    page.goto("/dashboard/memories")
    assert page.evaluate("() => window.pwned") is None
    placeholder = page.locator("#f-q")
    assert placeholder.evaluate("(e) => e.scrollWidth <= e.clientWidth"), "the search placeholder fits"
    chunk = page.locator("li.memory", has_text="Backups run nightly")
    assert chunk.inner_text().count("Ops > Backups") == 1, "the heading path is shown once"
    assert page.evaluate(OVERFLOW) <= 0
    page.screenshot(path=str(shots / f"memories-{width}.png"), full_page=True)

    # Bulk: tick two notes and tag them; then delete them, after the confirmation.
    for n in (0, 1):
        page.locator("li.memory", has_text=f"Note {n}").locator("input.pick").check()
    page.fill("#f-bulk-tag", "picked")
    page.get_by_role("button", name="Add tag").click()
    page.wait_for_selector(".notice-banner")
    assert "2 of 2 selected tagged #picked" in page.inner_text(".notice-banner")
    assert page.locator("[data-count-tag=picked]").count() == 1
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.locator("input[data-select-all]").check()
    page.locator("li.memory", has_text="Deploy notes").locator("input.pick").uncheck()
    page.locator("li.memory", has_text="Backups run nightly").locator("input.pick").uncheck()
    page.get_by_role("button", name="Delete selected").click()
    page.wait_for_selector(".notice-banner:has-text('deleted')")
    assert asked and asked[0].startswith("Delete the selected memories?")
    assert "3 memories deleted" in page.inner_text(".notice-banner")
    assert page.locator("li.memory").count() == 2

    # The memory page: markdown, with nothing hostile let through, and the edit that shows up in the history.
    page.goto(f"/dashboard/memories/{memory_id}")
    body = page.locator("#memory-body")
    assert body.locator("h1").inner_text() == "Deploy notes" and body.locator("li").count() == 2
    assert body.locator("script, img").count() == 0 and page.evaluate("() => window.pwned") is None
    assert body.locator("a").count() == 1 and body.locator("a").get_attribute("href") == "https://example.test/docs"
    # Metadata is edited as JSON text: what is not an object is refused next to the field, and nothing is saved.
    assert page.input_value("#f-metadata") == "{}"
    page.fill("#f-metadata", "{oops")
    page.get_by_role("button", name="Save").click()
    page.wait_for_selector("#e-metadata")
    assert page.inner_text("#e-metadata").startswith("metadata is not valid JSON")
    assert page.input_value("#f-metadata") == "{oops"
    page.fill("#f-content", HOSTILE.replace("step two", "step three"))
    page.fill("#f-tags", "ops, deploy")
    page.fill("#f-metadata", '{"ticket": "T-9", "urgent": true}')
    page.select_option("#f-scope", "user")
    page.get_by_role("button", name="Save").click()
    page.wait_for_selector(".notice-banner")
    assert "Memory saved (content, tags, metadata, scope changed)" in page.inner_text(".notice-banner")
    assert page.input_value("#f-metadata") == '{\n  "ticket": "T-9",\n  "urgent": true\n}'
    assert '"T-9"' in page.inner_text("#facts")
    assert page.locator("pre.diff .removed").inner_text().strip() == "- - step two"
    assert page.locator("pre.diff .added").inner_text().strip() == "+ - step three"
    assert "scope: session -> user" in page.inner_text("#history")
    assert page.evaluate(OVERFLOW) <= 0
    page.screenshot(path=str(shots / f"memory-{width}.png"), full_page=True)

    for name in ("sync", "usage", "sessions", "sessions/web"):
        page.goto(f"/dashboard/{name}")
        assert page.evaluate(OVERFLOW) <= 0, name
        page.screenshot(path=str(shots / f"{name.replace('/', '-')}-{width}.png"), full_page=True)
    assert page.locator("svg.usage-chart").count() == 0
    page.goto("/dashboard/usage")
    assert page.locator("svg.usage-chart g.hour").count() == 24
    # The chart is drawn by the server: no script or stylesheet from elsewhere.
    assert page.evaluate("() => Array.from(document.scripts).every((s) => s.src.startsWith(location.origin))")
    context.close()
