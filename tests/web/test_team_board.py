"""The team dashboard in a real browser: the list of sessions, and a session's agents with roles, task graph and
messages, updated live while agents work. Screenshots at laptop and phone sizes land in tmp_path (or
ENGRAM_SCREENSHOTS, to look at them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from tests.harness import RunningServer
from tests.web.conftest import LAPTOP, PASSWORD, PHONE, Browser

GRAPH = [
    {"id": "schema", "description": "Design the tables", "files": ["db/schema.sql"]},
    {"id": "api", "description": "REST endpoints", "deps": ["schema"]},
    {"id": "auth", "description": "Login and tokens", "deps": ["schema"]},
    {"id": "ui", "description": "Pages", "deps": ["api"]},
    {"id": "docs", "description": "README", "deps": ["api", "auth"]},
    {"id": "e2e", "description": "End-to-end tests", "deps": ["ui", "docs"]},
]


def act(api: httpx.Client, method: str, path: str, agent: str, **kwargs: Any) -> Any:
    response = api.request(method, f"/v1/sessions/shop{path}", params={"agent": agent}, **kwargs)
    assert response.status_code in (200, 201), response.text
    return response.json()


def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("ENGRAM_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_sessions_list_and_a_live_task_board(chromium: Any, api: RunningServer, tmp_path: Path) -> None:
    owner = Browser(api).signup()
    key = owner.create_key()
    with owner.api(key) as rest:
        assert rest.get("/v1/sessions/older/status", params={"agent": "solo"}).status_code == 200
        act(rest, "POST", "/agents", "arch", json={"role": "architect", "client": "claude-code"})
        act(rest, "POST", "/agents", "back", json={"role": "backend", "capabilities": ["python", "sql"]})
        act(rest, "POST", "/agents", "front", json={"role": "frontend", "client": "cursor"})
        act(rest, "POST", "/tasks", "arch", json={"tasks": GRAPH})
        act(rest, "POST", "/tasks/schema/claim", "back")
        act(rest, "POST", "/tasks/schema/complete", "back", json={"result": "users, orders"})
        act(rest, "POST", "/tasks/api/claim", "back")
        act(
            rest, "POST", "/messages", "arch", json={"to": "role:backend", "kind": "contract", "content": "GET /orders"}
        )
        act(rest, "POST", "/messages", "front", json={"to": "back", "kind": "question", "content": "Pagination?"})

    folder = shots(tmp_path)
    context = chromium.new_context(viewport=LAPTOP, base_url=api.base_url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto("/login")
    page.fill("#f-email", owner.email or "")
    page.fill("#f-password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/dashboard")

    page.goto("/dashboard/sessions")
    rows = page.locator("li.session-row")
    assert rows.count() == 2
    assert rows.nth(0).locator("strong").inner_text() == "shop"  # the latest activity first
    assert "architect" in rows.nth(0).inner_text() and "backend" in rows.nth(0).inner_text()
    page.screenshot(path=str(folder / "sessions-laptop.png"), full_page=True)

    page.click("text=shop")
    page.wait_for_url("**/dashboard/sessions/shop")
    page.wait_for_selector(".live.connected")
    assert page.locator("svg.taskgraph g.task").count() == len(GRAPH)
    assert page.locator("svg.taskgraph path.edge").count() == sum(len(t.get("deps", [])) for t in GRAPH)  # type: ignore[arg-type]
    assert page.locator('g.task.completed[data-task="schema"]').count() == 1
    assert page.locator('g.task.in_progress[data-task="api"]').count() == 1
    assert page.locator('g.task.available[data-task="auth"]').count() == 1
    assert page.locator('g.task.blocked[data-task="e2e"]').count() == 1
    # Columns follow the dependencies: every task sits right of each of its dependencies.
    xs = {
        g.get_attribute("data-task"): g.bounding_box()["x"]  # type: ignore[index]
        for g in page.locator("svg.taskgraph g.task").all()
    }
    assert all(xs[t["id"]] > xs[d] for t in GRAPH for d in t.get("deps", []))  # type: ignore[attr-defined]
    agents = page.locator("table.agents")
    assert "architect" in agents.inner_text() and "python, sql" in agents.inner_text()
    assert page.locator('tr[data-agent="back"]').inner_text().count("api") >= 1
    assert "Pagination?" in page.locator("ul.messages").inner_text()
    page.screenshot(path=str(folder / "session-laptop.png"), full_page=True)

    # Live: work done elsewhere shows up without a reload.
    with owner.api(key) as rest:
        act(rest, "POST", "/tasks/api/complete", "back", json={"result": "done"})
        page.wait_for_selector('g.task.completed[data-task="api"]')
        page.wait_for_selector('g.task.available[data-task="ui"]')
        act(rest, "POST", "/messages", "back", json={"to": "front", "kind": "answer", "content": "Cursor-based"})
        page.wait_for_selector("ul.messages li:has-text('Cursor-based')")
        act(rest, "POST", "/agents", "qa", json={"role": "tester"})
        page.wait_for_selector('tr[data-agent="qa"]')
    page.screenshot(path=str(folder / "session-live-laptop.png"), full_page=True)

    phone = chromium.new_context(viewport=PHONE, base_url=api.base_url, storage_state=context.storage_state())
    small = phone.new_page()
    small.goto("/dashboard/sessions/shop")
    small.wait_for_selector("svg.taskgraph")
    # The board scrolls inside its card instead of widening the page.
    assert small.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    small.screenshot(path=str(folder / "session-phone.png"), full_page=True)
    phone.close()
    context.close()
