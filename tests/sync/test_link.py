"""Linking nodes to an edge, as people and scripts do it: `engram serve` and `engram sync ...` processes over HTTP."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.sync.processes import Deployment, HostedEdge, link_with_client, search
from tests.sync.proxy import CappingProxy

WAIT_SECONDS = 30.0
LINK_FIELDS = {"edge", "local_user", "edge_user", "pending", "last_push_at", "last_pull_at", "state", "error"}
PLANS = {
    "free": {"requests_per_minute": 10**6, "key_requests_per_minute": 10**6, "max_memories": 10**6},
    "tiny": {"requests_per_minute": 10**6, "key_requests_per_minute": 10**6, "max_memories": 2},
}


def until(check: Callable[[], Any], what: str, seconds: float = WAIT_SECONDS) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {seconds:.0f} s: {what}"
        time.sleep(0.05)


def contents(deployment: Deployment | HostedEdge, key: str) -> set[str]:
    with deployment.client(key) as http:
        response = http.get("/v1/memories", params={"limit": 200})
        response.raise_for_status()
        return {m["content"] for m in response.json()["memories"]}


def found(deployment: Deployment | HostedEdge, key: str, query: str) -> set[str]:
    return {r["content"] for r in search(deployment, key, query)}


def link_of(node: Deployment, local_user: str) -> dict[str, Any]:
    [link] = [link for link in node.status()["links"] if link["local_user"] == local_user]
    return link


@contextlib.contextmanager
def hosted_edge(tmp_path_factory: pytest.TempPathFactory, embedder: Any, **overrides: Any) -> Iterator[HostedEdge]:
    """An edge on a PostgreSQL database of its own, served in this process."""
    from tests.conftest import PG_HOST, PG_PORT, PG_USER, _admin_execute, _settings
    from tests.harness import serve

    name = f"engram_edge_{uuid.uuid4().hex[:10]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    from app.migrate import upgrade_to_head

    upgrade_to_head(url)
    settings = _settings(tmp_path_factory.mktemp("edge"), url, plans=PLANS, **overrides)
    try:
        with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
            yield HostedEdge(server)
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory, pg_server: str, embedder: Any) -> Iterator[HostedEdge]:
    """One edge for the module's tests, each test with users of its own."""
    with hosted_edge(tmp_path_factory, embedder) as server:
        yield server


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Deployment]:
    deployment = Deployment(tmp_path / "node")
    deployment.setup()
    try:
        yield deployment
    finally:
        deployment.stop()


def test_a_link_made_while_serving_exchanges_everything_then_each_write_as_it_happens(
    edge: HostedEdge, node: Deployment
) -> None:
    edge_user, edge_key = edge.user()
    local_user, local_key = node.user()
    node.start()
    with node.client(local_key) as http:
        assert http.post("/v1/memories", json={"content": "the laptop knew this first"}).status_code == 201
    with edge.client(edge_key) as http:
        assert http.post("/v1/memories", json={"content": "the edge knew this first"}).status_code == 201

    linked = link_with_client(node, edge, local_user, edge_user, "build box")
    assert set(linked) == LINK_FIELDS
    assert (linked["edge"], linked["local_user"], linked["edge_user"]) == (edge.url, local_user, edge_user)
    assert linked["state"] == "ok" and linked["pending"] == 1

    # The full exchange, without restarting the server: each side finds the other's by search.
    until(lambda: "the laptop knew this first" in found(edge, edge_key, "what did the laptop know"), "pushed")
    until(lambda: "the edge knew this first" in found(node, local_key, "what did the edge know"), "pulled")

    with node.client(local_key) as http:
        made = http.post("/v1/memories", json={"content": "deploys need two approvals", "tags": ["ops"]}).json()
    until(lambda: "deploys need two approvals" in found(edge, edge_key, "how many approvals for a deploy"), "live")
    with edge.client(edge_key) as http:
        assert http.patch(f"/v1/memories/{made['id']}", json={"content": "deploys need three approvals"}).is_success
    until(lambda: "deploys need three approvals" in contents(node, local_key), "an edit on the edge reaches the node")
    with node.client(local_key) as http:
        assert http.delete(f"/v1/memories/{made['id']}").is_success
        history = http.get(f"/v1/memories/{made['id']}/history").json()["history"]
    assert [h["event"] for h in history] == ["ADD", "UPDATE", "DELETE"]
    until(lambda: "deploys need three approvals" not in contents(edge, edge_key), "a delete reaches the edge")

    status = node.status()
    assert set(status) == {"node_id", "links"} and status["node_id"].startswith("n_")
    link = until(lambda: (lambda x: x if x["pending"] == 0 else None)(link_of(node, local_user)), "nothing pending")
    assert link["state"] == "ok" and link["error"] is None
    assert link["last_push_at"] and link["last_pull_at"]
    metrics = httpx.get(f"{node.url}/metrics").text
    assert "engram_sync_pending_changes" in metrics and "engram_sync_pull_lag_seconds" in metrics


def test_a_backlog_drains_in_many_batches_while_the_node_keeps_writing(edge: HostedEdge, node: Deployment) -> None:
    """Batches of four, each read while the edge applies the one before: whatever the node writes meanwhile (new
    memories, edits and deletes of memories already sent or still waiting) ends up on the edge as the node has it."""
    edge_user, edge_key = edge.user()
    local_user, local_key = node.user()
    node.settings["ENGRAM_SYNC_BATCH_SIZE"] = "4"
    node.start()
    with node.client(local_key) as http:
        ids = [http.post("/v1/memories", json={"content": f"backlog note {n}"}).json()["id"] for n in range(30)]
        link_with_client(node, edge, local_user, edge_user, "pipelined box")
        for n in range(0, 30, 3):
            assert http.patch(f"/v1/memories/{ids[n]}", json={"content": f"backlog note {n}, edited"}).is_success
        for n in range(1, 30, 5):
            assert http.delete(f"/v1/memories/{ids[n]}").is_success
        for n in range(30, 40):
            assert http.post("/v1/memories", json={"content": f"backlog note {n}"}).status_code == 201
    kept = [n for n in range(40) if n >= 30 or n % 5 != 1]
    expected = {f"backlog note {n}" + (", edited" if n < 30 and n % 3 == 0 else "") for n in kept}
    assert contents(node, local_key) == expected
    until(lambda: contents(edge, edge_key) == expected, "the edge holds what the node holds")
    until(lambda: link_of(node, local_user)["pending"] == 0, "nothing pending")


def push_requests(edge: HostedEdge) -> int:
    """How many pushes the edge has taken (its /metrics)."""
    text = httpx.get(f"{edge.url}/metrics").text
    counted = [line for line in text.splitlines() if line.startswith("engram_http_requests_total{")]
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in counted
        if 'path="/sync/v1/push"' in line and 'status="200"' in line
    )


def test_a_push_too_large_for_one_body_goes_in_parts(edge: HostedEdge, node: Deployment) -> None:
    """A batch whose body would pass the push limit (the edge's 16 MiB, or less for a proxy in front of it) is sent
    in parts, and the link moves past it once every part was taken."""
    edge_user, edge_key = edge.user()
    local_user, local_key = node.user()
    node.settings["ENGRAM_SYNC_PUSH_MAX_BYTES"] = str(16 * 1024)  # a few changes with their vectors
    node.start()
    texts = {f"part note {n}" for n in range(30)}
    with node.client(local_key) as http:
        assert http.post("/v1/memories", json={"memories": [{"content": t} for t in sorted(texts)]}).is_success
    before = push_requests(edge)
    link_with_client(node, edge, local_user, edge_user, "small body box")
    until(lambda: contents(edge, edge_key) == texts, "every part reached the edge")
    until(lambda: link_of(node, local_user)["pending"] == 0, "nothing pending")
    assert push_requests(edge) - before >= 5  # one batch of 30 changes, in bodies of at most 16 KiB


def _link_through(node: Deployment, proxy: CappingProxy, edge: HostedEdge, local_user: str, edge_user: str) -> None:
    client = edge.sync_client(edge_user, "box behind nginx")
    node.engram(
        "sync", "link", proxy.url, "--user", local_user, "--client-id", client["client_id"],
        "--client-secret", client["client_secret"],
    )  # fmt: skip


@contextlib.contextmanager
def behind_proxy(
    tmp_path_factory: pytest.TempPathFactory, embedder: Any, node: Deployment, limit: int
) -> Iterator[tuple[CappingProxy, HostedEdge, str, str, str]]:
    """An edge behind a proxy that takes bodies up to ``limit`` bytes, and the node's user linked to an edge user
    through the proxy: (proxy, edge, the edge user's key, the local user, the local user's key)."""
    with (
        CappingProxy(limit=limit) as proxy,
        hosted_edge(tmp_path_factory, embedder, public_base_url=proxy.url) as edge,
    ):
        proxy.upstream = edge.url
        edge_user, edge_key = edge.user()
        local_user, local_key = node.user()
        node.start()
        _link_through(node, proxy, edge, local_user, edge_user)
        yield proxy, edge, edge_key, local_user, local_key


def test_a_proxy_refusing_a_push_for_its_size_gets_smaller_parts_and_nothing_is_lost(
    tmp_path_factory: pytest.TempPathFactory, pg_server: str, embedder: Any, node: Deployment
) -> None:
    """Behind a proxy with a smaller body limit than the node sends (nginx's 413 page), a link sends the batch again
    in parts below it, by itself, and keeps sending parts that size."""
    with behind_proxy(tmp_path_factory, embedder, node, 24 * 1024) as (proxy, edge, edge_key, local_user, local_key):
        first = {f"proxied note {n}" for n in range(40)}
        with node.client(local_key) as http:  # one commit, one push of about 100 KiB
            assert http.post("/v1/memories", json={"memories": [{"content": t} for t in sorted(first)]}).is_success
        until(lambda: contents(edge, edge_key) == first, "every part reached the edge")
        until(lambda: link_of(node, local_user)["pending"] == 0, "nothing pending")
        assert link_of(node, local_user)["state"] == "ok"
        refused = len(proxy.refused)
        assert refused >= 1 and min(proxy.refused) > proxy.limit

        # The next batch goes in parts the proxy takes: the link's runner learnt its limit.
        later = {f"later note {n}" for n in range(40)}
        with node.client(local_key) as http:
            assert http.post("/v1/memories", json={"memories": [{"content": t} for t in sorted(later)]}).is_success
        until(lambda: contents(edge, edge_key) == first | later, "the later batch reached the edge")
        assert len(proxy.refused) == refused
        assert "refused for its size" in node.log()


def test_a_memory_too_large_for_any_push_is_refused_by_itself_and_the_rest_goes(
    tmp_path_factory: pytest.TempPathFactory, pg_server: str, embedder: Any, node: Deployment
) -> None:
    with behind_proxy(tmp_path_factory, embedder, node, 6 * 1024) as (_, edge, edge_key, local_user, local_key):
        small = {f"small note {n}" for n in range(20)}
        big = "a long design note: " + "the build runs in stages. " * 300
        with node.client(local_key) as http:
            batch = [{"content": t} for t in sorted(small)] + [{"content": big}]
            response = http.post("/v1/memories", json={"memories": batch})
            assert response.is_success
            big_id = response.json()["results"][-1]["id"]
        until(lambda: contents(edge, edge_key) == small, "every memory a body can carry reached the edge")
        link = until(lambda: (found := link_of(node, local_user))["state"] == "refused" and found, "the link refused")
        assert big_id in link["error"] and "for its size" in link["error"] and "<html>" not in link["error"]
        assert link["pending"] >= 1  # the large one waits on the node, nothing lost
        with node.client(local_key) as http:
            assert http.get(f"/v1/memories/{big_id}").json()["content"] == big


def test_sync_once_exchanges_without_a_server_and_says_why_when_it_cannot(edge: HostedEdge, node: Deployment) -> None:
    edge_user, edge_key = edge.user()
    local_user, local_key = node.user()
    node.start()
    with node.client(local_key) as http:
        assert http.post("/v1/memories", json={"content": "written before the link"}).status_code == 201
    node.stop()
    link_with_client(node, edge, local_user, edge_user, "script box")
    with edge.client(edge_key) as http:
        assert http.post("/v1/memories", json={"content": "written on the edge"}).status_code == 201

    once = node.engram("sync", "once", "--timeout", "60")
    assert once.returncode == 0, once.stderr
    [done] = json.loads(once.stdout)["links"]
    assert (done["pending"], done["state"]) == (0, "ok")
    assert "written before the link" in contents(edge, edge_key)

    # The edge unreachable: a non-zero exit, one line on stderr, the link says offline, nothing lost.
    with sqlite3.connect(node.data_dir / "engram.db") as db:
        db.execute("UPDATE sync_links SET edge_url = ?", (f"http://127.0.0.1:{_closed_port()}",))
    failed = node.engram("sync", "once", "--timeout", "30", check=False)
    assert failed.returncode != 0 and failed.stdout == ""
    assert len(failed.stderr.strip().splitlines()) == 1 and "cannot reach" in failed.stderr
    link = link_of(node, local_user)
    assert link["state"] == "offline" and "cannot reach" in link["error"]

    node.start()  # what `once` pulled went into the index with the record: found by search at once
    assert "written on the edge" in found(node, local_key, "what was written on the edge")


def test_unlink_removes_the_link_and_revokes_its_tokens(edge: HostedEdge, node: Deployment) -> None:
    edge_user, _ = edge.user()
    local_user, _ = node.user()
    link_with_client(node, edge, local_user, edge_user, "short-lived")
    with sqlite3.connect(node.data_dir / "engram.db") as db:
        [(token,)] = db.execute("SELECT access_token FROM sync_links").fetchall()
    assert httpx.get(f"{edge.url}/sync/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200

    done = node.engram("sync", "unlink", edge.url + "/", "--user", local_user)
    assert json.loads(done.stdout) == {
        "edge": edge.url, "local_user": local_user, "edge_user": edge_user, "unlinked": True, "revoked": True
    }  # fmt: skip
    assert node.status()["links"] == []
    refused = httpx.get(f"{edge.url}/sync/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 401 and "WWW-Authenticate" in refused.headers
    again = node.engram("sync", "unlink", edge.url, "--user", local_user, check=False)
    assert again.returncode == 1 and "no link" in again.stderr


def test_a_push_over_the_edges_quota_is_refused_with_the_reason_and_stays_pending(
    edge: HostedEdge, node: Deployment
) -> None:
    edge_user, edge_key = edge.user()
    _set_plan(edge, edge_user, "tiny")
    local_user, local_key = node.user()
    node.start()
    with node.client(local_key) as http:
        for n in range(3):
            assert http.post("/v1/memories", json={"content": f"memory {n}"}).status_code == 201
    link_with_client(node, edge, local_user, edge_user, "over quota")
    link = until(lambda: (lambda x: x if x["state"] == "refused" else None)(link_of(node, local_user)), "refused")
    assert "tiny plan stores at most 2 memories" in link["error"] and link["pending"] == 3
    with node.client(local_key) as http:
        assert http.post("/v1/memories", json={"content": "still writable here"}).status_code == 201
    assert link_of(node, local_user)["pending"] == 4, "kept, waiting for room"
    assert contents(edge, edge_key) == set(), "nothing of a refused batch was applied"


def _set_plan(edge: HostedEdge, user_id: str, plan: str) -> None:
    from sqlalchemy import update

    from app.accounts.models import User

    async def run() -> None:
        async with edge.container.db.session() as session:
            await session.execute(update(User).where(User.id == user_id).values(plan=plan))
        edge.container.quotas._plan_cache.pop(user_id, None)

    edge.run(run())


def _closed_port() -> int:
    from tests.harness import free_port

    return free_port()


def test_a_renewed_token_keeps_a_link_going_and_a_machine_cut_off_on_the_dashboard_stops_losing_nothing(
    edge: HostedEdge, node: Deployment
) -> None:
    from tests.web.conftest import Browser

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

    machine = until(lambda: re.search(r'data-machine-id="([^"]+)"', person.get("/dashboard/sync").text), "listed")
    page = person.get("/dashboard/sync").text
    assert "laptop of ada" in page and 'data-behind="0"' in page

    # The edge forgets the current access token: the node's next request gets 401, renews once, goes on.
    with sqlite3.connect(node.data_dir / "engram.db") as db:
        [(token,)] = db.execute("SELECT access_token FROM sync_links").fetchall()
    revoked = httpx.post(
        f"{edge.url}/oauth/revoke", data={"token": token}, auth=(client["client_id"], client["client_secret"])
    )
    assert revoked.status_code == 200
    with node.client(local_key) as http:
        assert http.post("/v1/memories", json={"content": "second note"}).status_code == 201
    until(lambda: "second note" in contents(edge, edge_key), "synced after renewing the token")

    cut = person.submit("/dashboard/sync", f"/dashboard/machines/{machine.group(1)}/cut-off")
    assert cut.status_code == 303
    assert "cut off" in person.get("/dashboard/sync").text
    with node.client(local_key) as http:
        assert http.post("/v1/memories", json={"content": "third note"}).status_code == 201
    link = until(lambda: (lambda x: x if x["state"] == "unauthorized" else None)(link_of(node, local_user)), "cut off")
    assert link["pending"] == 1
    assert (
        link["error"].startswith("cut off on the edge")
        and f"engram sync link {edge.url} --user {local_user}` again" in link["error"]
    )
    assert "third note" not in contents(edge, edge_key)
    assert "third note" in contents(node, local_key), "nothing lost on the node"
