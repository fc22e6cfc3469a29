"""Mem0's own client (mem0ai 2.2.1's MemoryClient and AsyncMemoryClient), pointed at Engram with host=, runs
unchanged: the quickstart and every method Engram supports, over real HTTP."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

import pytest
from mem0 import AsyncMemoryClient, MemoryClient
from mem0.exceptions import AuthenticationError, MemoryNotFoundError, RateLimitError, ValidationError

from tests.conftest import _settings
from tests.harness import Account, RunningServer, make_account, serve


@pytest.fixture
def account(api: RunningServer) -> Account:
    return make_account(api)


@pytest.fixture
def client(api: RunningServer, account: Account) -> Iterator[MemoryClient]:
    mem0 = MemoryClient(api_key=account.key, host=api.base_url)
    yield mem0
    mem0.client.close()


def _add(client: MemoryClient, text: str, **kwargs: Any) -> dict[str, Any]:
    result: dict[str, Any] = client.add([{"role": "user", "content": text}], infer=False, **kwargs)
    assert len(result["results"]) == 1, result
    first: dict[str, Any] = result["results"][0]
    return first


def test_the_quickstart_runs_unchanged(api: RunningServer, account: Account, client: MemoryClient) -> None:
    messages = [
        {"role": "user", "content": "I'm planning to watch a movie tonight. Any recommendations?"},
        {"role": "assistant", "content": "How about thriller movies? They can be quite engaging."},
        {"role": "user", "content": "I'm not a big fan of thriller movies but I love sci-fi movies."},
    ]
    added = client.add(messages, user_id="alex", metadata={"food": "vegan"}, infer=False)
    assert [r["event"] for r in added["results"]] == ["ADD"] * 3
    assert {r["user_id"] for r in added["results"]} == {"alex"}

    found = client.search("What do you know about me?", filters={"user_id": "alex"}, threshold=0)
    assert found["results"] and all(r["user_id"] == "alex" for r in found["results"])
    best = client.search("which movies does alex like", filters={"user_id": "alex"}, top_k=1)["results"]
    assert best[0]["memory"] == messages[2]["content"]
    assert best[0]["metadata"] == {"food": "vegan"} and 0 < best[0]["score"] <= 1

    everything = client.get_all(filters={"user_id": "alex"})
    assert everything["count"] == 3 and len(everything["results"]) == 3
    assert client.project_id == account.user_id and client.user_email


def test_a_memory_added_through_mem0_is_engrams_and_back(api: RunningServer, account: Account) -> None:
    """One model: the end user, run and agent of a Mem0 memory are Engram's end_user, session and agent."""
    mem0 = MemoryClient(api_key=account.key, host=api.base_url)
    memory = _add(mem0, "Prefers window seats", user_id="alice@example.com", run_id="trip-1", agent_id="planner")
    with api.client(account.key) as http:
        native = http.get(f"/v1/memories/{memory['id']}").json()
        assert (native["end_user"], native["session"], native["agent"]) == ("alice@example.com", "trip-1", "planner")
        assert native["scope"] == "user"  # what the key reads through /v1 and Mem0's routes alike
        listed = http.get("/v1/memories", params={"end_user": "alice@example.com"}).json()["memories"]
        assert [m["id"] for m in listed] == [memory["id"]]
        created = http.post("/v1/memories", json={"content": "Allergic to peanuts", "end_user": "bob"}).json()
        hits = http.post("/v1/memories/search", json={"query": "peanut allergy", "end_user": "bob"}).json()
        assert [h["id"] for h in hits["results"]] == [created["id"]] and hits["results"][0]["end_user"] == "bob"
        other = http.post("/v1/memories/search", json={"query": "peanut allergy", "end_user": "alice@example.com"})
        assert created["id"] not in {h["id"] for h in other.json()["results"]}
    assert mem0.get(created["id"])["user_id"] == "bob"
    mem0.client.close()


def test_get_update_history_and_delete_one_memory(api: RunningServer, account: Account, client: MemoryClient) -> None:
    memory = _add(client, "Lives in Porto", user_id="carla", app_id="travel", metadata={"source": "chat"})
    got = client.get(memory["id"])
    assert (got["memory"], got["user_id"], got["app_id"], got["metadata"]) == (
        "Lives in Porto",
        "carla",
        "travel",
        {"source": "chat"},
    )
    updated = client.update(memory["id"], text="Lives in Lisbon", metadata={"source": "profile"})
    assert (updated["memory"], updated["app_id"], updated["metadata"]) == (
        "Lives in Lisbon",
        "travel",
        {"source": "profile"},
    )
    history = client.history(memory["id"])
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in history] == [
        ("ADD", None, "Lives in Porto"),
        ("UPDATE", "Lives in Porto", "Lives in Lisbon"),
    ]
    assert client.delete(memory["id"])["message"]
    with pytest.raises(MemoryNotFoundError):
        client.get(memory["id"])
    with pytest.raises(MemoryNotFoundError):
        client.update(memory["id"], text="again")
    # Engram's own REST on the same paths without the trailing slash keeps its own shapes.
    with api.client(account.key) as http:
        assert http.get(f"/v1/memories/{memory['id']}").json()["error"]["code"] == "not_found"
        assert http.get(f"/v1/memories/{memory['id']}/history").json()["history"][-1]["event"] == "DELETE"


def test_filters_with_and_or_not_metadata_categories_and_dates(client: MemoryClient) -> None:
    a = _add(client, "Likes green tea", user_id="u1", agent_id="barista", metadata={"kind": "drink", "n": 1})
    b = _add(client, "Likes black coffee", user_id="u2", agent_id="barista", metadata={"kind": "drink", "n": 5})
    c = _add(client, "Runs on Sundays", user_id="u1", run_id="week-1", metadata={"kind": "habit", "n": 9})

    def ids(filters: dict[str, Any]) -> set[str]:
        return {m["id"] for m in client.get_all(filters=filters)["results"]}

    assert ids({"user_id": "u1"}) == {a["id"], c["id"]}
    assert ids({"AND": [{"user_id": "u1"}, {"agent_id": "barista"}]}) == {a["id"]}
    assert ids({"OR": [{"user_id": "u2"}, {"run_id": "week-1"}]}) == {b["id"], c["id"]}
    assert ids({"AND": [{"agent_id": "barista"}, {"NOT": [{"user_id": "u1"}]}]}) == {b["id"]}
    assert ids({"AND": [{"user_id": "*"}, {"metadata": {"kind": "drink"}}]}) == {a["id"], b["id"]}
    assert ids({"AND": [{"user_id": {"in": ["u1", "u2"]}}, {"metadata": {"n": {"gte": 5}}}]}) == {b["id"], c["id"]}
    assert ids({"AND": [{"user_id": "u1"}, {"created_at": {"gte": "2000-01-01", "lte": "2999-01-01"}}]}) == {
        a["id"],
        c["id"],
    }
    assert ids({"AND": [{"user_id": "u1"}, {"created_at": {"lte": "2000-01-01"}}]}) == set()
    found = client.search("tea", filters={"OR": [{"user_id": "u1"}, {"user_id": "u2"}]}, threshold=0)["results"]
    assert {r["id"] for r in found} == {a["id"], b["id"], c["id"]}
    found = client.search("drink", filters={"AND": [{"agent_id": "barista"}, {"NOT": {"user_id": "u2"}}]}, threshold=0)
    assert {r["id"] for r in found["results"]} == {a["id"]}
    with pytest.raises(ValidationError):
        client.get_all(filters={"colour": "red"})


def test_categories_are_engram_tags(api: RunningServer, account: Account, client: MemoryClient) -> None:
    with api.client(account.key) as http:
        tagged = http.post("/v1/memories", json={"content": "Vegan since 2019", "tags": ["diet"], "end_user": "d"})
    untagged = _add(client, "Plays chess", user_id="d")
    assert client.get(tagged.json()["id"])["categories"] == ["diet"]
    assert [
        m["id"]
        for m in client.get_all(filters={"AND": [{"user_id": "d"}, {"categories": {"in": ["diet"]}}]})["results"]
    ] == [tagged.json()["id"]]
    assert untagged["categories"] == []


def test_pagination(client: MemoryClient) -> None:
    ids = [_add(client, f"fact number {i}", user_id="pager")["id"] for i in range(7)]
    first = client.get_all(filters={"user_id": "pager"}, page=1, page_size=3)
    assert first["count"] == 7 and first["previous"] is None and first["next"]
    pages = [first] + [client.get_all(filters={"user_id": "pager"}, page=p, page_size=3) for p in (2, 3)]
    assert [len(p["results"]) for p in pages] == [3, 3, 1] and pages[2]["next"] is None
    assert [m["id"] for p in pages for m in p["results"]] == list(reversed(ids))  # newest first
    assert client.get_all(filters={"user_id": "pager"}, page=4, page_size=3)["results"] == []


def test_batch_update_and_batch_delete(client: MemoryClient) -> None:
    ids = [_add(client, f"batch fact {i}", user_id="batcher")["id"] for i in range(3)]
    client.batch_update([{"memory_id": ids[0], "text": "changed 0"}, {"memory_id": ids[1], "text": "changed 1"}])
    assert [client.get(i)["memory"] for i in ids] == ["changed 0", "changed 1", "batch fact 2"]
    with pytest.raises(MemoryNotFoundError):  # one unknown id: nothing is updated
        client.batch_update([{"memory_id": ids[2], "text": "lost"}, {"memory_id": str(uuid.uuid4()), "text": "x"}])
    assert client.get(ids[2])["memory"] == "batch fact 2"
    with pytest.raises(MemoryNotFoundError):  # one unknown id: nothing is deleted
        client.batch_delete([{"memory_id": ids[0]}, {"memory_id": str(uuid.uuid4())}])
    assert client.get_all(filters={"user_id": "batcher"})["count"] == 3
    client.batch_delete([{"memory_id": i} for i in ids[:2]])
    assert [m["id"] for m in client.get_all(filters={"user_id": "batcher"})["results"]] == [ids[2]]


def test_a_batch_update_is_all_or_none_when_the_index_fails_midway(
    api: RunningServer, account: Account, client: MemoryClient
) -> None:
    ids = [_add(client, f"tide table {i}", user_id="tides")["id"] for i in range(3)]
    # The index has lost the last one: the others are written to the index before its write fails.
    api.run(api.container.memories.engine.purge([ids[2]]))
    with pytest.raises(MemoryNotFoundError):
        client.batch_update([{"memory_id": i, "text": f"rewritten {n}"} for n, i in enumerate(ids)])
    assert [client.get(i)["memory"] for i in ids] == ["tide table 0", "tide table 1", "tide table 2"]
    with api.client(account.key) as http:  # searches answer from the index: it holds the recorded versions again
        found = http.post("/v1/memories/search", json={"query": "rewritten", "threshold": 0, "limit": 20}).json()
        assert {h["id"]: h["content"] for h in found["results"]} == {i: f"tide table {n}" for n, i in enumerate(ids)}
    assert [[e["event"] for e in client.history(i)] for i in ids[:2]] == [["ADD"], ["ADD"]]

    # Named twice, a memory takes both changes, as if they were applied in turn.
    client.batch_update(
        [{"memory_id": ids[0], "text": "rewritten 0"}, {"memory_id": ids[0], "metadata": {"tide": "high"}}]
    )
    changed = client.get(ids[0])
    assert (changed["memory"], changed["metadata"]) == ("rewritten 0", {"tide": "high"})


def test_entities_and_their_deletion(client: MemoryClient) -> None:
    _add(client, "e1", user_id="ent-a", agent_id="helper")
    _add(client, "e2", user_id="ent-a")
    kept = _add(client, "e3", user_id="ent-b", app_id="shop")
    listed = {(e["type"], e["name"]): e["total_memories"] for e in client.users()["results"]}
    assert listed == {("user", "ent-a"): 2, ("user", "ent-b"): 1, ("agent", "helper"): 1, ("app", "shop"): 1}
    client.delete_users(user_id="ent-a")
    assert client.get_all(filters={"user_id": "ent-a"})["count"] == 0
    assert [m["id"] for m in client.get_all()["results"]] == [kept["id"]]
    with pytest.raises(MemoryNotFoundError):
        client.delete_users(user_id="nobody")
    client.delete_all(app_id="shop")
    assert client.get_all()["count"] == 0
    with pytest.raises(ValidationError):
        client.delete_all()  # naming no entity deletes nothing


def test_reset_deletes_every_entity_and_its_memories(
    api: RunningServer, account: Account, client: MemoryClient
) -> None:
    _add(client, "r1", user_id="reset-a", run_id="r-1")
    _add(client, "r2", agent_id="reset-agent")
    with api.client(account.key) as http:  # a memory naming no entity is no entity's: reset leaves it
        plain = http.post("/v1/memories", json={"content": "the account's own note"}).json()["id"]
    assert client.reset()["message"]
    assert client.users()["results"] == []
    assert [m["id"] for m in client.get_all()["results"]] == [plain]


def test_exports_fill_memory_fields_without_an_llm(client: MemoryClient) -> None:
    _add(client, "Exported fact", user_id="exp")
    _add(client, "Someone else's", user_id="other")
    item = {"type": "object", "properties": {"memory": {"type": "string"}, "user_id": {"type": "string"}}}
    schema = json.dumps({"type": "object", "properties": {"facts": {"type": "array", "items": item}}})
    created = client.create_memory_export(schema, filters={"user_id": "exp"})
    export = client.get_memory_export(memory_export_id=created["id"])
    assert export == {"facts": [{"memory": "Exported fact", "user_id": "exp"}]}
    persona = '{"type": "object", "properties": {"persona": {"type": "string"}}}'
    with pytest.raises(ValidationError, match="LLM"):
        client.create_memory_export(persona, user_id="exp")
    with pytest.raises(ValidationError, match="LLM"):
        client.get_memory_export(user_id="exp", schema=persona)
    assert client.get_memory_export(user_id="exp")["memories"][0]["memory"] == "Exported fact"


def test_the_clients_own_exceptions(api: RunningServer, account: Account, client: MemoryClient) -> None:
    with pytest.raises(ValueError, match="API key"):  # the client's constructor turns a 401 on ping into this
        MemoryClient(api_key="egk_not_a_key", host=api.base_url)
    with pytest.raises(MemoryNotFoundError):
        client.get(str(uuid.uuid4()))
    with pytest.raises(ValidationError, match="infer needs an LLM"):
        client.add("remember this", user_id="x")  # infer defaults to true in Mem0; this server has no LLM
    with pytest.raises(ValidationError, match="not supported"):
        client.get_summary()
    with pytest.raises(ValidationError, match="not supported"):
        client.add("x", user_id="x", infer=False, expiration_date="2030-01-01")
    revoked = make_account(api)
    gone = MemoryClient(api_key=revoked.key, host=api.base_url)
    from app.accounts import service

    async def revoke() -> None:
        async with api.container.db.session() as session:
            await service.revoke_key(session, revoked.key_id, user_id=revoked.user_id)

    api.run(revoke())
    with pytest.raises(AuthenticationError):
        gone.get_all()


def test_a_read_key_reads_and_cannot_write(api: RunningServer, account: Account) -> None:
    from tests.harness import add_key

    reader = add_key(api, account.user_id, scope="read")
    mem0 = MemoryClient(api_key=reader.key, host=api.base_url)
    with pytest.raises(AuthenticationError):  # 403: the client's AuthenticationError
        mem0.add("x", user_id="r", infer=False)
    assert mem0.get_all()["count"] == 0
    # Deletes are refused whether or not anything matches: "deleted (0)" would say the key may delete.
    with pytest.raises(AuthenticationError):
        mem0.delete_all(run_id="nothing-here")
    with pytest.raises(AuthenticationError):
        mem0.delete_users(run_id="nothing-here")


SMALL = {"free": {"requests_per_minute": 1_000, "key_requests_per_minute": 4, "max_memories": 100}}


@pytest.fixture(scope="module")
def limited(
    pg_database_url: str, redis_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    settings = _settings(tmp_path_factory.mktemp("mem0-quota"), pg_database_url, redis_url=redis_url, plans=SMALL)
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def test_rate_limits_raise_the_clients_rate_limit_error(limited: RunningServer) -> None:
    account = make_account(limited)
    mem0 = MemoryClient(api_key=account.key, host=limited.base_url)
    with pytest.raises(RateLimitError) as caught:
        for _ in range(10):
            mem0.get_all()
    assert caught.value.debug_info.get("retry_after", 0) >= 1


@pytest.mark.anyio
async def test_the_async_client_runs_the_same_calls(api: RunningServer, account: Account) -> None:
    mem0 = AsyncMemoryClient(api_key=account.key, host=api.base_url)
    added = await mem0.add([{"role": "user", "content": "Async facts work"}], user_id="async-u", infer=False)
    memory_id = added["results"][0]["id"]
    assert (await mem0.get(memory_id))["user_id"] == "async-u"
    found = await mem0.search("async facts", filters={"user_id": "async-u"})
    assert [r["id"] for r in found["results"]] == [memory_id]
    await mem0.update(memory_id, text="Async facts still work")
    assert [h["event"] for h in await mem0.history(memory_id)] == ["ADD", "UPDATE"]
    assert (await mem0.get_all(filters={"user_id": "async-u"}))["count"] == 1
    assert {e["name"] for e in (await mem0.users())["results"]} == {"async-u"}
    await mem0.batch_update([{"memory_id": memory_id, "text": "batched"}])
    await mem0.delete(memory_id)
    with pytest.raises(MemoryNotFoundError):
        await mem0.get(memory_id)
    await mem0.async_client.aclose()


def test_infer_uses_the_configured_llm(
    pg_database_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Mem0's default (infer on) goes through Engram's LLM path when one is configured; the LLM is the one test
    double of the memory tests (tests/fake_llm.py's FakeOpenAI, a real HTTP server)."""
    from tests.fake_llm import FACTS, FakeOpenAI

    with FakeOpenAI() as llm:
        settings = _settings(
            tmp_path_factory.mktemp("mem0-infer"), pg_database_url, llm_base_url=llm.base_url, llm_api_key="sk-test"
        )
        with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
            account = make_account(server)
            mem0 = MemoryClient(api_key=account.key, host=server.base_url)
            conversation = [
                {"role": "user", "content": "I just moved to Lisbon"},
                {"role": "assistant", "content": "Welcome! Coffee?"},
                {"role": "user", "content": "A flat white, always"},
            ]
            added = mem0.add(conversation, user_id="eve")
            assert sorted(r["memory"] for r in added["results"]) == sorted(FACTS)
            assert {r["user_id"] for r in added["results"]} == {"eve"}
            assert len(llm.requests) == 1 and "flat white" in json.dumps(llm.requests[0]["body"])
            assert mem0.get_all(filters={"user_id": "eve"})["count"] == len(FACTS)
            mem0.client.close()


def test_search_says_when_a_memory_last_changed(client: MemoryClient) -> None:
    memory = _add(client, "Lives in Porto", user_id="fay")
    client.update(memory["id"], text="Lives in Faro")
    hit = client.search("where does fay live", filters={"user_id": "fay"}, top_k=1)["results"][0]
    got = client.get(memory["id"])
    assert hit["id"] == memory["id"] and hit["created_at"] == got["created_at"]
    created, updated = (datetime.fromisoformat(hit[k]) for k in ("created_at", "updated_at"))
    assert updated > created
    assert abs(updated - datetime.fromisoformat(got["updated_at"])) < timedelta(seconds=5)


def test_a_filter_the_index_cannot_apply_still_finds_a_match_ranked_far_down(client: MemoryClient) -> None:
    """Metadata filters are applied to the best candidates; when too few match, the search looks deeper."""
    for batch in range(2):  # a batch holds at most 100
        coffee = [{"role": "user", "content": f"Coffee order {batch}-{n}: a double espresso"} for n in range(75)]
        client.add(coffee, user_id="hal", metadata={"kind": "coffee"}, infer=False)
    tea = _add(client, "Drinks green tea in the afternoon", user_id="hal", metadata={"kind": "tea"})
    found = client.search(
        "espresso coffee order", filters={"AND": [{"user_id": "hal"}, {"metadata": {"kind": "tea"}}]}, threshold=0
    )
    assert [r["id"] for r in found["results"]] == [tea["id"]]
