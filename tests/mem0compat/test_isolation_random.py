"""Randomized isolation on the Mem0 routes and the end-user dimension: many accounts and end users write and read at
random through Mem0's client and Engram's REST; no read returns another account's memory, a filter on end users
returns exactly their memories, and a filter naming no entity returns exactly the account's own."""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

import pytest
from mem0 import MemoryClient
from mem0.exceptions import MemoryNotFoundError

from tests.harness import RunningServer, make_account

END_USERS = ["alice", "bob@example.com", "carol", "dan"]
RUNS = [None, "run-1", "run-2"]
AGENTS = [None, "planner", "critic"]
WORDS = ["flight", "hotel", "vegan", "chess", "piano", "budget", "museum", "coffee", "train", "beach"]


@dataclass(frozen=True)
class Written:
    id: str
    account: str
    end_user: str | None
    run: str | None
    agent: str | None


@pytest.mark.slow
def test_random_mem0_reads_never_cross_accounts_or_end_users(api: RunningServer) -> None:
    rng = random.Random(20261127)
    accounts = [make_account(api) for _ in range(3)]
    clients = {a.user_id: MemoryClient(api_key=a.key, host=api.base_url) for a in accounts}
    natives = {a.user_id: api.client(a.key) for a in accounts}
    written: list[Written] = []
    try:
        for step in range(120):
            account = rng.choice(accounts).user_id
            mem0 = clients[account]
            action = rng.random()
            if action < 0.45 or not written:
                end_user = rng.choice([*END_USERS, None])
                run, agent = rng.choice(RUNS), rng.choice(AGENTS)
                text = f"{rng.choice(WORDS)} {rng.choice(WORDS)} note {step}"
                if rng.random() < 0.25:  # through Engram's own REST, with the same dimension
                    body: dict[str, Any] = {"content": text}
                    if end_user:
                        body["end_user"] = end_user
                    response = natives[account].post("/v1/memories", json=body)
                    assert response.status_code == 201, response.text
                    written.append(Written(response.json()["id"], account, end_user, None, None))
                    continue
                ids = {k: v for k, v in {"user_id": end_user, "run_id": run, "agent_id": agent}.items() if v}
                result = mem0.add([{"role": "user", "content": text}], infer=False, **ids)
                written.append(Written(result["results"][0]["id"], account, end_user, run, agent))
                continue
            mine = [w for w in written if w.account == account]
            if action < 0.6:
                users = rng.sample(END_USERS, rng.randint(1, 2))
                filters: dict[str, Any] = (
                    {"user_id": users[0]} if len(users) == 1 else {"OR": [{"user_id": u} for u in users]}
                )
                expected = {w.id for w in mine if w.end_user in users}
            elif action < 0.7:
                excluded = rng.choice(END_USERS)
                filters = {"AND": [{"user_id": "*"}, {"NOT": [{"user_id": excluded}]}]}
                expected = {w.id for w in mine if w.end_user is not None and w.end_user != excluded}
            elif action < 0.8:
                run = rng.choice(["run-1", "run-2"])
                filters = {"AND": [{"run_id": run}, {"user_id": rng.choice(END_USERS)}]}
                expected = {w.id for w in mine if w.run == run and w.end_user == filters["AND"][1]["user_id"]}
            elif action < 0.9:
                filters = {}
                expected = {w.id for w in mine}
            else:
                other = rng.choice([w for w in written if w.account != account] or written)
                if other.account != account:
                    with pytest.raises(MemoryNotFoundError):
                        mem0.get(other.id)
                    with pytest.raises(MemoryNotFoundError):
                        mem0.delete(other.id)
                continue
            listed = mem0.get_all(filters=filters or None, page_size=1000)
            assert {m["id"] for m in listed["results"]} == expected, (step, filters)
            found = mem0.search(rng.choice(WORDS), filters=filters or None, top_k=100, threshold=0)["results"]
            assert {m["id"] for m in found} <= expected, (step, filters)
            if "user_id" in filters:
                native = natives[account].get("/v1/memories", params={"end_user": filters["user_id"], "limit": 200})
                assert {m["id"] for m in native.json()["memories"]} == expected
    finally:
        for client in clients.values():
            client.client.close()
        for http in natives.values():
            http.close()
    # Every account still holds exactly what it wrote.
    for account in accounts:
        mine = {w.id for w in written if w.account == account.user_id}
        again = MemoryClient(api_key=account.key, host=api.base_url)
        assert {m["id"] for m in again.get_all(page_size=1000)["results"]} == mine
        again.client.close()


def test_an_end_users_memories_stay_out_of_another_end_users_search(api: RunningServer) -> None:
    account = make_account(api)
    mem0 = MemoryClient(api_key=account.key, host=api.base_url)
    secret = f"the vault code is {uuid.uuid4().hex[:6]}"
    mem0.add([{"role": "user", "content": secret}], user_id="owner", infer=False)
    mem0.add([{"role": "user", "content": "likes vaults of old churches"}], user_id="stranger", infer=False)
    found = mem0.search("vault code", filters={"user_id": "stranger"}, top_k=50, threshold=0)["results"]
    assert found and all(m["user_id"] == "stranger" for m in found)
    assert secret not in {m["memory"] for m in found}
    mem0.client.close()
