"""Randomized isolation: many tenants, sessions and agents write and read at random; no read ever returns a memory
outside what that caller may see, and listing returns exactly what it may see."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest

from tests.harness import Account, RunningServer, make_account

SESSIONS = ["alpha", "beta"]
AGENTS = ["coder", "tester"]


@dataclass(frozen=True)
class Written:
    id: str
    tenant: str
    visibility: str


def _readable(session: str | None, agent: str | None) -> set[str]:
    keys = {"user"}
    if session:
        keys.add(f"s:{session}")
        if agent:
            keys.add(f"a:{session}:{agent}")
    return keys


@pytest.mark.slow
def test_random_reads_never_cross_sessions_or_tenants(api: RunningServer) -> None:
    rng = random.Random(20261122)
    tenants: list[Account] = [make_account(api) for _ in range(4)]
    written: list[Written] = []
    words = ["deploy", "schema", "cache", "retry", "queue", "token", "index", "parser", "router", "budget"]

    clients = {t.user_id: api.client(t.key) for t in tenants}
    try:
        for step in range(160):
            tenant = rng.choice(tenants)
            http = clients[tenant.user_id]
            if rng.random() < 0.55 or not written:
                session = rng.choice([None, *SESSIONS])
                agent = rng.choice(AGENTS) if session else None
                scope = rng.choice(["user", "session", "agent"]) if session else "user"
                body: dict[str, Any] = {"content": f"{rng.choice(words)} {rng.choice(words)} note {step}"}
                body.update({k: v for k, v in {"session": session, "agent": agent, "scope": scope}.items() if v})
                response = http.post("/v1/memories", json=body)
                assert response.status_code == 201, response.text
                visibility = {"user": "user", "session": f"s:{session}", "agent": f"a:{session}:{agent}"}[scope]
                written.append(Written(response.json()["id"], tenant.user_id, visibility))
                continue

            session = rng.choice([None, *SESSIONS])
            agent = rng.choice([None, *AGENTS]) if session else None
            allowed = {
                w.id for w in written if w.tenant == tenant.user_id and w.visibility in _readable(session, agent)
            }
            params = {k: v for k, v in {"session": session, "agent": agent}.items() if v}
            if rng.random() < 0.5:
                response = http.get("/v1/memories", params={**params, "limit": 200})
                assert response.status_code == 200, response.text
                listed = {m["id"] for m in response.json()["memories"]}
                assert listed == allowed, f"step {step}: list as {tenant.user_id}/{session}/{agent}"
            else:
                query = f"{rng.choice(words)} {rng.choice(words)}"
                response = http.post("/v1/memories/search", json={"query": query, "limit": 50, **params})
                assert response.status_code == 200, response.text
                found = {r["id"] for r in response.json()["results"]}
                assert found <= allowed, f"step {step}: search as {tenant.user_id}/{session}/{agent} leaked"
            # A direct read of a foreign memory by id is a 404, whatever the caller names.
            foreign = [w for w in written if w.tenant != tenant.user_id]
            if foreign:
                assert http.get(f"/v1/memories/{rng.choice(foreign).id}").status_code == 404
    finally:
        for client in clients.values():
            client.close()
    assert len({w.tenant for w in written}) == len(tenants)
