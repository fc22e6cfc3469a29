"""A linked machine is told that its edge account was deleted: its link stops for good (state account_deleted, said
by `engram sync status`) instead of retrying, and nothing is lost on the machine."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx

from tests.sync.processes import Deployment, HostedEdge
from tests.sync.test_link import contents, link_of, until
from tests.web.conftest import PASSWORD, Browser


def _edge_requests(edge: HostedEdge) -> int:
    """How many requests the edge answered on /sync/v1 and its token endpoint (its /metrics)."""
    text = httpx.get(f"{edge.url}/metrics", timeout=30).text
    pattern = re.compile(r"^engram_http_requests_total\{([^}]*)\} ([0-9.e+]+)$", re.M)
    return int(sum(float(n) for labels, n in pattern.findall(text) if "/sync/v1" in labels or "/oauth/token" in labels))


def test_a_machine_linked_to_a_deleted_account_stops_and_says_why(edge: HostedEdge, node: Deployment) -> None:
    person = Browser(edge.server).signup()  # type: ignore[arg-type]
    assert person.user_id is not None
    edge_key = person.create_key()
    local_user, local_key = node.user()
    node.start()
    client = edge.sync_client(person.user_id, "laptop of ada")
    node.engram(
        "sync", "link", edge.url, "--user", local_user, "--client-id", client["client_id"],
        "--client-secret", client["client_secret"],
    )  # fmt: skip
    with node.client(local_key) as http:
        assert http.post("/v1/memories", json={"content": "first note"}).status_code == 201
    until(lambda: "first note" in contents(edge, edge_key), "first note synced")

    deleted = person.submit("/account/delete", "/account/delete", password=PASSWORD)
    assert deleted.status_code == 200, deleted.text
    with node.client(local_key) as http:
        assert http.post("/v1/memories", json={"content": "written after the edge account went"}).status_code == 201

    def stopped() -> dict[str, Any] | None:
        link = link_of(node, local_user)
        return link if link["state"] == "account_deleted" else None

    link = until(stopped, "the link says the account is gone")
    assert "deleted" in link["error"] and "engram sync unlink" in link["error"]
    assert link["pending"] >= 1, link
    assert "written after the edge account went" in contents(node, local_key), "nothing lost on the machine"

    # Final: more local writes wake no retry (the pusher and the long poll have ended). Which answer told the node
    # (410 on /sync/v1, or the token endpoint's account_deleted when its long poll ended and it renewed) depends on
    # timing; either stops it.
    answered = _edge_requests(edge)
    with node.client(local_key) as http:
        for n in range(3):
            assert http.post("/v1/memories", json={"content": f"later note {n}"}).status_code == 201
    time.sleep(3)  # several retry periods of an offline edge (ENGRAM_SYNC_RETRY_MAX_SECONDS is 1)
    assert _edge_requests(edge) == answered
    assert link_of(node, local_user)["state"] == "account_deleted"
