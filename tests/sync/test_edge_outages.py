"""An edge that hangs or stops while nodes sync with it: real `engram serve` processes over real HTTP."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.sync.processes import Deployment, link_with_client
from tests.sync.proxy import CappingProxy
from tests.sync.test_link import contents, link_of, until

# Hang-only: a quiet machine does each of these in a few seconds.
GENEROUS_SECONDS = 120.0


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[Deployment]:
    deployment = Deployment(tmp_path / "edge")
    deployment.setup()
    deployment.start()
    try:
        yield deployment
    finally:
        if deployment.process is not None:
            deployment.process.send_signal(signal.SIGCONT)
        deployment.stop()


def test_a_hung_edge_shows_offline_within_the_request_timeout_and_writes_go_on(
    edge: Deployment, tmp_path: Path
) -> None:
    """SIGSTOP: the edge's kernel still takes connections and bodies, nothing answers. The node's long poll and its
    pushes give up by their timeouts (the poll's wait plus half a request's timeout), the link says offline naming
    the bound, local writes are taken meanwhile and wait, and everything goes once the edge runs again."""
    node = Deployment(
        tmp_path / "node",
        settings={"ENGRAM_SYNC_REQUEST_TIMEOUT_SECONDS": "2", "ENGRAM_SYNC_PULL_WAIT_SECONDS": "2"},
    )
    node.setup()
    node.start()
    try:
        edge_user, edge_key = edge.user()
        local_user, local_key = node.user()
        link_with_client(node, edge, local_user, edge_user, "box of a hung edge")
        with node.client(local_key) as http:
            assert http.post("/v1/memories", json={"content": "before the hang"}).status_code == 201
        until(lambda: "before the hang" in contents(edge, edge_key), "synced before the hang")
        until(lambda: link_of(node, local_user)["pending"] == 0, "nothing pending", GENEROUS_SECONDS)

        assert edge.process is not None
        edge.process.send_signal(signal.SIGSTOP)
        hung_at = time.monotonic()
        try:
            link = until(
                lambda: (found := link_of(node, local_user))["state"] == "offline" and found,
                "the link shows the hung edge offline",
                GENEROUS_SECONDS,
            )
            print(f"offline {time.monotonic() - hung_at:.1f} s after the edge hung")
            # The bound it gave up at: a pull's 2 s wait plus half of the 2 s timeout, or a push's 2 s.
            bound = re.search(r"within ([0-9.]+) s", link["error"])
            assert bound is not None and float(bound.group(1)) <= 3.0, link["error"]

            with node.client(local_key) as http:
                for n in range(5):
                    assert http.post("/v1/memories", json={"content": f"while hung {n}"}).status_code == 201
            waiting = link_of(node, local_user)
            assert waiting["pending"] == 5 and waiting["state"] == "offline"
        finally:
            edge.process.send_signal(signal.SIGCONT)

        everything = {"before the hang"} | {f"while hung {n}" for n in range(5)}
        until(lambda: contents(edge, edge_key) == everything, "the backlog reached the edge", GENEROUS_SECONDS)
        until(
            lambda: (lambda x: x["pending"] == 0 and x["state"] == "ok")(link_of(node, local_user)),
            "the link is ok again",
            GENEROUS_SECONDS,
        )
    finally:
        node.stop()


def _sync_token(edge: Deployment, user_id: str) -> str:
    client = edge.sync_client(user_id, "a long-polling script")
    response = httpx.post(
        f"{edge.url}/oauth/token",
        data={"grant_type": "client_credentials", "scope": "sync", "resource": f"{edge.url}/sync/v1"},
        auth=(client["client_id"], client["client_secret"]),
    )
    response.raise_for_status()
    token: str = response.json()["access_token"]
    return token


def _in_progress(edge: Deployment) -> float:
    text = httpx.get(f"{edge.url}/metrics").text
    [line] = [line for line in text.splitlines() if line.startswith("engram_http_requests_in_progress ")]
    return float(line.split()[1])


def test_an_edge_stopped_while_a_node_long_polls_answers_the_poll_and_logs_no_error(edge: Deployment) -> None:
    user_id, _ = edge.user()
    bearer = {"Authorization": f"Bearer {_sync_token(edge, user_id)}"}
    first = httpx.get(f"{edge.url}/sync/v1/pull", params={"node": "n_script"}, headers=bearer)
    assert first.status_code == 200
    cursor = first.json()["cursor"]

    answer: dict[str, Any] = {}

    def long_poll() -> None:
        params = {"cursor": cursor, "wait": 60, "node": "n_script"}
        try:
            answer["response"] = httpx.get(f"{edge.url}/sync/v1/pull", params=params, headers=bearer, timeout=120)
        except httpx.HTTPError as exc:
            answer["error"] = exc

    poll = threading.Thread(target=long_poll)
    poll.start()
    until(lambda: _in_progress(edge) >= 2, "the long poll is waiting on the edge (beside /metrics itself)")
    assert edge.process is not None
    process = edge.process
    process.send_signal(signal.SIGTERM)
    poll.join(GENEROUS_SECONDS)
    assert not poll.is_alive()
    # uvicorn raises the signal again once it has shut down, as it does for any SIGTERM.
    assert process.wait(GENEROUS_SECONDS) in (0, -signal.SIGTERM)

    assert "error" not in answer, answer
    response: httpx.Response = answer["response"]
    assert response.status_code == 200, response.text
    assert response.json() == {"changes": [], "cursor": cursor, "more": False}
    log = edge.log()
    assert "Traceback" not in log and "ERROR" not in log.upper().replace("ERRORS", ""), log


def test_an_edge_down_twice_behind_a_proxy_shows_offline_each_time(tmp_path: Path) -> None:
    """nginx answers the same 502 page for every request while the edge is down: a link that came back from one
    outage shows the next, though its error reads the same as before."""
    with CappingProxy(limit=16 * 1024 * 1024) as proxy:
        edge = Deployment(tmp_path / "edge", settings={"ENGRAM_PUBLIC_BASE_URL": proxy.url})
        proxy.upstream = edge.url
        node = Deployment(tmp_path / "node")
        edge.setup()
        node.setup()
        try:
            edge.start()
            node.start()
            edge_user, _ = edge.user()
            local_user, _ = node.user()
            client = edge.sync_client(edge_user, "box behind nginx")
            node.engram(
                "sync", "link", proxy.url, "--user", local_user, "--client-id", client["client_id"],
                "--client-secret", client["client_secret"],
            )  # fmt: skip
            for outage in ("first", "second"):
                until(
                    lambda: link_of(node, local_user)["state"] == "ok",
                    f"ok before the {outage} outage",
                    GENEROUS_SECONDS,
                )
                edge.kill()
                link = until(
                    lambda: (found := link_of(node, local_user))["state"] == "offline" and found,
                    f"the {outage} outage shows offline",
                    GENEROUS_SECONDS,
                )
                assert "502" in link["error"]
                edge.start()
        finally:
            node.stop()
            edge.stop()
