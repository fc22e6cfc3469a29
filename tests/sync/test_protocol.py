"""/sync/v1 over HTTP with real sync tokens (client_credentials): push, pull, long-poll, isolation, bad input."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx

from app.sync import hlc
from app.sync.protocol import change_id
from tests.harness import RunningServer, make_account
from tests.oauth.conftest import make_sync_client, sync_token

T0 = "2026-11-01T00:00:00+00:00"


def token_for(api: RunningServer, user_id: str) -> str:
    response = sync_token(api, make_sync_client(api, user_id, f"machine {uuid.uuid4().hex[:6]}"))
    assert response.status_code == 200, response.text
    token: str = response.json()["access_token"]
    return token


def wire(memory_id: str, content: str, *, op: str = "upsert", origin: str = "n_laptop", ms: int = 0) -> dict[str, Any]:
    stamp = (hlc.wall_ms() - 60_000 + ms) << 16
    return {
        "change_id": change_id(memory_id, stamp, origin, op),
        "memory_id": memory_id,
        "hlc": hlc.encode(stamp),
        "origin": origin,
        "op": op,
        "record": {"content": content, "scope": "user", "created_at": T0, "updated_at": T0},
    }


def push(
    api: RunningServer, token: str | None, changes: list[dict[str, Any]], node: str = "n_laptop"
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(
        f"{api.base_url}/sync/v1/push", json={"node_id": node, "changes": changes}, headers=headers, timeout=30
    )


def pull(api: RunningServer, token: str, **params: Any) -> httpx.Response:
    return httpx.get(
        f"{api.base_url}/sync/v1/pull", params=params, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


def pull_all(api: RunningServer, token: str, node: str, cursor: str = "") -> tuple[list[dict[str, Any]], str]:
    changes: list[dict[str, Any]] = []
    while True:
        response = pull(api, token, cursor=cursor, node=node, limit=2)
        assert response.status_code == 200, response.text
        body = response.json()
        changes += body["changes"]
        cursor = body["cursor"]
        if not body["more"]:
            return changes, cursor


def test_pushed_changes_reach_other_nodes_once_however_often_they_are_sent(api: RunningServer) -> None:
    alice = make_account(api)
    token = token_for(api, alice.user_id)
    memory = str(uuid.uuid4())
    batch = [wire(memory, "the build cache lives in S3"), wire(str(uuid.uuid4()), "a second fact", ms=1)]
    first = push(api, token, batch)
    assert first.status_code == 200, first.text
    assert first.json() == {"accepted": 2, "applied": 2, "unchanged": 0, "conflicts": 0, "discarded": 0}
    again = push(api, token, list(reversed(batch)))  # the reply was lost: sent again, out of order
    assert again.json() == {"accepted": 2, "applied": 0, "unchanged": 2, "conflicts": 0, "discarded": 0}
    with api.client(alice.key) as http:
        assert len(http.get(f"/v1/memories/{memory}/history").json()["history"]) == 1, "applied once"
        results = http.post("/v1/memories/search", json={"query": "where is the build cache"}).json()["results"]
    assert results[0]["id"] == memory, "searchable on arrival"

    mine, cursor = pull_all(api, token, "n_laptop")
    theirs, _ = pull_all(api, token, "n_desktop")
    assert {c["memory_id"] for c in theirs} == {c["memory_id"] for c in batch}
    assert {c["memory_id"] for c in mine} == {c["memory_id"] for c in batch}, "the snapshot holds everything"
    with api.client(alice.key) as http:
        http.patch(f"/v1/memories/{memory}", json={"content": "the build cache moved to GCS"})
    news, _ = pull_all(api, token, "n_laptop", cursor)
    assert [(c["memory_id"], c["record"]["content"]) for c in news] == [(memory, "the build cache moved to GCS")]
    assert news[0]["vector"]["model"] == api.container.engine.model_id
    following, _ = pull_all(api, token, "n_laptop", news and cursor)
    assert all(c["origin"] != "n_laptop" for c in following[len(mine) :])


def test_a_long_poll_returns_as_soon_as_another_node_pushes(api: RunningServer) -> None:
    alice = make_account(api)
    token = token_for(api, alice.user_id)
    _, cursor = pull_all(api, token, "n_waiter")
    answer: dict[str, httpx.Response] = {}
    waiter = threading.Thread(
        target=lambda: answer.setdefault("r", pull(api, token, cursor=cursor, node="n_waiter", wait=30))
    )
    waiter.start()
    memory = str(uuid.uuid4())
    assert push(api, token, [wire(memory, "pushed while someone waits")], node="n_other").status_code == 200
    waiter.join(timeout=60)
    assert not waiter.is_alive()
    assert [c["memory_id"] for c in answer["r"].json()["changes"]] == [memory]


def test_one_users_sync_token_cannot_reach_another_users_memories_by_any_id(api: RunningServer) -> None:
    alice, mallory = make_account(api), make_account(api)
    alices_token, mallorys_token = token_for(api, alice.user_id), token_for(api, mallory.user_id)
    with api.client(alice.key) as http:
        secret = http.post("/v1/memories", json={"content": "alice's launch codes"}).json()["id"]
    pushed = str(uuid.uuid4())
    assert push(api, alices_token, [wire(pushed, "alice's pushed note")]).status_code == 200

    for memory in (secret, pushed):
        for change in (wire(memory, "overwritten", ms=50_000), wire(memory, "gone", op="delete", ms=50_000)):
            refused = push(api, mallorys_token, [wire(str(uuid.uuid4()), "cover"), change], node="n_mallory")
            assert refused.status_code == 403, refused.text
    with api.client(alice.key) as http:
        assert {m["content"] for m in http.get("/v1/memories").json()["memories"]} == {
            "alice's launch codes",
            "alice's pushed note",
        }
    with api.client(mallory.key) as http:
        assert http.get("/v1/memories").json()["memories"] == [], "nothing of a refused batch was applied"

    # Pulling with any cursor (alice's own included) shows mallory only her own, which is nothing.
    alices_changes, alices_cursor = pull_all(api, alices_token, "n_alice")
    assert {secret, pushed} <= {c["memory_id"] for c in alices_changes}
    for cursor in ("", alices_cursor, "l0", "s0.", f"s0.{secret[:-1]}"):
        seen, _ = pull_all(api, mallorys_token, "n_mallory", cursor)
        assert seen == []
    me = httpx.get(f"{api.base_url}/sync/v1/me", headers={"Authorization": f"Bearer {mallorys_token}"}).json()
    assert me["user_id"] == mallory.user_id


def test_sync_takes_only_sync_tokens_and_names_what_is_wrong_with_a_request(api: RunningServer) -> None:
    alice = make_account(api)
    token = token_for(api, alice.user_id)
    for credential in (None, alice.key, "not-a-token"):
        refused = push(api, credential, [])
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert pull(api, alice.key).status_code == 401

    memory = str(uuid.uuid4())
    bad_changes = [
        {**wire(memory, "x"), "hlc": "yesterday"},
        {**wire(memory, "x"), "memory_id": "not-a-uuid"},
        {**wire(memory, "x"), "op": "merge"},
        {**wire(memory, "x"), "record": {"content": "", "scope": "user", "created_at": T0, "updated_at": T0}},
        {**wire(memory, "x"), "record": {"content": "x", "scope": "galaxy", "created_at": T0, "updated_at": T0}},
        {**wire(memory, "x"), "surprise": True},
        {**wire(memory, "x"), "hlc": hlc.encode((hlc.wall_ms() + 86_400_000) << 16)},
    ]
    for change in bad_changes:
        response = push(api, token, [change])
        assert response.status_code == 422, (change, response.text)
        assert response.json()["error"]["code"] == "invalid_request"
    too_many = push(api, token, [wire(str(uuid.uuid4()), "x") for _ in range(1001)])
    assert too_many.status_code == 422
    for params in ({"cursor": "garbage"}, {"limit": 0}, {"limit": 5000}, {"wait": -1}, {"wait": 3600}):
        response = pull(api, token, **params)
        assert response.status_code == 422, (params, response.text)
    ahead = pull(api, token, cursor="l999999999")
    assert ahead.status_code == 409 and ahead.json()["error"]["code"] == "cursor_reset"
    with api.client(alice.key) as http:
        assert http.get("/v1/memories").json()["memories"] == []


def test_a_shipped_vector_is_used_only_when_it_is_finite_float32() -> None:
    """Anything else makes the receiver embed again; it is never indexed as it came."""
    import base64
    import struct

    from app.sync.protocol import VectorWire, encode_vector

    def shipped(raw: bytes) -> VectorWire:
        return VectorWire(model="m", data=base64.b64encode(raw).decode())

    vector = [0.25, -1.5, 3.0e38, 1e-30]
    assert encode_vector("m", vector).floats() == [struct.unpack("<f", struct.pack("<f", x))[0] for x in vector]
    for bad in (float("nan"), float("inf"), float("-inf")):
        assert shipped(struct.pack("<3f", 0.5, bad, 0.5)).floats() is None
    assert shipped(struct.pack("<2f", 3.0e38, -3.0e38)).floats() == [
        struct.unpack("<f", struct.pack("<f", x))[0] for x in (3.0e38, -3.0e38)
    ]
    assert shipped(b"\x00\x00\x80").floats() is None  # not a whole float
    assert shipped(b"").floats() is None
    assert VectorWire(model="m", data="not base64!").floats() is None
