"""Input an outside audit sent that once answered 500: each is now a precise 4xx, and nothing is stored."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from tests.harness import RunningServer, make_account

JSON = {"content-type": "application/json"}


def _nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


@pytest.mark.parametrize("path", ["/v1/memories", "/v1/memories/search"])
def test_invalid_utf8_in_a_json_body_is_a_400_naming_the_encoding(api: RunningServer, path: str) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        response = http.post(path, content=b'{"content":"\xff","query":"\xff"}', headers=JSON)
        assert response.status_code == 400, response.text
        assert "UTF-8" in response.json()["error"]["message"]
        assert http.get("/v1/memories").json()["memories"] == []


@pytest.mark.parametrize("path", ["/v1/memories", "/v1/memories/search", "/v1/sessions/web/claims?agent=a"])
@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b"", 422, "the request has no body; send a JSON object"),
        (b"[]", 422, "object"),
        (b'"text"', 422, "object"),
        (b'{"query": ', 400, "JSON is malformed: the body ends before the JSON value does"),
        (b'{"content": "\\ud800"}', 400, "surrogate"),
        (b'{"content": "\\ud800", "query": "x"}', 400, "surrogate"),
        (b'{"content": "x", "metadata": {"n": 1' + b"0" * 5000 + b"}}", 400, "whole numbers are kept to 64 bits"),
        (b'{"content": "x", "metadata": {"n": 1e400}}', 400, "numbers are kept to 64-bit floats"),
    ],
)
def test_an_empty_truncated_or_non_object_body_says_so_in_words_a_client_knows(
    api: RunningServer, path: str, body: bytes, status: int, words: str
) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        response = http.post(path, content=body, headers=JSON)
        assert response.status_code == status, response.text
        message = response.json()["error"]["message"]
        assert words in message and "'data'" not in message and "SearchIn" not in message, message
        assert http.get("/v1/memories").json()["memories"] == []


@pytest.mark.parametrize(
    ("path", "field"),
    [("/v1/memories", "metadata"), ("/v1/memories/search", "metadata"), ("/v1/sessions/web/claims", "file_paths")],
)
def test_json_nested_too_deep_is_a_clear_4xx_at_any_depth(api: RunningServer, path: str, field: str) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        for depth in (500, 1000, 100_000):
            body = f'{{"content": "x", "query": "x", "agent": "a", "{field}": {_nested(depth)}}}'
            response = http.post(path, content=body.encode(), headers=JSON)
            assert response.status_code in (400, 413, 422), f"{depth}: {response.status_code} {response.text[:200]}"
            assert response.json()["error"]["message"], depth
        assert http.get("/v1/memories").json()["memories"] == []


def test_a_cursor_with_a_naive_time_is_refused_as_a_bad_cursor(api: RunningServer) -> None:
    me = make_account(api)
    naive = base64.urlsafe_b64encode(b"2026-01-01T00:00:00|x").decode()
    assert naive == "MjAyNi0wMS0wMVQwMDowMDowMHx4"
    with api.client(me.key) as http:
        response = http.get("/v1/memories", params={"cursor": naive})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["message"].startswith("cursor")


NUL_AND_FRIENDS = {
    "a NUL in a tag": {"content": "x", "tags": ["a\x00b"]},
    "a NUL in a metadata key": {"content": "x", "metadata": {"k\x00": 1}},
    "a NUL in a metadata value": {"content": "x", "metadata": {"k": "v\x00"}},
    "a dot in a metadata key": {"content": "x", "metadata": {"a.b": 1}},
    "a 900 KB metadata value": {"content": "x", "metadata": {"k": "v" * 900_000}},
    "metadata over its size bound": {"content": "x", "metadata": {f"k{i}": "v" * 100 for i in range(45)}},
}


@pytest.mark.parametrize("case", list(NUL_AND_FRIENDS))
def test_one_input_rule_for_every_stored_text_field_over_rest(sqlite_big_body: RunningServer, case: str) -> None:
    me = make_account(sqlite_big_body)
    body = NUL_AND_FRIENDS[case]
    with sqlite_big_body.client(me.key) as http:
        response = http.post("/v1/memories", json=body)
        assert response.status_code == 422, response.text[:300]
        assert "metadata" in response.text or "tags" in response.text
        assert http.get("/v1/memories").json()["memories"] == []
        patched = http.post("/v1/memories", json={"content": "fine"}).json()
        update = {k: v for k, v in body.items() if k != "content"}
        assert http.patch(f"/v1/memories/{patched['id']}", json=update).status_code == 422
        assert http.get(f"/v1/memories/{patched['id']}").json()["metadata"] == {}


def test_a_nul_in_a_change_summary_is_refused(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        response = http.post("/v1/sessions/web/changes", json={"agent": "a", "changes_summary": "done\x00"})
        assert response.status_code == 422, response.text
        assert "NUL" in response.json()["error"]["message"]
        changes = http.get("/v1/sessions/web/changes", params={"agent": "b"}).json()
    assert changes["changes"] == []


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(NUL_AND_FRIENDS))
async def test_one_input_rule_for_every_stored_text_field_over_mcp(sqlite_big_body: RunningServer, case: str) -> None:
    """The same bodies through add_memories: a tool error naming the field, never internal_error."""
    from tests.mcp.conftest import connect, session_id
    from tests.mcp.test_tools import error_text

    me = make_account(sqlite_big_body)
    body = NUL_AND_FRIENDS[case]
    async with connect(sqlite_big_body, me.key, session_id(me.user_id, "web", "a")) as client:
        result = await client.call_tool("add_memories", {"memories": [body]})
        message = error_text(result)
        assert "invalid arguments" in message and ("metadata" in message or "tags" in message), message
        assert "internal" not in message
        listed = await client.call_tool("list_memories", {})
    assert listed.structured_content == {"memories": [], "next_cursor": None}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def sqlite_big_body(embedder: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A server on SQLite (which stores anything) whose body limit lets a 900 KB value reach the rules."""
    from app.migrate import upgrade_to_head
    from tests.conftest import _settings
    from tests.harness import serve

    tmp = tmp_path_factory.mktemp("big-body")
    url = f"sqlite+aiosqlite:///{tmp / 'engram.db'}"
    upgrade_to_head(url)
    with serve(_settings(tmp, url, max_body_bytes=2_000_000), embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


@pytest.mark.parametrize("path", ["/v1/memories", "/v1/memories/search"])
def test_a_nested_metadata_value_and_a_bad_session_name_are_told_in_words(api: RunningServer, path: str) -> None:
    me = make_account(api)
    text = {"query": "x"} if "search" in path else {"content": "x"}
    with api.client(me.key) as http:
        nested = http.post(path, json={**text, "metadata": {"a": {"b": 1}}})
        assert nested.status_code in (400, 422), nested.text
        said = nested.json()["error"]["message"]
        assert "a metadata value must be a string, a number, a boolean or null" in said, said
        assert ".str" not in said and "valid integer" not in said, said
        named = http.post(path, json={**text, "session": "bad name!"})
        assert named.status_code == 422, named.text
        rule = "session: may only contain letters, digits, '.', '-' and '_', never '__'"
        assert named.json()["error"]["message"] == rule
        assert http.get("/v1/memories").json()["memories"] == []
