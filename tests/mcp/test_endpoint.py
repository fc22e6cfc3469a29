"""The HTTP edge of /mcp/v2, with raw POSTs: Origin, credentials, ids, session binding, JSON-RPC errors, revisions."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.harness import RunningServer, add_key, make_account
from tests.mcp.conftest import mcp_url, session_id

ACCEPT = "application/json, text/event-stream"


def initialize(version: str = "2025-11-25", request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }


def post(url: str, body: Any, key: str | None, *, session: str | None = None, **headers: str) -> httpx.Response:
    sent = {"Accept": ACCEPT, "Content-Type": "application/json", **headers}
    if key:
        sent["Authorization"] = f"Bearer {key}"
    if session:
        sent["Mcp-Session-Id"] = session
    content = body if isinstance(body, str | bytes) else None
    return httpx.post(url, content=content, json=None if content is not None else body, headers=sent, timeout=30)


def open_session(url: str, key: str) -> str:
    """Initialize a stateful session and complete the handshake; returns its id."""
    response = post(url, initialize(), key)
    assert response.status_code == 200, response.text
    sid = response.headers["mcp-session-id"]
    done = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, key, session=sid)
    assert done.status_code == 202, done.text
    return sid


def list_tools(request_id: int = 2) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_handshake_revisions_initialize(api: RunningServer, version: str) -> None:
    me = make_account(api)
    response = post(mcp_url(api, me.user_id), initialize(version), me.key)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["protocolVersion"] == version
    assert result["capabilities"]["tools"] is not None
    assert result["serverInfo"]["name"] == "engram"


def test_stateless_revision_2026_07_28_discovers_and_lists_tools(api: RunningServer) -> None:
    me = make_account(api)
    url = mcp_url(api, session_id(me.user_id, "web", "a"))
    envelope = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }
    headers = {"MCP-Protocol-Version": "2026-07-28"}
    discover = post(
        url,
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": envelope},
        me.key,
        **headers,
        **{"Mcp-Method": "server/discover"},
    )
    assert discover.status_code == 200, discover.text
    assert "2026-07-28" in discover.json()["result"]["supportedVersions"]
    assert "mcp-session-id" not in discover.headers
    listed = post(
        url,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": envelope},
        me.key,
        **headers,
        **{"Mcp-Method": "tools/list"},
    )
    assert listed.status_code == 200, listed.text
    assert listed.json()["result"]["tools"][0]["name"] == "session_status"


@pytest.mark.parametrize("suffix", ["", "/"])
def test_trailing_slash_and_encoded_client_name(api: RunningServer, suffix: str) -> None:
    me = make_account(api)
    url = mcp_url(api, me.user_id, "claude code") + suffix
    assert "claude%20code" in url
    sid = open_session(url, me.key)
    listed = post(url, list_tools(), me.key, session=sid)
    assert listed.status_code == 200 and listed.json()["result"]["tools"]


def test_missing_or_bad_key_is_401_with_challenge(api: RunningServer) -> None:
    me = make_account(api)
    url = mcp_url(api, me.user_id)
    for key in (None, "eng_not-a-real-key"):
        response = post(url, initialize(), key)
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["error"]["message"]


def test_another_users_key_is_403(api: RunningServer) -> None:
    me, other = make_account(api), make_account(api)
    for target in (me.user_id, session_id(me.user_id, "web", "a")):
        response = post(mcp_url(api, target), initialize(), other.key)
        assert response.status_code == 403, response.text
        assert response.json()["error"]["data"]["code"] == "forbidden"


@pytest.mark.parametrize(
    ("bad_id", "named"),
    [
        ("alice__sesion__web__a", "'session'"),
        ("alice__session__web", "agent part"),
        ("alice__session____a", "session name"),
        ("alice__session__web__a b", "agent name"),
        ("al!ce", "user part"),
    ],
)
def test_malformed_id_is_400_naming_the_part(api: RunningServer, bad_id: str, named: str) -> None:
    me = make_account(api)
    response = post(mcp_url(api, bad_id.replace("alice", me.user_id).replace(" ", "%20")), initialize(), me.key)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["data"]["code"] == "invalid_user_id"
    assert named in error["message"], error["message"]


def test_wrong_path_shape_is_404(api: RunningServer) -> None:
    me = make_account(api)
    response = post(f"{api.base_url}/mcp/v2/{me.user_id}", initialize(), me.key)
    assert response.status_code == 404
    assert "/mcp/v2/<client_name>/<user_id>" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("https://evil.example", 403),
        ("null", 403),
        ("http://localhost:6274", 200),
        ("http://127.0.0.1:3000", 200),
    ],
)
def test_origin_is_checked(api: RunningServer, origin: str, status: int) -> None:
    me = make_account(api)
    response = post(mcp_url(api, me.user_id), initialize(), me.key, Origin=origin)
    assert response.status_code == status, response.text


def test_public_base_url_origin_is_allowed(api: RunningServer) -> None:
    me = make_account(api)
    origin = api.settings.resolved_public_base_url
    assert post(mcp_url(api, me.user_id), initialize(), me.key, Origin=origin).status_code == 200


def test_session_id_is_bound_to_url_and_key(api: RunningServer) -> None:
    me = make_account(api)
    second_key = add_key(api, me.user_id)
    url = mcp_url(api, session_id(me.user_id, "web", "a"))
    sid = open_session(url, me.key)
    assert post(url, list_tools(), me.key, session=sid).status_code == 200
    elsewhere = [
        (mcp_url(api, session_id(me.user_id, "web", "b")), me.key),
        (mcp_url(api, me.user_id), me.key),
        (mcp_url(api, session_id(me.user_id, "web", "a"), "cursor"), me.key),
        (url, second_key.key),
    ]
    for other_url, key in elsewhere:
        response = post(other_url, list_tools(), key, session=sid)
        assert response.status_code == 404, (other_url, response.text)
    assert post(url, list_tools(), me.key, session=sid).status_code == 200
    ended = httpx.delete(url, headers={"Authorization": f"Bearer {me.key}", "Mcp-Session-Id": sid})
    assert ended.status_code == 200
    assert post(url, list_tools(), me.key, session=sid).status_code == 404


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("[1, 2]", "no batches"),
        ("null", "not NoneType"),
        ("123", "not int"),
        ('"str"', "not str"),
        ('{"jsonrpc": "1.0", "id": 1, "method": "ping"}', '"jsonrpc" must be "2.0"'),
        ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', '"id" must be a string or an integer'),
        ('{"jsonrpc": "2.0", "id": 1, "method": 7}', '"method" must be a non-empty string'),
        ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}', '"params" must be an object'),
        ('{"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}', 'one of "result" or "error"'),
    ],
)
def test_a_malformed_message_is_an_invalid_request_naming_the_wrong_part(
    api: RunningServer, body: str, says: str
) -> None:
    me = make_account(api)
    response = post(mcp_url(api, me.user_id), body, me.key)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == -32600 and says in error["message"], error
    assert "pydantic" not in response.text


@pytest.mark.parametrize(
    ("method", "params", "says"),
    [
        ("initialize", {}, "params.protocolVersion"),
        ("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}, "params.clientInfo"),
        ("tools/call", {}, "params.name"),
        ("tools/call", {"name": "search_memory", "arguments": "x"}, "params.arguments must be an object"),
        ("resources/read", {}, "params.uri"),
        ("logging/setLevel", {"level": "bogus"}, "params.level must be one of"),
    ],
)
def test_bad_params_are_invalid_params_naming_the_field(
    api: RunningServer, method: str, params: dict[str, Any], says: str
) -> None:
    me = make_account(api)
    response = post(mcp_url(api, me.user_id), {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}, me.key)
    assert response.status_code == 200, response.text
    assert response.json()["id"] == 7
    error = response.json()["error"]
    assert error["code"] == -32602 and error["message"].startswith(f"{method}: ") and says in error["message"]


def test_an_oversize_body_is_413_as_a_json_rpc_error(api: RunningServer) -> None:
    me = make_account(api)
    body = {**list_tools(9), "params": {"padding": "x" * (api.settings.max_body_bytes + 1)}}
    response = post(mcp_url(api, me.user_id), body, me.key)
    assert response.status_code == 413
    assert response.json()["id"] is None and "over the limit" in response.json()["error"]["message"]


def test_protocol_errors_are_json_rpc_errors_never_500(api: RunningServer) -> None:
    me = make_account(api)
    url = mcp_url(api, me.user_id)
    parse = post(url, "{not json", me.key)
    assert parse.status_code == 400 and parse.json()["error"]["code"] == -32700
    call = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search_memory", "arguments": '
    for constant in ("NaN", "Infinity", "-Infinity"):
        nan = post(url, call + '{"query": "q", "threshold": ' + constant + "}}}", me.key)
        assert nan.status_code == 400 and nan.json()["error"]["code"] == -32700, nan.text
        assert f"{constant} is not a JSON number" in nan.json()["error"]["message"]
    no_method = post(url, {"jsonrpc": "2.0", "id": 1}, me.key)
    assert no_method.status_code == 400 and no_method.json()["error"]["code"] == -32600
    assert no_method.json()["id"] == 1 and '"method"' in no_method.json()["error"]["message"]
    not_object = post(url, "[1, 2]", me.key)
    assert 400 <= not_object.status_code < 500 and "error" in not_object.json()

    sid = open_session(url, me.key)
    unknown_method = post(url, {"jsonrpc": "2.0", "id": 3, "method": "memories/teleport"}, me.key, session=sid)
    assert unknown_method.status_code == 200 and unknown_method.json()["error"]["code"] == -32601
    unknown_tool = post(
        url,
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "fly", "arguments": {}}},
        me.key,
        session=sid,
    )
    assert unknown_tool.status_code == 200
    assert unknown_tool.json()["error"]["code"] == -32602 and "fly" in unknown_tool.json()["error"]["message"]
    bad_params = post(url, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {}}, me.key, session=sid)
    assert bad_params.status_code == 200 and bad_params.json()["error"]["code"] == -32602


@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"]
)
def test_methods_the_stateless_revision_removed_are_not_found_under_it(api: RunningServer, method: str) -> None:
    me = make_account(api)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"_meta": meta, "protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "x"}}
    headers = {
        "Authorization": f"Bearer {me.key}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
    }
    response = httpx.post(
        mcp_url(api, me.user_id), json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params}, headers=headers
    )
    assert response.status_code == 404, response.text
    assert response.json()["id"] == 7 and response.json()["error"]["code"] == -32601
    # The same method without the stateless envelope is the handshake era's, and works as it always did.
    if method == "initialize":
        older = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}
        headers.pop("MCP-Protocol-Version")
        legacy = httpx.post(
            mcp_url(api, me.user_id),
            json={"jsonrpc": "2.0", "id": 8, "method": method, "params": older},
            headers=headers,
        )
        assert legacy.status_code == 200 and legacy.json()["result"]["protocolVersion"] == "2025-11-25"


def test_a_protocol_version_the_server_does_not_speak_is_refused_naming_those_it_does(api: RunningServer) -> None:
    me = make_account(api)
    url = mcp_url(api, me.user_id)
    refused = post(url, list_tools(5), me.key, **{"MCP-Protocol-Version": "1999-01-01"})
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert "MCP-Protocol-Version '1999-01-01' is not supported" in error["message"]
    assert "2025-06-18" in error["message"] and refused.json()["id"] == 5
    sid = open_session(url, me.key)
    spoken = post(url, list_tools(6), me.key, session=sid, **{"MCP-Protocol-Version": "2025-06-18"})
    assert spoken.status_code == 200 and "result" in spoken.json(), spoken.text
