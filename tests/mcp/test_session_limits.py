"""Abandoned MCP sessions cost nothing for long: a cap per user (least recently used first) and an idle timeout.

Before: 5,000 `initialize` calls raised a server's RSS from 456 to 661 MB, each session living 30 idle minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import _settings
from tests.harness import RunningServer, free_port, make_account, serve
from tests.mcp.conftest import mcp_url

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def _headers(key: str, session: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    if session:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    return headers


def _open(http: httpx.Client, url: str, key: str) -> str:
    response = http.post(url, json=INITIALIZE, headers=_headers(key))
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


@pytest.fixture(scope="module")
def capped(pg_database_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    settings = _settings(
        tmp_path_factory.mktemp("capped"), pg_database_url, mcp_sessions_per_user=3, mcp_session_idle_seconds=1.0
    )
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def test_beyond_the_cap_the_least_recently_used_sessions_of_that_user_end(capped: RunningServer) -> None:
    me, other = make_account(capped), make_account(capped)
    url, other_url = mcp_url(capped, me.user_id), mcp_url(capped, other.user_id)
    with httpx.Client(timeout=30) as http:
        theirs = _open(http, other_url, other.key)
        first, second, third = (_open(http, url, me.key) for _ in range(3))
        # Using the first makes the second the least recently used.
        assert http.post(url, json=LIST, headers=_headers(me.key, first)).status_code == 200
        fourth = _open(http, url, me.key)
        deadline = time.monotonic() + 30
        while http.post(url, json=LIST, headers=_headers(me.key, second)).status_code != 404:
            assert time.monotonic() < deadline, "the least recently used session was not ended"
            time.sleep(0.02)
        for alive in (first, third, fourth):
            assert http.post(url, json=LIST, headers=_headers(me.key, alive)).status_code == 200
        # Another user's session is not theirs to evict.
        assert http.post(other_url, json=LIST, headers=_headers(other.key, theirs)).status_code == 200


def test_an_idle_session_ends_by_itself(capped: RunningServer) -> None:
    me = make_account(capped)
    url = mcp_url(capped, me.user_id)
    with httpx.Client(timeout=30) as http:
        session = _open(http, url, me.key)
        deadline = time.monotonic() + 60
        while http.post(url, json=LIST, headers=_headers(me.key, session)).status_code != 404:
            assert time.monotonic() < deadline, "an idle session outlived its timeout by far"
            time.sleep(1.5)  # each request counts as activity: ask less often than the timeout (1 s)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.slow
def test_five_thousand_abandoned_sessions_do_not_grow_the_server(tmp_path: Path) -> None:
    """A real `engram serve` on the embedded defaults, with its default limits: RSS after 5,000 abandoned sessions."""
    engram = str(Path(sys.executable).with_name("engram"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env |= {
        "ENGRAM_DATA_DIR": str(tmp_path),
        "ENGRAM_PORT": str(port),
        "ENGRAM_LOG_LEVEL": "warning",
        "ENGRAM_PLANS": json.dumps(
            {"free": {"requests_per_minute": 10**6, "key_requests_per_minute": 10**6, "max_memories": 10**6}}
        ),
        "MEM0_TELEMETRY": "False",
    }
    assert subprocess.run([engram, "migrate"], env=env, capture_output=True, timeout=120).returncode == 0
    user = subprocess.run([engram, "users", "create", "rss@example.test"], env=env, capture_output=True, text=True)
    key = subprocess.run(
        [engram, "keys", "create", user.stdout.strip()], env=env, capture_output=True, text=True
    ).stdout.strip()
    proc = subprocess.Popen([engram, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/mcp/v2/rss/{user.stdout.strip()}"
    try:
        deadline = time.monotonic() + 300  # a start takes seconds; only a hang reaches this
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=10).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "engram serve did not come up"
            time.sleep(0.1)

        def burst(count: int) -> None:
            with httpx.Client(timeout=30) as http:
                for _ in range(count):
                    _open(http, url, key)

        burst(200)  # warm: imports, pools, first sessions
        before = _rss_mb(proc.pid)
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(burst, [1250] * 4))
        time.sleep(1)  # the evicted sessions' tasks wind down
        after = _rss_mb(proc.pid)
        live = [
            float(line.rsplit(" ", 1)[1])
            for line in httpx.get(f"{base}/metrics").text.splitlines()
            if line.startswith("engram_mcp_sessions ")
        ]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"\nRSS {before:.0f} MB -> {after:.0f} MB after 5,000 abandoned MCP sessions; {live[0]:.0f} live")
    assert live == [32.0]
    # Before the cap this grew by about 200 MB; what is left is allocator slack, not sessions.
    assert after - before < 40, f"RSS grew {after - before:.0f} MB"
