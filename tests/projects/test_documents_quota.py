"""The memory quota counts document chunks like any memory; a replacement is charged only for what it adds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import _settings
from tests.harness import RunningServer, make_account, serve

FIVE = {"free": {"requests_per_minute": 10_000, "key_requests_per_minute": 10_000, "max_memories": 5}}


@pytest.fixture(scope="module")
def five(pg_database_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    settings = _settings(tmp_path_factory.mktemp("doc-quota"), pg_database_url, plans=FIVE, watch_projects=False)
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def sections(count: int) -> str:
    return "".join(f"# Part {i}\n\nText of part {i}.\n\n" for i in range(count))


def test_documents_count_against_the_memory_quota(five: RunningServer) -> None:
    me = make_account(five)
    with five.client(me.key) as http:
        assert http.put("/v1/sessions/q/documents", json={"path": "a.md", "content": sections(4)}).status_code == 200
        over = http.put("/v1/sessions/q/documents", json={"path": "b.md", "content": sections(2)})
        assert over.status_code == 429 and over.json()["error"]["code"] == "quota_exceeded"
        assert [d["path"] for d in http.get("/v1/sessions/q/documents").json()["documents"]] == ["a.md"]
        assert len(http.get("/v1/memories", params={"session": "q"}).json()["memories"]) == 4
        # Four chunks replaced by five: one more memory, within the plan.
        grown = http.put("/v1/sessions/q/documents", json={"path": "a.md", "content": sections(5)})
        assert grown.status_code == 200, grown.text
        assert (grown.json()["chunks_written"], grown.json()["chunks_removed"]) == (5, 4)
        assert len(http.get("/v1/memories", params={"session": "q"}).json()["memories"]) == 5
