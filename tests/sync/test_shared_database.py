"""Issue 9b: two servers sharing one PostgreSQL database, each with its own embedded index, search alike."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _settings
from tests.harness import RunningServer, make_account, serve

WAIT_SECONDS = 60.0  # the log follower looks every 0.05 s here: only a hang reaches this


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        assert time.monotonic() < deadline, f"not within {WAIT_SECONDS:.0f} s: {what}"
        time.sleep(0.05)


def _found(server: RunningServer, key: str, query: str) -> list[str]:
    with server.client(key) as http:
        response = http.post("/v1/memories/search", json={"query": query, "limit": 5, "threshold": 0})
        assert response.status_code == 200, response.text
        return [r["content"] for r in response.json()["results"]]


@pytest.mark.postgres
def test_a_write_on_one_instance_is_found_by_search_on_the_other(
    tmp_path: Path, embedder: Any, fresh_pg_url: str
) -> None:
    secret = "shared-secret-" + uuid.uuid4().hex
    first = _settings(tmp_path / "one", fresh_pg_url, secret_key=secret, index_follow_seconds=0.05)
    second = _settings(tmp_path / "two", fresh_pg_url, secret_key=secret, index_follow_seconds=0.05)
    with serve(first, embedder=embedder) as one, serve(second, embedder=embedder) as two:  # type: ignore[arg-type]
        me = make_account(one)
        with one.client(me.key) as http:
            created = http.post("/v1/memories", json={"content": "the staging database lives in Frankfurt"})
            assert created.status_code == 201, created.text
            memory_id = created.json()["id"]
        _until(
            lambda: "the staging database lives in Frankfurt" in _found(two, me.key, "where is the staging database"),
            "a memory added through one found by search through the other",
        )

        with two.client(me.key) as http:
            patched = http.patch(f"/v1/memories/{memory_id}", json={"content": "staging moved to Dublin"})
            assert patched.status_code == 200, patched.text
        _until(
            lambda: _found(one, me.key, "where is staging")[:1] == ["staging moved to Dublin"],
            "an update through the other followed by the first's index",
        )

        with one.client(me.key) as http:
            assert http.delete(f"/v1/memories/{memory_id}").status_code == 200
        _until(lambda: _found(two, me.key, "where is staging") == [], "a delete followed too")

        # Each write stayed searchable at once where it was made (the follower never puts an older state back).
        with two.client(me.key) as http:
            for n in range(5):
                body = {"content": f"release checklist step {n} is signed off"}
                new_id = http.post("/v1/memories", json=body).json()["id"]
                assert http.patch(f"/v1/memories/{new_id}", json={"content": f"step {n} reopened"}).status_code == 200
                assert f"step {n} reopened" in _found(two, me.key, f"step {n} reopened")


@pytest.mark.postgres
def test_an_instance_started_later_catches_up_with_what_the_other_wrote(
    tmp_path: Path, embedder: Any, fresh_pg_url: str
) -> None:
    secret = "shared-secret-" + uuid.uuid4().hex
    first = _settings(tmp_path / "one", fresh_pg_url, secret_key=secret, index_follow_seconds=0.05)
    second = _settings(tmp_path / "two", fresh_pg_url, secret_key=secret, index_follow_seconds=0.05)
    with serve(first, embedder=embedder) as one:  # type: ignore[arg-type]
        me = make_account(one)
        with serve(second, embedder=embedder) as two:  # type: ignore[arg-type]
            assert _found(two, me.key, "anything") == []
        # The second is stopped while the first writes; its index learns it when it comes back.
        with one.client(me.key) as http:
            assert http.post("/v1/memories", json={"content": "backups run at midnight"}).status_code == 201
        with serve(second, embedder=embedder) as two:  # type: ignore[arg-type]
            _until(lambda: "backups run at midnight" in _found(two, me.key, "when do backups run"), "caught up")
