"""The memory browser: list, search, filters, pages and delete, through the same services as the API."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx

from tests.web.conftest import Browser, field_error, form_error


def _ids(html: str) -> list[str]:
    return re.findall(r'<li class="memory" data-memory-id="([^"]+)">', html)


def _add(api: httpx.Client, content: str, **fields: Any) -> str:
    response = api.post("/v1/memories", json={"content": content, **fields})
    assert response.status_code == 201, response.text
    memory_id: str = response.json()["id"]
    return memory_id


def test_lists_filters_and_searches_memories(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        pnpm = _add(api, "The build uses pnpm workspaces", tags=["build"])
        deploy = _add(api, "Deploys go out on Tuesdays after the standup", tags=["ops"])
        in_session = _add(api, "The login page is being rewritten", session="web", agent="claude")
        own = _add(api, "My private scratch note", session="web", agent="claude", scope="agent")

    # The owner sees everything of theirs.
    assert set(_ids(me.get("/dashboard/memories").text)) == {pnpm, deploy, in_session, own}
    assert _ids(me.get("/dashboard/memories", params={"scope": "agent"}).text) == [own]
    assert _ids(me.get("/dashboard/memories", params={"tag": "ops"}).text) == [deploy]

    page = me.get("/dashboard/memories", params={"q": "which package manager does the build use?"})
    assert page.status_code == 200
    assert _ids(page.text)[0] == pnpm and "score" in page.text
    # The tag narrows the search; an unrelated memory stays out (the default threshold), whatever the tag.
    assert _ids(me.get("/dashboard/memories", params={"q": "when do we deploy", "tag": "ops"}).text) == [deploy]
    assert _ids(me.get("/dashboard/memories", params={"q": "package manager", "tag": "ops"}).text) == []
    page = me.get("/dashboard/memories", params={"q": "login page", "session": "web", "scope": "session"})
    assert _ids(page.text) == [in_session]


def test_a_session_filter_shows_what_the_sessions_agents_see(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        user_wide = _add(api, "The build uses pnpm workspaces")
        in_web = _add(api, "The login page is being rewritten", session="web", agent="claude")
        claudes = _add(api, "My private scratch note", session="web", agent="claude", scope="agent")
        in_docs = _add(api, "The docs site moves to a new host", session="docs", agent="claude")
        user_from_docs = _add(api, "Releases are tagged vX.Y.Z", session="docs", agent="claude", scope="user")

        def shown(**filters: str) -> set[str]:
            page = me.get("/dashboard/memories", params=filters)
            assert page.status_code == 200, page.text
            return set(_ids(page.text))

        def api_list(**query: str) -> set[str]:
            return {m["id"] for m in api.get("/v1/memories", params=query).json()["memories"]}

        user_scope = {user_wide, user_from_docs}
        # An agent of "web" reads the user's memories (wherever they were written), the session's and its own.
        assert (
            shown(session="web", agent="claude")
            == user_scope | {in_web, claudes}
            == api_list(session="web", agent="claude")
        )
        assert shown(session="web", agent="codex") == user_scope | {in_web} == api_list(session="web", agent="codex")
        # Without an agent: what any agent of the session sees, so every agent's own memories too.
        assert shown(session="web") == user_scope | {in_web, claudes}
        assert shown(session="docs") == user_scope | {in_docs} == api_list(session="docs")
        assert shown(session="new") == user_scope == api_list(session="new")
        assert shown(session="web", scope="user") == user_scope
        assert shown(session="web", scope="session") == {in_web}
        assert shown(session="web", scope="agent") == {claudes}
        assert shown(session="web", tag="none") == set()

        query = "which package manager does the build use?"
        # user_from_docs was written right after user_wide, so it is indexed with its words too (neighbour context):
        # either may come first, the session filter is what is checked here.
        found = _ids(me.get("/dashboard/memories", params={"q": query, "session": "web"}).text)
        assert user_wide in found[:2] and in_docs not in found and set(found) <= user_scope | {in_web, claudes}
        found = _ids(me.get("/dashboard/memories", params={"q": query, "session": "web", "agent": "codex"}).text)
        assert user_wide in found[:2] and claudes not in found


def test_memory_content_is_escaped(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        _add(api, "<script>alert('x')</script> & <b>bold</b>")
    page = me.get("/dashboard/memories").text
    # Rendered as markdown, whose escaping leaves quotes alone in text; no tag the user wrote survives.
    assert "<script>alert" not in page and "&lt;script&gt;alert('x')&lt;/script&gt; &amp; &lt;b&gt;bold" in page


def test_pages_through_long_lists(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        response = api.post("/v1/memories", json={"memories": [{"content": f"fact {i}"} for i in range(25)]})
        assert response.status_code == 201
    first = me.get("/dashboard/memories")
    assert len(_ids(first.text)) == 20
    next_url = re.search(r'<a href="([^"]+)" rel="next">', first.text).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    second = me.get(next_url)
    assert second.status_code == 200 and len(_ids(second.text)) == 5
    assert not set(_ids(first.text)) & set(_ids(second.text))
    assert 'rel="next"' not in second.text and "First page" in second.text


def test_delete_removes_the_memory_and_returns_to_the_same_view(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        gone = _add(api, "Forget this", tags=["tmp"])
        kept = _add(api, "Keep this", tags=["tmp"])
        response = me.submit(
            "/dashboard/memories?tag=tmp", f"/dashboard/memories/{gone}/delete", back="/dashboard/memories?tag=tmp"
        )
        assert response.status_code == 303 and response.headers["location"] == "/dashboard/memories?tag=tmp"
        assert _ids(me.get("/dashboard/memories?tag=tmp").text) == [kept]
        assert api.get(f"/v1/memories/{gone}").status_code == 404
    # "back" only ever leads to the browser itself.
    response = me.submit("/dashboard/memories", f"/dashboard/memories/{kept}/delete", back="https://evil.example/")
    assert response.headers["location"] == "/dashboard/memories"


def test_nobody_can_delete_another_users_memory(browser: Callable[[], Browser]) -> None:
    owner, other = browser().signup(), browser().signup()
    with owner.api(owner.create_key()) as api:
        memory = _add(api, "mine")
        response = other.submit("/dashboard/memories", f"/dashboard/memories/{memory}/delete")
        assert response.status_code == 404 and "text/html" in response.headers["content-type"]
        assert api.get(f"/v1/memories/{memory}").status_code == 200
    assert memory not in other.get("/dashboard/memories").text


def test_bad_filters_show_their_error_next_to_the_field(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    response = me.get("/dashboard/memories", params={"session": "a__b", "scope": "everything"})
    assert response.status_code == 400
    assert "must not contain '__'" in (field_error(response.text, "session") or "")
    assert "scope must be one of" in (field_error(response.text, "scope") or "")
    response = me.get("/dashboard/memories", params={"agent": "claude"})
    assert response.status_code == 400 and "agent needs a session" in (field_error(response.text, "agent") or "")
    response = me.get("/dashboard/memories", params={"cursor": "not-a-cursor!"})
    assert response.status_code == 400 and "cursor" in (form_error(response.text) or "")
    response = me.get("/dashboard/memories", params={"q": "x" * 5000})
    assert response.status_code == 400 and field_error(response.text, "q")
