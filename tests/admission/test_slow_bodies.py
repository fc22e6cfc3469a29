"""A client slow to send its body holds no slot: one tenant's stalled uploads never leave another tenant 503s, they
end in 408 after ``request_body_seconds``, a client that leaves halfway is a 499 (not a server error), and a body
declared over the limit is refused before any of it is read."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.migrate import upgrade_to_head
from tests.conftest import _settings
from tests.harness import RunningServer, make_account, serve

BODY_SECONDS = 3.0


@pytest.fixture
def two_slots(tmp_path: Any, embedder: object) -> Iterator[RunningServer]:
    """Two requests in service at most, little patience for the rest, and a short time for a body to arrive."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    upgrade_to_head(url)
    settings = _settings(
        tmp_path,
        url,
        request_body_seconds=BODY_SECONDS,
        max_body_bytes=65536,
        admission_initial_limit=2,
        admission_min_limit=2,
        admission_max_limit=2,
        admission_queue_timeout_seconds=0.2,
        admission_overloaded_wait_seconds=0.2,
        admission_min_share=1000,
    )
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def _stall(
    server: RunningServer, key: str, path: str, declared: int = 1000, sent: bytes = b'{"query":'
) -> socket.socket:
    """A request whose headers promise ``declared`` bytes of body, of which only ``sent`` ever come."""
    host, port = server.base_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    )
    sock.sendall(head.encode() + sent)
    return sock


def _answer(sock: socket.socket) -> bytes:
    sock.settimeout(10 * BODY_SECONDS)  # only a hang fails here
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_another_tenants_stalled_bodies_take_no_slot_and_end_in_408(two_slots: RunningServer) -> None:
    flooder, quiet = make_account(two_slots), make_account(two_slots)
    stalled = [_stall(two_slots, flooder.key, "/v1/memories/search") for _ in range(6)]
    stalled += [_stall(two_slots, flooder.key, "/v1/memories", sent=b'{"content": "half')]
    stalled += [_stall(two_slots, flooder.key, "/v1/import", sent=b'{"format": "engram-export"')]
    try:
        time.sleep(0.5)  # every stalled request is authenticated and waiting for the rest of its body
        with two_slots.client(quiet.key) as http:
            for _ in range(5):
                found = http.post("/v1/memories/search", json={"query": "anything"})
                assert found.status_code == 200, found.text
            written = http.post("/v1/memories", json={"content": "written beside a stalled flood"})
            assert written.status_code == 201, written.text
        for sock in stalled:
            answer = _answer(sock)
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert b"request_timeout" in answer or b"Content-Length" in answer, answer
    finally:
        for sock in stalled:
            sock.close()
    with two_slots.client(flooder.key) as http:
        assert http.get("/v1/memories").json()["memories"] == []  # nothing half-sent was stored


def test_a_client_that_leaves_halfway_is_a_499_in_the_metrics_not_a_500(two_slots: RunningServer) -> None:
    me = make_account(two_slots)
    for path in ("/v1/memories/search", "/v1/import"):
        sock = _stall(two_slots, me.key, path)
        time.sleep(0.3)
        sock.close()
    deadline = time.monotonic() + 10 * BODY_SECONDS
    while True:
        metrics = httpx.get(f"{two_slots.base_url}/metrics", timeout=30).text
        gone = [
            line for line in metrics.splitlines() if line.startswith("engram_http_requests_total") and '"499"' in line
        ]
        if len(gone) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(gone) == 2, gone
    assert not [
        line for line in metrics.splitlines() if line.startswith("engram_http_requests_total") and '"500"' in line
    ]


@pytest.mark.parametrize("path", ["/v1/memories", "/v1/import", "/mcp/v2/claude/{user}"])
def test_a_body_declared_over_the_limit_is_refused_before_it_is_sent(two_slots: RunningServer, path: str) -> None:
    me = make_account(two_slots)
    sock = _stall(two_slots, me.key, path.format(user=me.user_id), declared=10**12, sent=b"")
    try:
        answer = _answer(sock)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer
