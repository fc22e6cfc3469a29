"""Rate limits and memory quotas: per key and per user, 429 with Retry-After on REST, a JSON-RPC error on MCP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import _settings
from tests.harness import RunningServer, add_key, make_account, serve
from tests.mcp.conftest import connect

SECRET = "quota-secret-" + uuid.uuid4().hex
SMALL = {"free": {"requests_per_minute": 8, "key_requests_per_minute": 5, "max_memories": 3}}


@pytest.fixture(scope="module")
def limited(
    pg_database_url: str, redis_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    settings = _settings(
        tmp_path_factory.mktemp("quota"), pg_database_url, redis_url=redis_url, plans=SMALL, secret_key=SECRET
    )
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


@pytest.fixture(scope="module")
def limited_twin(
    pg_database_url: str, redis_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A second instance on the same Redis: limits are shared, not per instance."""
    settings = _settings(
        tmp_path_factory.mktemp("quota2"), pg_database_url, redis_url=redis_url, plans=SMALL, secret_key=SECRET
    )
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def _burst(server: RunningServer, key: str, n: int) -> list[httpx.Response]:
    with server.client(key) as http:
        return [http.get("/v1/topics") for _ in range(n)]


def test_a_key_over_its_limit_gets_429_with_retry_after(limited: RunningServer) -> None:
    me = make_account(limited)
    responses = _burst(limited, me.key, 7)
    assert [r.status_code for r in responses[:5]] == [200] * 5
    refused = responses[5]
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json()["error"]["code"] == "rate_limited"
    assert "5 requests per minute" in refused.json()["error"]["message"]


def test_the_user_limit_spans_all_keys(limited: RunningServer) -> None:
    me = make_account(limited)
    second = add_key(limited, me.user_id)
    first = _burst(limited, me.key, 5)
    assert all(r.status_code == 200 for r in first)
    more = _burst(limited, second.key, 4)
    # 8 a minute for the user: three more pass on the fresh key, then the account is out.
    assert [r.status_code for r in more] == [200, 200, 200, 429]
    assert "account is over its limit of 8" in more[-1].json()["error"]["message"]


def test_other_users_are_not_affected(limited: RunningServer) -> None:
    noisy, quiet = make_account(limited), make_account(limited)
    _burst(limited, noisy.key, 7)
    assert _burst(limited, quiet.key, 1)[0].status_code == 200


def test_limits_are_shared_by_instances_through_redis(limited: RunningServer, limited_twin: RunningServer) -> None:
    me = make_account(limited)
    assert all(r.status_code == 200 for r in _burst(limited, me.key, 3))
    twin = _burst(limited_twin, me.key, 3)
    assert [r.status_code for r in twin] == [200, 200, 429]


def test_the_memory_quota_refuses_writes_beyond_the_plan_and_stores_nothing(limited: RunningServer) -> None:
    me = make_account(limited)
    with limited.client(me.key) as http:
        assert http.post("/v1/memories", json={"memories": [{"content": f"m{i}"} for i in range(3)]}).status_code == 201
        over = http.post("/v1/memories", json={"content": "one too many"})
    assert over.status_code == 429
    assert over.json()["error"]["code"] == "quota_exceeded"
    assert "stores at most 3 memories" in over.json()["error"]["message"]
    assert over.headers["retry-after"]
    other_key = add_key(limited, me.user_id)
    with limited.client(other_key.key) as http:
        assert len(http.get("/v1/memories").json()["memories"]) == 3


def test_a_deleted_memory_frees_its_place_in_the_quota_at_once(limited: RunningServer) -> None:
    """The server remembers the count a user's last write saw; a delete since must not leave that count refusing."""
    me = make_account(limited)
    with limited.client(me.key) as http:
        created = http.post("/v1/memories", json={"memories": [{"content": f"m{i}"} for i in range(3)]})
        assert created.status_code == 201
        assert http.post("/v1/memories", json={"content": "one too many"}).status_code == 429
        assert http.delete(f"/v1/memories/{created.json()['results'][0]['id']}").status_code in (200, 204)
        assert http.post("/v1/memories", json={"content": "fits again"}).status_code == 201
    with limited.client(add_key(limited, me.user_id).key) as http:
        assert sorted(m["content"] for m in http.get("/v1/memories").json()["memories"]) == ["fits again", "m1", "m2"]


def test_writes_through_another_instance_count_against_the_quota(
    limited: RunningServer, limited_twin: RunningServer
) -> None:
    """This instance saw 2 stored; the twin stored a third since: the next write here is refused and stores nothing,
    though what this instance remembers would have let it through."""
    me = make_account(limited)
    with limited.client(me.key) as http:
        assert http.post("/v1/memories", json={"memories": [{"content": "a"}, {"content": "b"}]}).status_code == 201
    with limited_twin.client(me.key) as http:
        assert http.post("/v1/memories", json={"content": "c, through the twin"}).status_code == 201
    with limited.client(me.key) as http:
        over = http.post("/v1/memories", json={"content": "one too many"})
    assert over.status_code == 429
    assert over.json()["error"]["code"] == "quota_exceeded"
    with limited.client(add_key(limited, me.user_id).key) as http:
        stored = sorted(m["content"] for m in http.get("/v1/memories").json()["memories"])
    assert stored == ["a", "b", "c, through the twin"]


def test_mcp_gets_429_with_a_json_rpc_error(limited: RunningServer) -> None:
    me = make_account(limited)
    url = f"/mcp/v2/cli/{me.user_id}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {me.key}"}
    with httpx.Client(base_url=limited.base_url, headers=headers) as http:
        sent = [str(uuid.uuid4()) for _ in range(6)]
        statuses = [http.post(url, json={**body, "id": request_id}) for request_id in sent]
    refused = statuses[-1]
    assert refused.status_code == 429
    assert refused.headers["retry-after"]
    assert refused.json()["id"] == sent[-1]  # the client can tell which request was refused
    error = refused.json()["error"]
    assert error["code"] == -32029 and "requests per minute" in error["message"]
    assert error["data"]["retry_after_seconds"] == int(refused.headers["retry-after"])


@pytest.mark.anyio
async def test_the_memory_quota_over_mcp_is_a_json_rpc_error(limited: RunningServer) -> None:
    me = make_account(limited)
    # Filled through another key: this plan's per-key request limit is too small for a handshake and two calls.
    with limited.client(add_key(limited, me.user_id).key) as http:
        assert http.post("/v1/memories", json={"memories": [{"content": f"m{i}"} for i in range(3)]}).status_code == 201
    async with connect(limited, me.key, me.user_id) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("add_memories", {"memories": [{"content": "one too many"}]})
    assert refused.value.error.code == -32029
    assert "stores at most 3 memories" in refused.value.error.message
    assert refused.value.error.data["code"] == "quota_exceeded"


TWENTY = {"free": {"requests_per_minute": 10_000, "key_requests_per_minute": 10_000, "max_memories": 20}}


@pytest.fixture(scope="module", params=["postgres", "sqlite"])
def twenty(
    request: pytest.FixtureRequest, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A server whose plan stores 20 memories, on each database."""
    from app.migrate import upgrade_to_head

    tmp = tmp_path_factory.mktemp(f"twenty-{request.param}")
    if request.param == "postgres":
        url = request.getfixturevalue("pg_database_url")
    else:
        url = f"sqlite+aiosqlite:///{tmp / 'engram.db'}"
        upgrade_to_head(url)
    with serve(_settings(tmp, url, plans=TWENTY), embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def test_concurrent_writes_cannot_overrun_the_memory_quota(twenty: RunningServer) -> None:
    """Eight concurrent batches of five against a quota of 20: exactly four fit, and exactly 20 are stored."""
    from concurrent.futures import ThreadPoolExecutor

    me = make_account(twenty)

    def add(batch: int) -> int:
        memories = [{"content": f"batch {batch} fact {i}"} for i in range(5)]
        with twenty.client(me.key) as http:
            return http.post("/v1/memories", json={"memories": memories}).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = sorted(pool.map(add, range(8)))
    assert statuses == [201] * 4 + [429] * 4
    with twenty.client(me.key) as http:
        stored = http.get("/v1/memories", params={"limit": 200}).json()["memories"]
        assert len(stored) == 20
        # The index holds exactly what the database does: a refused batch left nothing searchable behind.
        found = http.post("/v1/memories/search", json={"query": "batch fact", "limit": 100, "threshold": 0}).json()
    assert len(found["results"]) == 20
