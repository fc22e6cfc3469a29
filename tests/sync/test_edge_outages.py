"""An edge that hangs or stops while nodes sync with it: real `engram serve` processes over real HTTP."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sync.processes import Deployment, link_with_client
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
