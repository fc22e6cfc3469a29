"""HEAD answers as GET does, without the body: uptime checks, load balancers and `curl -I` use it."""

from __future__ import annotations

from tests.harness import RunningServer, make_account


def test_head_on_a_public_page_answers_the_status_and_headers_of_get_without_the_body(api: RunningServer) -> None:
    with api.client() as http:
        for path in ("/healthz", "/readyz", "/login", "/docs"):
            got, head = http.get(path), http.head(path)
            assert head.status_code == got.status_code == 200, path
            assert head.content == b"", path
            assert head.headers["content-type"] == got.headers["content-type"], path
            assert int(head.headers["content-length"]) > 0, path
        # Where the body does not change from one request to the next (readiness carries timings), the length is GET's.
        for path in ("/healthz", "/docs"):
            assert http.head(path).headers["content-length"] == http.get(path).headers["content-length"], path


def test_head_on_an_api_route_is_authenticated_as_get_is(api: RunningServer) -> None:
    me = make_account(api)
    with api.client() as anonymous:
        assert anonymous.head("/v1/memories").status_code == 401
    with api.client(me.key) as http:
        assert http.post("/v1/memories", json={"content": "HEAD is GET without the body"}).status_code == 201
        got, head = http.get("/v1/memories"), http.head("/v1/memories")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == got.headers["content-length"]


def test_head_where_get_is_not_allowed_is_refused_and_allow_names_head_beside_get(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        refused = http.head("/v1/memories/search")
        assert refused.status_code == 405
        assert set(refused.headers["allow"].split(", ")) == {"OPTIONS", "POST"}
        assert set(http.options("/v1/memories").headers["allow"].split(", ")) >= {"GET", "HEAD", "POST"}
        assert "HEAD" in http.put("/healthz").headers["allow"].split(", ")


def test_head_on_an_event_stream_sends_its_headers_and_ends(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:  # its 30 s timeout: only a stream that HEAD did not end would reach it
        head = http.head("/v1/sessions/web/events")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-type"].startswith("text/event-stream")
        # The server went on serving this connection: the stream did not keep it.
        assert http.get("/healthz").status_code == 200


def test_head_on_the_mcp_endpoint_is_left_to_the_mcp_transport(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        head = http.head(f"/mcp/v2/claude-code/{me.user_id}")
        assert head.status_code == 405  # a GET here would have opened the session's event stream
