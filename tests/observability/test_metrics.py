"""/metrics over real HTTP: requests by route template, latency, tools, claims, memories, and the token."""

from __future__ import annotations

import uuid

import httpx
import pytest
from mcp.types import TextContent

from tests.harness import RunningServer, make_account, serve
from tests.mcp.conftest import connect, session_id
from tests.observability.conftest import label_values, scrape, value

MEMORY = "/v1/memories/{memory_id}"
MCP = "/mcp/v2/{client_name}/{user_id}"


def test_requests_are_counted_by_route_template_never_by_id(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        memory_id = http.post("/v1/memories", json={"content": "metrics use route templates"}).json()["id"]
        before = value(scrape(api), "engram_http_requests_total", method="GET", path=MEMORY, status="200")
        assert http.get(f"/v1/memories/{memory_id}").status_code == 200
        assert http.get(f"/v1/memories/{uuid.uuid4()}").status_code == 404
    text = scrape(api)
    assert value(text, "engram_http_requests_total", method="GET", path=MEMORY, status="200") == before + 1
    assert value(text, "engram_http_requests_total", method="GET", path=MEMORY, status="404") >= 1
    assert memory_id not in text and me.user_id not in text


def test_paths_no_route_matched_share_one_label(api: RunningServer) -> None:
    missing = f"/nothing-here-{uuid.uuid4().hex}"
    assert httpx.request("PROPFIND", f"{api.base_url}{missing}").status_code in (404, 405)
    assert httpx.get(f"{api.base_url}{missing}").status_code == 404
    text = scrape(api)
    assert missing not in text
    assert "<unmatched>" in label_values(text, "path")
    assert "PROPFIND" not in label_values(text, "method") and "OTHER" in label_values(text, "method")


def test_the_content_type_is_prometheus_text_with_each_parameter_once(api: RunningServer) -> None:
    response = httpx.get(f"{api.base_url}/metrics")
    kind, *parameters = [part.strip() for part in response.headers["content-type"].split(";")]
    assert kind == "text/plain"
    names = [p.split("=")[0] for p in parameters]
    assert sorted(names) == ["charset", "version"]  # a repeated one makes Go's parser (Prometheus) refuse it


def test_latency_histograms_have_buckets(api: RunningServer) -> None:
    assert httpx.get(f"{api.base_url}/healthz").status_code == 200
    text = scrape(api)
    labels = {"method": "GET", "path": "/healthz"}
    count = value(text, "engram_http_request_duration_seconds_count", **labels)
    assert count >= 1
    assert value(text, "engram_http_request_duration_seconds_bucket", le="+Inf", **labels) == count
    assert value(text, "engram_http_request_duration_seconds_bucket", le="10.0", **labels) >= 1
    buckets = [
        s for s in text.splitlines() if s.startswith("engram_http_request_duration_seconds_bucket{") and "/healthz" in s
    ]
    assert len(buckets) >= 10


def test_memories_added_and_deleted_are_counted(api: RunningServer) -> None:
    me = make_account(api)
    before = scrape(api)
    with api.client(me.key) as http:
        created = http.post("/v1/memories", json={"memories": [{"content": "one fact"}, {"content": "two facts"}]})
        assert created.status_code == 201, created.text
        first = created.json()["results"][0]["id"]
        assert http.delete(f"/v1/memories/{first}").status_code == 200
    after = scrape(api)
    assert value(after, "engram_memories_added_total") - value(before, "engram_memories_added_total") >= 2
    assert value(after, "engram_memories_deleted_total") - value(before, "engram_memories_deleted_total") >= 1


def test_claims_are_counted_by_outcome(api: RunningServer) -> None:
    me = make_account(api)
    before = scrape(api)
    with api.client(me.key) as http:
        granted = http.post("/v1/sessions/obs/claims", json={"agent": "alice", "file_paths": ["src/a.py"]})
        assert granted.json()["granted"] is True
        refused = http.post("/v1/sessions/obs/claims", json={"agent": "bob", "file_paths": ["src/a.py"]})
        assert refused.json()["granted"] is False
    after = scrape(api)
    for outcome in ("granted", "conflict"):
        grew = value(after, "engram_claims_total", outcome=outcome) - value(
            before, "engram_claims_total", outcome=outcome
        )
        assert grew >= 1, outcome


@pytest.mark.anyio
async def test_mcp_tool_calls_are_counted_by_tool_and_outcome(api: RunningServer) -> None:
    me = make_account(api)
    before = scrape(api)
    async with connect(api, me.key, session_id(me.user_id, "obs", "research")) as client:
        assert not (await client.call_tool("list_topics", {})).is_error
        bad = await client.call_tool("add_memories", {"memories": "not a list"})
        assert bad.is_error and isinstance(bad.content[0], TextContent)
        during = scrape(api)
        assert value(during, "engram_mcp_sessions") >= 1
    after = scrape(api)

    def grew(tool: str, outcome: str) -> float:
        labels = {"tool": tool, "outcome": outcome}
        return value(after, "engram_mcp_tool_calls_total", **labels) - value(
            before, "engram_mcp_tool_calls_total", **labels
        )

    assert grew("list_topics", "ok") == 1
    assert grew("add_memories", "tool_error") == 1
    assert value(after, "engram_mcp_tool_call_duration_seconds_count", tool="list_topics") >= 1
    assert value(after, "engram_http_requests_total", method="POST", path=MCP, status="200") >= 2
    assert me.user_id not in after


def test_metrics_token_is_required_when_set(
    pg_database_url: str, embedder: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.conftest import _settings

    token = "metrics-" + uuid.uuid4().hex
    settings = _settings(tmp_path_factory.mktemp("metrics-token"), pg_database_url, metrics_token=token)
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        url = f"{server.base_url}/metrics"
        assert httpx.get(url).status_code == 401
        assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(url, headers={"Authorization": token}).status_code == 401
        assert "engram_http_requests_total" in scrape(server, token)


def test_request_ids_are_echoed_when_sane_and_replaced_when_not(api: RunningServer) -> None:
    health = f"{api.base_url}/healthz"
    assert httpx.get(health, headers={"X-Request-ID": "client-42.a_b"}).headers["x-request-id"] == "client-42.a_b"
    for bad in ("a" * 129, "has space", "semi;colon", ""):
        echoed = httpx.get(health, headers={"X-Request-ID": bad}).headers["x-request-id"]
        assert echoed != bad and len(echoed) == 32
    first = httpx.get(health).headers["x-request-id"]
    assert first != httpx.get(health).headers["x-request-id"]
