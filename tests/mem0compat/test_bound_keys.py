"""Mem0's routes with a key bound to one session and agent: filters and deletes naming another run_id or agent_id
are refused with 403 naming the binding, as every other route refuses them, and change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import RunningServer, add_key, make_account

BINDING = "bound to session 'proj' and agent 'bob'"


def _token(key: str) -> dict[str, str]:
    return {"Authorization": f"Token {key}"}


@pytest.fixture
def team(api: RunningServer) -> tuple[Any, Any, str]:
    """An owner, bob's bound key, and a session memory alice wrote."""
    owner = make_account(api)
    alice = add_key(api, owner.user_id, session="proj", agent="alice")
    bob = add_key(api, owner.user_id, session="proj", agent="bob")
    with api.client(alice.key) as http:
        written = http.post("/v1/memories", json={"content": "The schema lives in db/schema.sql", "scope": "session"})
    assert written.status_code == 201, written.text
    return owner, bob, written.json()["id"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("DELETE", "/v1/memories/?agent_id=alice", None),
        ("DELETE", "/v1/memories/?run_id=other", None),
        ("DELETE", "/v2/entities/agent/alice/", None),
        ("POST", "/v3/memories/search/", {"query": "schema", "filters": {"agent_id": "alice"}}),
        ("POST", "/v3/memories/search/", {"query": "schema", "filters": {"AND": [{"run_id": {"in": ["proj", "x"]}}]}}),
        ("POST", "/v3/memories/", {"filters": {"agent_id": "*"}}),
        ("POST", "/v1/exports/", {"filters": {"run_id": "other"}}),
    ],
)
def test_naming_another_agent_or_run_is_refused_and_deletes_nothing(
    api: RunningServer, team: tuple[Any, Any, str], method: str, path: str, body: Any
) -> None:
    owner, bob, memory_id = team
    with api.client() as http:
        response = http.request(method, path, json=body, headers=_token(bob.key))
    assert response.status_code == 403, response.text
    assert BINDING in response.text
    with api.client(owner.key) as http:
        assert http.get(f"/v1/memories/{memory_id}").status_code == 200


def test_naming_its_own_run_and_agent_is_served(api: RunningServer, team: tuple[Any, Any, str]) -> None:
    _, bob, memory_id = team
    with api.client() as http:
        found = http.post(
            "/v3/memories/search/",
            json={"query": "where is the schema", "filters": {"run_id": "proj"}},
            headers=_token(bob.key),
        )
        assert found.status_code == 200, found.text
        assert memory_id in [m["id"] for m in found.json()["results"]]
        mine = http.post("/v3/memories/", json={"filters": {"agent_id": "bob"}}, headers=_token(bob.key))
        assert mine.status_code == 200, mine.text
