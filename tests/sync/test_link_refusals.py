"""What `engram sync link` refuses at once, with the reason, rather than take and leave in a bad state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sync.processes import Deployment, HostedEdge, link_with_client
from tests.sync.test_link import hosted_edge


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory, pg_server: str, embedder: Any) -> Iterator[HostedEdge]:
    with hosted_edge(tmp_path_factory, embedder) as server:
        yield server


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Deployment]:
    deployment = Deployment(tmp_path / "node")
    deployment.setup()
    yield deployment


def test_an_edge_user_already_linked_to_one_local_user_is_not_linked_to_another(
    edge: HostedEdge, node: Deployment
) -> None:
    edge_user, _ = edge.user()
    first, _ = node.user()
    second, _ = node.user()
    link_with_client(node, edge, first, edge_user, "first user's link")

    client = edge.sync_client(edge_user, "second user's link")
    refused = node.engram(
        "sync", "link", edge.url, "--user", second, "--client-id", client["client_id"],
        "--client-secret", client["client_secret"], check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1
    assert f"already linked to the local user {first}" in refused.stderr
    assert f"engram sync unlink {edge.url} --user {first}" in refused.stderr
    assert [(link["local_user"], link["edge_user"]) for link in node.status()["links"]] == [(first, edge_user)]

    # The same local user linking again (new credentials) is a re-link, as before.
    again = link_with_client(node, edge, first, edge_user, "first user's link, again")
    assert again["local_user"] == first and len(node.status()["links"]) == 1


@pytest.mark.parametrize("url", ["not-a-url", "ftp://edge.example", "http://edge.example"])
def test_an_edge_url_refused_says_what_is_accepted(node: Deployment, url: str) -> None:
    refused = node.engram("sync", "link", url, "--user", "u_nobody", check=False)
    assert refused.returncode != 0
    assert "https://HOST" in refused.stderr and "http:// on this machine (localhost, 127.0.0.1" in refused.stderr
