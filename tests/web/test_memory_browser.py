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

    # The owner sees everything of theirs; naming a session (and agent) shows what was written there, any scope.
    assert set(_ids(me.get("/dashboard/memories").text)) == {pnpm, deploy, in_session, own}
    assert _ids(me.get("/dashboard/memories", params={"scope": "agent"}).text) == [own]
    assert set(_ids(me.get("/dashboard/memories", params={"session": "web"}).text)) == {in_session, own}
    assert _ids(me.get("/dashboard/memories", params={"session": "web", "scope": "session"}).text) == [in_session]
    assert _ids(me.get("/dashboard/memories", params={"session": "web", "scope": "agent"}).text) == [own]
    assert set(_ids(me.get("/dashboard/memories", params={"session": "web", "agent": "claude"}).text)) == {
        in_session,
        own,
    }
    assert _ids(me.get("/dashboard/memories", params={"session": "other"}).text) == []
    assert _ids(me.get("/dashboard/memories", params={"tag": "ops"}).text) == [deploy]

    page = me.get("/dashboard/memories", params={"q": "which package manager does the build use?"})
    assert page.status_code == 200
    assert _ids(page.text)[0] == pnpm and "score" in page.text
    assert _ids(me.get("/dashboard/memories", params={"q": "package manager", "tag": "ops"}).text) == [deploy]
    page = me.get("/dashboard/memories", params={"q": "login page", "session": "web", "scope": "session"})
    assert _ids(page.text) == [in_session]
    # The build note matches best, but it was written outside "web": only what was written there is shown.
    found = _ids(me.get("/dashboard/memories", params={"q": "which package manager does the build use?"}).text)
    in_web = _ids(
        me.get("/dashboard/memories", params={"q": "which package manager does the build use?", "session": "web"}).text
    )
    assert found[0] == pnpm and in_web and set(in_web) <= {in_session, own}


def test_memory_content_is_escaped(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        _add(api, "<script>alert('x')</script> & <b>bold</b>")
    page = me.get("/dashboard/memories").text
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;" in page


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
