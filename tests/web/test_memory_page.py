"""One memory's page (markdown, facts, history with differences, edit within the API's rules) and the browser's bulk
delete and re-tag, over HTTP as a browser sends them."""

from __future__ import annotations

import html as html_lib
import json
import re
from collections.abc import Callable
from typing import Any

import httpx

from app.memories.schemas import MAX_TAGS
from tests.harness import RunningServer
from tests.web.conftest import Browser, field_error, form_error

HOSTILE = (
    '# Title\n\n<script>alert(1)</script> <img src=x onerror=alert(2)> <a href="javascript:alert(3)">x</a>\n\n'
    "[js](javascript:alert(4)) [data](data:text/html,<b>5</b>) [ok](https://example.test/a?b=1&c=2) **bold** ![pic](https://example.test/p.png)\n\n"
    "```\n<iframe src=//evil></iframe>\n```\n"
)


def _add(api: httpx.Client, content: str, **fields: Any) -> str:
    response = api.post("/v1/memories", json={"content": content, **fields})
    assert response.status_code == 201, response.text
    memory_id: str = response.json()["id"]
    return memory_id


def _body(page: str) -> str:
    match = re.search(r'<div class="markdown" id="memory-body">(.*?)</div>', page, re.S)
    assert match, page
    return match.group(1)


def test_the_memory_page_renders_safe_markdown_and_every_fact(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        memory_id = _add(
            api, HOSTILE, tags=["ops"], metadata={"ticket": "T-1"}, session="web", agent="claude", scope="agent"
        )
    page = me.get(f"/dashboard/memories/{memory_id}")
    assert page.status_code == 200, page.text
    body = _body(page.text)
    assert "<h1>Title</h1>" in body and "<strong>bold</strong>" in body
    # Nothing the user wrote becomes markup: tags stay text, and only the https link is a link.
    assert re.findall(r"<(script|img|iframe|a href=\"javascript|b>)", body) == []
    # An image is not loaded (the page loads nothing from elsewhere): it shows as a link to the picture instead,
    # named as an image, with no "!" left over from its markdown.
    assert re.findall(r'href="([^"]*)"', body) == ["https://example.test/a?b=1&amp;c=2", "https://example.test/p.png"]
    assert ">image: pic</a>" in body and "!<a" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "&lt;iframe src=//evil&gt;" in body
    facts = html_lib.unescape(re.sub(r"<[^>]+>", " ", page.text.split('id="facts"')[1].split("</section>")[0]))
    for fact in ("agent", "claude", "web", "#ops", "ticket", '"T-1"', "Created", "Updated", "public"):
        assert fact in facts, fact
    # The scope can be widened from agent to session, role or user, never moved elsewhere.
    options = re.findall(r'<option value="([^"]+)"', page.text.split('id="f-scope"')[1].split("</select>")[0])
    assert options == ["agent", "session", "role", "user"]


def test_a_document_chunk_shows_its_source_once(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        doc = {"path": "docs/ops.md", "content": "# Ops\n\n## Backups\n\nBackups run nightly at 02:00.\n"}
        assert api.put("/v1/sessions/site/documents", json=doc).status_code == 200
        memory_id = api.get("/v1/memories", params={"session": "site"}).json()["memories"][0]["id"]
    listing = me.get("/dashboard/memories").text
    assert listing.count("docs/ops.md &gt; Ops &gt; Backups") == 1
    page = me.get(f"/dashboard/memories/{memory_id}").text
    assert "docs/ops.md &gt; Ops &gt; Backups" not in _body(page)
    assert "a chunk of an indexed document" in page


def test_editing_goes_through_the_memory_rules_and_shows_in_the_history(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        memory_id = _add(api, "line one\nline two\nline three", tags=["a"], session="web", agent="claude")
        url = f"/dashboard/memories/{memory_id}"

        saved = me.submit(url, url + "/edit", content="line one\nline 2\nline three", tags="a, b", scope="user")
        assert saved.status_code == 303
        page = me.follow(saved).text
        assert "Memory saved (content, tags, scope changed)." in page
        assert re.findall(r'<span class="(removed|added)">[-+] ([^<]*)</span>', page) == [
            ("removed", "line two"),
            ("added", "line 2"),
        ]
        assert "scope: session -&gt; user" in page
        stored = api.get(f"/v1/memories/{memory_id}").json()
        assert (stored["content"], stored["tags"], stored["scope"]) == (
            "line one\nline 2\nline three",
            ["a", "b"],
            "user",
        )
        events = [e["event"] for e in api.get(f"/v1/memories/{memory_id}/history").json()["history"]]
        assert events == ["ADD", "UPDATE", "PROMOTE"]

        # Narrowing is refused by the service's rule, named next to the field; nothing changes.
        refused = me.submit(url, url + "/edit", content=stored["content"], tags="a, b", scope="session")
        assert refused.status_code == 409  # the memory's state refuses it, as over the API
        assert "scope user -> session is refused (narrowing)" in (field_error(refused.text, "scope") or "")
        blank = me.submit(url, url + "/edit", content="   ", tags="a, b", scope="user")
        assert blank.status_code == 422 and "content" in (
            form_error(blank.text) or field_error(blank.text, "content") or ""
        )
        bad_scope = me.submit(url, url + "/edit", content=stored["content"], tags="a, b", scope="everyone")
        assert bad_scope.status_code == 422
        assert api.get(f"/v1/memories/{memory_id}").json()["scope"] == "user"
        unchanged = me.submit(url, url + "/edit", content=stored["content"], tags="a, b", scope="user")
        assert "Nothing changed." in me.follow(unchanged).text

    assert me.post(url + "/edit", {"_csrf": "forged", "content": "x"}).status_code == 403
    stranger = browser().signup()
    assert stranger.get(url).status_code == 404
    assert stranger.submit("/dashboard", url + "/edit", content="mine now").status_code == 404


def test_bulk_delete_and_retag(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    other = browser().signup()
    with me.api(me.create_key()) as api, other.api(other.create_key()) as their_api:
        mine = [_add(api, f"note {n}", tags=["old"]) for n in range(4)]
        theirs = _add(their_api, "not yours")

        def bulk(*ids: str, **fields: str) -> httpx.Response:
            data: dict[str, Any] = {"_csrf": me.csrf("/dashboard/memories"), "ids": list(ids), **fields}
            return me.http.post("/dashboard/memories/bulk", data=data)

        tagged = bulk(*mine[:3], action="tag", tag="picked")
        assert tagged.status_code == 303 and "3 of 3 selected tagged #picked." in me.follow(tagged).text
        untagged = bulk(*mine[:2], action="untag", tag="old")
        assert untagged.status_code == 303
        tags = {m["id"]: m["tags"] for m in api.get("/v1/memories").json()["memories"]}
        assert tags == {mine[0]: ["picked"], mine[1]: ["picked"], mine[2]: ["old", "picked"], mine[3]: ["old"]}
        counts = me.get("/dashboard/memories").text
        assert re.search(r'data-count-tag="picked">#picked</a> <span class="n">3</span>', counts)

        # All or none: one id that is not the user's and nothing is deleted.
        assert bulk(mine[0], theirs, action="delete").status_code == 404
        assert len(api.get("/v1/memories").json()["memories"]) == 4
        assert their_api.get(f"/v1/memories/{theirs}").status_code == 200
        deleted = bulk(mine[0], mine[1], action="delete")
        assert "2 memories deleted." in me.follow(deleted).text
        assert {m["id"] for m in api.get("/v1/memories").json()["memories"]} == set(mine[2:])

        assert bulk(mine[2], action="explode").status_code == 422
        assert bulk(mine[2], action="tag", tag="").status_code == 422
        assert bulk(*[f"id-{n}" for n in range(201)], action="delete").status_code == 422
        assert "Nothing was selected" in me.follow(bulk(action="delete")).text
    forged = me.http.post("/dashboard/memories/bulk", data={"_csrf": "forged", "ids": [mine[2]], "action": "delete"})
    assert forged.status_code == 403


def _textarea(page: str, name: str) -> str:
    match = re.search(rf'<textarea id="f-{name}"[^>]*>([^<]*)</textarea>', page)
    assert match, page
    return html_lib.unescape(match.group(1))


def test_metadata_is_edited_as_a_json_object_within_the_limits(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        memory_id = _add(api, "deploys go through the staging bucket", metadata={"ticket": "T-1", "priority": 2})
        url = f"/dashboard/memories/{memory_id}"
        # Pre-filled as the memory holds it, pretty-printed.
        assert _textarea(me.get(url).text, "metadata") == '{\n  "priority": 2,\n  "ticket": "T-1"\n}'

        def edit(metadata: str) -> httpx.Response:
            fields = {"content": "deploys go through the staging bucket", "tags": "", "scope": "user"}
            return me.submit(url, url + "/edit", **fields, metadata=metadata)

        saved = edit('{"ticket": "T-2", "done": true, "owner": null}')
        assert "Memory saved (metadata changed)." in me.follow(saved).text
        assert api.get(f"/v1/memories/{memory_id}").json()["metadata"] == {"ticket": "T-2", "done": True, "owner": None}
        events = [e["event"] for e in api.get(f"/v1/memories/{memory_id}/history").json()["history"]]
        assert events == ["ADD", "UPDATE"]

        refused = {
            "{ticket: T-3}": "metadata is not valid JSON: Expecting property name enclosed in double quotes "
            "(line 1, column 2)",
            "[1, 2]": 'metadata must be a JSON object, such as {"ticket": "T-1"}',
            '"T-3"': 'metadata must be a JSON object, such as {"ticket": "T-1"}',
            json.dumps({f"k{n}": n for n in range(51)}): "metadata has 51 keys; at most 50",
            '{"a.b": 1}': "metadata key 'a.b' must be 1-64 characters without '.', '\"' or '\\'",
            '{"a": {"b": 1}}': "metadata value of 'a' must be a string, number, boolean or null",
            '{"n": 1e400}': "metadata value of 'n' must be a finite number",
            json.dumps({"note": "x" * 4000}): "metadata is 4012 characters as JSON; at most 4000",
        }
        for text, error in refused.items():
            response = edit(text)
            assert response.status_code == 422, text
            assert field_error(response.text, "metadata") == error, text
            assert _textarea(response.text, "metadata") == text  # what was typed stays, to be mended
        assert api.get(f"/v1/memories/{memory_id}").json()["metadata"] == {"ticket": "T-2", "done": True, "owner": None}

        # A form without the field (as the page was before it had one) leaves the metadata alone.
        unchanged = me.submit(
            url, url + "/edit", content="deploys go through the staging bucket", tags="", scope="user"
        )
        assert "Nothing changed." in me.follow(unchanged).text
        assert api.get(f"/v1/memories/{memory_id}").json()["metadata"] == {"ticket": "T-2", "done": True, "owner": None}
        # Emptied, it means no metadata.
        assert "Memory saved (metadata changed)." in me.follow(edit("  ")).text
        assert api.get(f"/v1/memories/{memory_id}").json()["metadata"] == {}
        assert _textarea(me.get(url).text, "metadata") == "{}"


def test_a_bulk_retag_changes_every_memory_or_none(browser: Callable[[], Browser], api: RunningServer) -> None:
    me, other = browser().signup(), browser().signup()
    with me.api(me.create_key()) as http, other.api(other.create_key()) as their_http:
        notes = [_add(http, f"harbour note {n}", tags=["old"]) for n in range(3)]
        full = _add(http, "harbour note with every tag", tags=[f"t{n}" for n in range(MAX_TAGS)])
        unindexed = _add(http, "harbour note the index lost", tags=["old"])
        theirs = _add(their_http, "harbour note of another account", tags=["old"])

        def bulk(*ids: str) -> httpx.Response:
            data = {"_csrf": me.csrf("/dashboard/memories"), "ids": list(ids), "action": "tag", "tag": "picked"}
            return me.http.post("/dashboard/memories/bulk", data=data)

        def stored() -> dict[str, list[str]]:
            return {m["id"]: m["tags"] for m in http.get("/v1/memories").json()["memories"]}

        def found_by_tag() -> list[str]:
            query = {"query": "harbour note", "tags": ["picked"], "threshold": 0, "limit": 20}
            return sorted(h["id"] for h in http.post("/v1/memories/search", json=query).json()["results"])

        def events(memory_id: str) -> list[str]:
            return [e["event"] for e in http.get(f"/v1/memories/{memory_id}/history").json()["history"]]

        before = stored()

        def nothing_changed() -> None:
            assert stored() == before and found_by_tag() == []
            assert all(events(n) == ["ADD"] for n in notes)

        # One memory holds the most tags there can be: none is tagged, and the error names it.
        too_many = bulk(*notes, full)
        assert too_many.status_code == 422
        message = f"memory {full} already has {MAX_TAGS} tags, the most a memory can have; nothing was tagged"
        assert message in html_lib.unescape(too_many.text)
        nothing_changed()
        # One id is another account's: as unknown as a missing one, and nothing is tagged.
        not_mine = bulk(*notes, theirs)
        assert not_mine.status_code == 404 and f"no memory {theirs}; nothing was tagged" in not_mine.text
        nothing_changed()
        assert their_http.get(f"/v1/memories/{theirs}").json()["tags"] == ["old"]
        # The index lost the last one: its write fails after the others reached the index, which is put back.
        api.run(api.container.memories.engine.purge([unindexed]))
        lost = bulk(*notes, unindexed)
        assert lost.status_code == 404 and "nothing was tagged" in lost.text
        nothing_changed()

        tagged = bulk(*notes)
        assert tagged.status_code == 303 and "3 of 3 selected tagged #picked." in me.follow(tagged).text
        assert stored() == {**before, **{n: ["old", "picked"] for n in notes}}
        assert found_by_tag() == sorted(notes)
        assert all(events(n) == ["ADD", "UPDATE"] for n in notes)
