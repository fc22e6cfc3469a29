"""A session's memories and documents on the dashboard, re-indexing its registered project, deleting the whole
session after a confirmation that says how much goes, and agents that never joined marked as such."""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Callable
from pathlib import Path

from tests.harness import RunningServer
from tests.web.conftest import Browser


def _listed(page: str) -> list[str]:
    """The sessions in the list of active and idle sessions (not the archived ones)."""
    return re.findall(
        r'<li class="session-row[^"]*">\s*<span[^>]*></span>\s*<a href="/dashboard/sessions/([^"]+)">', page
    )


def _confirmation(page: str) -> str:
    match = re.search(r'id="delete-session"\s+data-confirm="([^"]+)"', page)
    assert match, page
    return html_lib.unescape(match.group(1))


def test_a_session_shows_its_holdings_and_is_deleted_whole(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        for n in range(3):
            body = {"content": f"web note {n}", "session": "web", "agent": "claude"}
            assert api.post("/v1/memories", json=body).status_code == 201
        assert api.post("/v1/memories", json={"content": "user-wide note"}).status_code == 201
        assert api.post("/v1/memories", json={"content": "docs note", "session": "docs"}).status_code == 201
        doc = {"path": "docs/ops.md", "content": "# Ops\n\nBackups run nightly.\n"}
        assert api.put("/v1/sessions/web/documents", json=doc).status_code == 200
        joined = api.post("/v1/sessions/web/agents", params={"agent": "claude"}, json={"role": "backend"})
        assert joined.status_code == 200, joined.text
        message = {"to": "*", "kind": "status", "content": "starting"}
        assert api.post("/v1/sessions/web/messages", params={"agent": "claude"}, json=message).status_code == 201
        tasks = {"tasks": [{"id": "a", "description": "first"}, {"id": "b", "description": "then", "deps": ["a"]}]}
        assert api.post("/v1/sessions/web/tasks", params={"agent": "claude"}, json=tasks).status_code == 201
        # An agent that calls the session without joining it.
        assert api.get("/v1/memories", params={"session": "web", "agent": "cursor"}).status_code == 200
        api.post("/v1/sessions/web/claims", json={"agent": "cursor", "file_paths": ["x.py"]})

        listing = me.get("/dashboard/sessions").text
        row = listing.split('href="/dashboard/sessions/web"')[1].split("</li>")[0]
        assert 'data-memories="4"' in row and 'data-documents="1"' in row
        assert re.search(r'data-agent="claude"><code>claude</code> <span class="role">backend</span>', row)
        assert re.search(r'data-agent="cursor"><code>cursor</code> <span class="muted not-joined"', row), row

        page = me.get("/dashboard/sessions/web").text
        assert 'data-path="docs/ops.md"' in page and 'href="/dashboard/memories?session=web"' in page
        assert "Re-index now" not in page  # no registered project
        expected = "4 memories (with 1 indexed file), 1 message and 2 tasks"
        assert (
            _confirmation(page)
            == f"Delete the session web: {expected}? This cannot be undone; memories keep their history."
        )

        assert me.post("/dashboard/sessions/web/delete", {"_csrf": "forged"}).status_code == 403
        deleted = me.submit("/dashboard/sessions/web", "/dashboard/sessions/web/delete")
        assert deleted.status_code == 303 and deleted.headers["location"] == "/dashboard/sessions"
        assert f"Session web deleted: {expected}." in html_lib.unescape(me.follow(deleted).text)

        left = {m["content"] for m in api.get("/v1/memories", params={"session": "docs"}).json()["memories"]}
        assert left == {"user-wide note", "docs note"}
        assert api.get("/v1/memories", params={"session": "web", "agent": "claude"}).json()["memories"] == [
            {**m} for m in api.get("/v1/memories").json()["memories"]
        ]  # only the user-wide note is left for the session's agents
        assert api.get("/v1/sessions/web/documents").json()["documents"] == []
        assert api.get("/v1/sessions/web/messages").json()["messages"] == []
        assert api.get("/v1/sessions/web/tasks").json()["tasks"] == []
        assert _confirmation(me.get("/dashboard/sessions/web").text).startswith(
            "Delete the session web: 0 memories (with 0 indexed files), 0 messages and 0 tasks?"
        )
    assert me.submit("/dashboard/sessions", "/dashboard/sessions/a__b/delete").status_code == 404


def test_a_registered_project_is_reindexed_from_its_session_page(
    api: RunningServer, browser: Callable[[], Browser], tmp_path: Path
) -> None:
    me = browser().signup()
    assert me.user_id
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "README.md").write_text("# Site\n\nDeploys go out on Tuesdays.\n")
    api.run(api.container.projects.add(me.user_id, "site", str(folder)))
    page = me.get("/dashboard/sessions/site").text
    assert "Re-index now" in page and str(folder) in page
    done = me.submit("/dashboard/sessions/site", "/dashboard/sessions/site/reindex")
    assert done.status_code == 303
    shown = html_lib.unescape(me.follow(done).text)
    assert f"Re-indexed {folder}: 1 added, 0 changed, 0 removed, 0 unchanged" in shown
    assert 'data-path="README.md"' in shown
    # Another user has no project of that name.
    other = browser().signup()
    assert other.submit("/dashboard/sessions", "/dashboard/sessions/site/reindex").status_code == 404


def test_an_archived_session_leaves_the_list_whole_and_comes_back(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        body = {"content": "old project note", "session": "old", "agent": "claude"}
        assert api.post("/v1/memories", json=body).status_code == 201
        assert api.post("/v1/sessions/old/claims", json={"agent": "claude", "file_paths": ["x.py"]}).status_code == 200
        assert _listed(me.get("/dashboard/sessions").text) == ["old"]
        archived = me.submit("/dashboard/sessions/old", "/dashboard/sessions/old/archive")
        assert archived.status_code == 303
        listing = me.follow(archived).text
        assert "Session old archived" in html_lib.unescape(listing)
        assert _listed(listing) == [] and 'data-archived="old"' in listing
        assert '<span class="badge">archived</span>' in me.get("/dashboard/sessions/old").text
        # Nothing of it is deleted, and its agents still use it.
        found = api.get("/v1/memories", params={"session": "old", "agent": "claude"}).json()["memories"]
        assert [m["content"] for m in found] == ["old project note"]
        assert me.post("/dashboard/sessions/old/archive", {"_csrf": "forged"}).status_code == 403
        back = me.submit("/dashboard/sessions/old", "/dashboard/sessions/old/archive", undo="1")
        assert "Session old is back in the list." in me.follow(back).text
        listing = me.get("/dashboard/sessions").text
        assert 'data-archived="old"' not in listing and _listed(listing) == ["old"]
