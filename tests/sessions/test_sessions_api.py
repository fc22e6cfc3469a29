"""REST /v1/sessions: claims, changes, status and the SSE stream, over real HTTP."""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.harness import RunningServer, add_key, make_account, revoke_key


def test_claims_conflict_release_broadcast_sync_and_status(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        first = http.post("/v1/sessions/web/claims", json={"agent": "alice", "file_paths": ["src/a.py", "src/b.py"]})
        assert first.status_code == 200, first.text
        assert first.json()["granted"] is True
        assert [c["file_path"] for c in first.json()["claims"]] == ["src/a.py", "src/b.py"]

        clash = http.post("/v1/sessions/web/claims", json={"agent": "bob", "file_paths": ["src/b.py", "src/c.py"]})
        body = clash.json()
        assert body["granted"] is False and body["claims"] == []
        assert body["conflicts"][0]["file_path"] == "src/b.py" and body["conflicts"][0]["holder"] == "alice"
        assert body["conflicts"][0]["expires_at"]

        refused = http.post("/v1/sessions/web/release", json={"agent": "bob", "file_paths": ["src/a.py"]}).json()
        assert refused["released"] == [] and refused["not_released"][0]["holder"] == "alice"
        assert refused["not_released"][0]["reason"] == "held_by_another_agent"
        nobody = http.post("/v1/sessions/web/release", json={"agent": "bob", "file_paths": ["src/none.py"]}).json()
        assert nobody["not_released"] == [
            {"file_path": "src/none.py", "reason": "not_held", "holder": None, "operation": None, "expires_at": None}
        ]
        released = http.post("/v1/sessions/web/release", json={"agent": "alice", "file_paths": ["src/b.py"]}).json()
        assert released["released"] == ["src/b.py"]

        retry = http.post("/v1/sessions/web/claims", json={"agent": "bob", "file_paths": ["src/b.py"]}).json()
        assert retry["granted"] is True
        assert retry["claims"][0]["fencing_token"] > first.json()["claims"][1]["fencing_token"]

        change = http.post(
            "/v1/sessions/web/changes",
            json={"agent": "alice", "file_paths": ["src/a.py"], "changes_summary": "renamed parse() to parse_html()"},
        ).json()
        assert change["cursor"]
        synced = http.get("/v1/sessions/web/changes", params={"agent": "bob"}).json()
        assert [c["changes_summary"] for c in synced["changes"]] == ["renamed parse() to parse_html()"]
        again = http.get("/v1/sessions/web/changes", params={"agent": "bob", "since": synced["cursor"]}).json()
        assert again["changes"] == []
        own = http.get("/v1/sessions/web/changes", params={"agent": "alice"}).json()
        assert own["changes"] == []

        status = http.get("/v1/sessions/web/status", params={"agent": "carol"}).json()
        assert {a["agent"] for a in status["agents"]} == {"alice", "bob", "carol"}
        assert {c["file_path"] for c in status["claims"]} == {"src/a.py", "src/b.py"}
        assert status["recent_changes"][-1]["agent"] == "alice"


def test_sessions_are_isolated_between_sessions_and_tenants(api: RunningServer) -> None:
    me, other = make_account(api), make_account(api)
    with api.client(me.key) as http:
        http.post("/v1/sessions/web/claims", json={"agent": "alice", "file_paths": ["x.py"]})
        http.post("/v1/sessions/web/changes", json={"agent": "alice", "file_paths": [], "changes_summary": "hello"})
        elsewhere = http.post("/v1/sessions/mobile/claims", json={"agent": "bob", "file_paths": ["x.py"]}).json()
        assert elsewhere["granted"] is True
        assert http.get("/v1/sessions/mobile/changes", params={"agent": "bob"}).json()["changes"] == []
    with api.client(other.key) as http:
        assert http.post("/v1/sessions/web/claims", json={"agent": "eve", "file_paths": ["x.py"]}).json()["granted"]
        assert http.get("/v1/sessions/web/changes", params={"agent": "eve"}).json()["changes"] == []
        assert http.get("/v1/sessions/web/status", params={"agent": "eve"}).json()["claims"][0]["agent"] == "eve"


def test_bad_session_input_gets_clear_errors(api: RunningServer) -> None:
    me = make_account(api)
    reader = add_key(api, me.user_id, scope="read")
    with api.client(me.key) as http:
        cases = {
            "bad session": http.post("/v1/sessions/a__b/claims", json={"agent": "x", "file_paths": ["f"]}),
            "bad agent": http.post("/v1/sessions/web/claims", json={"agent": "no spaces", "file_paths": ["f"]}),
            "no paths": http.post("/v1/sessions/web/claims", json={"agent": "x", "file_paths": []}),
            "too long": http.post(
                "/v1/sessions/web/claims", json={"agent": "x", "file_paths": ["f"], "duration_minutes": 0}
            ),
            "bad cursor": http.get("/v1/sessions/web/changes", params={"agent": "x", "since": "garbage"}),
            "no summary": http.post("/v1/sessions/web/changes", json={"agent": "x", "changes_summary": ""}),
        }
    for name, response in cases.items():
        assert response.status_code in (400, 422), f"{name}: {response.status_code} {response.text}"
        assert response.json()["error"]["message"], name
    with api.client(reader.key) as http:
        denied = http.post("/v1/sessions/web/claims", json={"agent": "x", "file_paths": ["f"]})
        assert denied.status_code == 403
        assert http.get("/v1/sessions/web/status", params={"agent": "x"}).status_code == 200


def _sse_events(client: httpx.Client, url: str, ready: threading.Event, out: queue.Queue[dict[str, Any]]) -> None:
    # The test closes the client to end the stream, which may cut a line in half.
    with contextlib.suppress(httpx.HTTPError, RuntimeError, ValueError):
        _read_sse(client, url, ready, out)


def _read_sse(client: httpx.Client, url: str, ready: threading.Event, out: queue.Queue[dict[str, Any]]) -> None:
    with client.stream("GET", url) as response:
        event = None
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                data = json.loads(line.split(":", 1)[1])
                if event == "ready":
                    ready.set()
                else:
                    out.put({"event": event, **data})


@pytest.fixture
def sse_stream(api: RunningServer) -> Iterator[tuple[Any, queue.Queue[dict[str, Any]]]]:
    me = make_account(api)
    received: queue.Queue[dict[str, Any]] = queue.Queue()
    ready = threading.Event()
    client = httpx.Client(base_url=api.base_url, headers={"Authorization": f"Bearer {me.key}"}, timeout=None)
    thread = threading.Thread(
        target=_sse_events, args=(client, "/v1/sessions/web/events", ready, received), daemon=True
    )
    thread.start()
    assert ready.wait(60), "the SSE stream did not open"
    yield me, received
    client.close()


def test_the_sse_stream_carries_claims_releases_and_changes(
    api: RunningServer, sse_stream: tuple[Any, queue.Queue[dict[str, Any]]]
) -> None:
    me, received = sse_stream
    with api.client(me.key) as http:
        http.post("/v1/sessions/web/claims", json={"agent": "alice", "file_paths": ["a.py"]})
        claim = received.get(timeout=30)
        http.post("/v1/sessions/web/release", json={"agent": "alice", "file_paths": ["a.py"]})
        http.post(
            "/v1/sessions/web/changes", json={"agent": "alice", "file_paths": ["a.py"], "changes_summary": "done"}
        )
        release = received.get(timeout=30)
        change = received.get(timeout=30)
        # Another session's events never reach this stream.
        http.post("/v1/sessions/other/changes", json={"agent": "bob", "changes_summary": "elsewhere"})
    assert (claim["event"], claim["agent"]) == ("claim", "alice")
    assert release["event"] == "release"
    assert change["event"] == "change" and change["data"]["summary"] == "done"
    with pytest.raises(queue.Empty):
        received.get(timeout=0.3)


def _read_until(response: httpx.Response, wanted: int, after_ready: Any = None) -> list[dict[str, Any]]:
    """The events (with their SSE ids) of an open stream, until ``wanted`` non-ready ones arrived."""
    got: list[dict[str, Any]] = []
    event: dict[str, Any] = {}
    for line in response.iter_lines():
        if line.startswith(("event:", "id:", "data:")):
            field, _, value = line.partition(":")
            event[field] = value.strip()
        elif line == "" and event:
            if event.get("event") == "ready":
                if after_ready is not None:
                    after_ready()
            else:
                got.append({"id": event.get("id"), "kind": event["event"], **json.loads(event["data"])})
                if len(got) == wanted:
                    return got
            event = {}
    raise AssertionError(f"the stream ended after {got}")


def test_a_reconnecting_stream_replays_the_changes_it_missed_then_goes_on_live(api: RunningServer) -> None:
    me = make_account(api)
    streams = httpx.Client(
        base_url=api.base_url, headers={"Authorization": f"Bearer {me.key}"}, timeout=httpx.Timeout(10.0)
    )
    with api.client(me.key) as http, streams:

        def broadcast(summary: str) -> str:
            response = http.post("/v1/sessions/web/changes", json={"agent": "alice", "changes_summary": summary})
            assert response.status_code == 200, response.text
            return str(response.json()["cursor"])

        with streams.stream("GET", "/v1/sessions/web/events") as response:
            [first] = _read_until(response, 1, after_ready=lambda: broadcast("one"))
        assert (first["kind"], first["data"]["summary"]) == ("change", "one")
        assert first["id"] == first["data"]["cursor"]  # the SSE id is the change's cursor

        # While no stream is open, two more changes and a claim happen.
        broadcast("two")
        http.post("/v1/sessions/web/claims", json={"agent": "alice", "file_paths": ["a.py"]})
        broadcast("three")

        headers = {"Last-Event-ID": first["id"]}
        with streams.stream("GET", "/v1/sessions/web/events", headers=headers) as response:
            assert response.status_code == 200
            events = _read_until(response, 3, after_ready=lambda: broadcast("four"))
        assert [(e["kind"], e["data"]["summary"]) for e in events] == [
            ("change", "two"),
            ("change", "three"),
            ("change", "four"),
        ]
        assert [e["id"] for e in events] == [e["data"]["cursor"] for e in events]

        # `since` does the same for clients that cannot set the header; from the newest cursor nothing is replayed.
        with streams.stream("GET", "/v1/sessions/web/events", params={"since": events[-1]["id"]}) as response:
            [live] = _read_until(response, 1, after_ready=lambda: broadcast("five"))
        assert live["data"]["summary"] == "five"


@pytest.mark.parametrize("cursor", ["yesterday", "12-ab", "-1-0"])
def test_a_bad_resume_cursor_is_refused_with_a_message_that_says_so(api: RunningServer, cursor: str) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        for request in (
            {"headers": {"Last-Event-ID": cursor}},
            {"params": {"since": cursor}},
        ):
            response = http.get("/v1/sessions/web/events", **request)
            assert response.status_code == 422, response.text  # the API's status for a well-formed but invalid value
            assert f"invalid cursor '{cursor}'" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/sessions/web/status", None),  # no agent either
        ("GET", "/v1/sessions/web/changes", None),
        ("POST", "/v1/sessions/web/claims", {"nonsense": True}),
        ("POST", "/v1/memories", {"content": ""}),
        ("GET", "/v1/memories", None),
    ],
)
def test_without_a_credential_the_answer_is_401_before_any_validation(
    api: RunningServer, method: str, path: str, body: Any
) -> None:
    response = httpx.request(method, api.base_url + path, json=body, params={"scope": "planet"})
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_an_open_stream_ends_once_its_key_is_revoked(api: RunningServer) -> None:
    me = make_account(api)
    listener = add_key(api, me.user_id)
    streams = httpx.Client(
        base_url=api.base_url, headers={"Authorization": f"Bearer {listener.key}"}, timeout=httpx.Timeout(10.0)
    )
    with api.client(me.key) as http, streams, streams.stream("GET", "/v1/sessions/web/events") as response:

        def revoke_then_broadcast() -> None:
            revoke_key(api, listener.key_id)
            time.sleep(api.settings.stream_recheck_seconds)
            http.post("/v1/sessions/web/changes", json={"agent": "alice", "changes_summary": "after"})

        [event] = _read_until(response, 1, after_ready=revoke_then_broadcast)
    assert event["kind"] == "revoked" and "revoked" in event["message"]
