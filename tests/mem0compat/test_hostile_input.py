"""Whatever a caller sends to the Mem0 routes gets a 4xx naming what is wrong, never a 500, and Mem0's ``detail``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.harness import Account, RunningServer, make_account

ROUTES = [
    ("POST", "/v3/memories/add/"),
    ("POST", "/v3/memories/search/"),
    ("POST", "/v3/memories/"),
    ("PUT", "/v1/batch/"),
    ("DELETE", "/v1/batch/"),
    ("POST", "/v1/exports/"),
    ("POST", "/v1/exports/get/"),
]
BODIES: list[Any] = [
    None,
    [],
    "text",
    42,
    {"messages": 7},
    {"messages": [{"role": "user"}]},
    {"messages": [{"role": "system", "content": "x"}], "infer": False},
    {"messages": [{"role": "user", "content": "x"}], "infer": "yes"},
    {"messages": [{"role": "user", "content": "x"}], "infer": False, "user_id": ""},
    {"messages": [{"role": "user", "content": "x"}], "infer": False, "run_id": "bad run"},
    {"messages": [{"role": "user", "content": "x"}], "infer": False, "metadata": {"a": {"b": 1}}},
    {"messages": [{"role": "user", "content": "x"}], "infer": False, "metadata": {"mem0_app_id": "x"}},
    {"query": ""},
    {"query": "q", "top_k": 0},
    {"query": "q", "top_k": "ten"},
    {"query": "q", "threshold": "high"},
    {"query": "q", "filters": []},
    {"query": "q", "filters": {"AND": {}}},
    {"query": "q", "filters": {"OR": []}},
    {"query": "q", "filters": {"user_id": {"regex": ".*"}}},
    {"query": "q", "filters": {"user_id": {"in": "alice"}}},
    {"query": "q", "filters": {"created_at": {"gte": "yesterday"}}},
    {"query": "q", "filters": {"created_at": {"gte": 1700000000000000}}},
    {"query": "q", "filters": {"created_at": {"gte": 9223372036854775808}}},
    {"query": "q", "filters": {"updated_at": {"lt": -1e20}}},
    {"query": "q", "filters": {"created_at": 1e300}},
    {"query": "q", "filters": {"user_id": ["a"]}},
    {"query": "q", "rerank": True},
    {"filters": {"colour": "red"}},
    {"memories": []},
    {"memories": [{"text": "no id"}]},
    {"memories": [{"memory_id": str(uuid.uuid4()), "text": "x"}]},
    {"memories": [{"memory_id": 5}]},
    {"schema": "{not json"},
    {"schema": 5},
    {"memory_export_id": "!!!"},
]


@pytest.fixture(scope="module")
def account(api: RunningServer) -> Account:
    return make_account(api)


def test_bad_bodies_get_a_4xx_with_detail(api: RunningServer, account: Account) -> None:
    with api.client() as http:
        http.headers["Authorization"] = f"Token {account.key}"
        for method, path in ROUTES:
            for body in BODIES:
                response = http.request(method, path, json=body)
                assert response.status_code < 500, (method, path, body, response.text)
                if response.status_code >= 400:
                    assert response.json()["detail"], (method, path, body, response.text)
        for method, path in [
            ("GET", "/v1/memories/not-a-uuid/"),
            ("PUT", f"/v1/memories/{uuid.uuid4()}/"),
            ("DELETE", f"/v1/memories/{uuid.uuid4()}/"),
            ("GET", f"/v1/memories/{uuid.uuid4()}/history/"),
            ("DELETE", "/v1/memories/"),
            ("DELETE", "/v2/entities/planet/earth/"),
            ("GET", "/v2/entities/user/alice/profile/"),
            ("POST", "/v2/profiles/jobs/"),
            ("GET", "/api/v1/webhooks/projects/p/"),
            ("POST", "/v1/feedback/"),
            ("POST", "/v3/memories/?page=zero"),
            ("POST", "/v3/memories/?page_size=100000"),
        ]:
            response = http.request(method, path, json={})
            assert 400 <= response.status_code < 500, (method, path, response.text)
            assert response.json()["detail"], (method, path, response.text)


def test_a_request_without_a_key_is_401_with_detail(api: RunningServer) -> None:
    with api.client() as http:
        response = http.get("/v1/ping/")
        assert response.status_code == 401 and "API key" in response.json()["detail"]
        response = http.get("/v1/ping/", headers={"Authorization": "Token egk_wrong"})
        assert response.status_code == 401 and response.json()["detail"]
