"""`engram serve` as a real process: every stderr line is JSON, request ids round-trip, and no secret is printed."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import select
import signal
import string
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.harness import free_port

PASSWORD = "correct horse battery staple " + uuid.uuid4().hex[:8]
_CSRF = re.compile(r'name="_csrf" value="([^"]*)"')


@dataclass
class Process:
    base_url: str
    env: dict[str, str]
    popen: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path


def _engram(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def engram_process(tmp_path: Path) -> Iterator[Process]:
    """A server on the embedded defaults (SQLite, in-process index), logging JSON at info to files we read after."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(
        ENGRAM_DATA_DIR=str(tmp_path / "data"),
        ENGRAM_HOST="127.0.0.1",
        ENGRAM_PORT=str(port),
        ENGRAM_SECRET_KEY="test-" + uuid.uuid4().hex,
        ENGRAM_LOG_FORMAT="json",
        ENGRAM_LOG_LEVEL="info",
        MEM0_TELEMETRY="False",
    )
    _engram(env, "migrate")
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        popen = subprocess.Popen([sys.executable, "-m", "app.cli", "serve"], env=env, stdout=out, stderr=err)
    process = Process(f"http://127.0.0.1:{port}", env, popen, stdout, stderr)
    try:
        deadline = time.monotonic() + 300  # a start takes seconds; only a hang reaches this
        while True:
            assert popen.poll() is None, stderr.read_text()
            assert time.monotonic() < deadline, "server did not start"
            try:
                if httpx.get(f"{process.base_url}/healthz", timeout=10).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield process
    finally:
        if popen.poll() is None:
            popen.send_signal(signal.SIGINT)
            try:
                popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


def _stop(process: Process) -> str:
    process.popen.send_signal(signal.SIGINT)
    process.popen.wait(timeout=30)
    return process.stderr.read_text() + process.stdout.read_text()


def test_logs_are_json_with_request_ids_and_never_a_secret(engram_process: Process) -> None:
    server = engram_process
    user_id = _engram(server.env, "users", "create", f"{uuid.uuid4().hex[:8]}@example.test").stdout.strip()
    created = _engram(server.env, "keys", "create", user_id, "--name", "laptop")
    key = created.stdout.strip()
    assert key.startswith("egk_") and key not in created.stderr
    wrong_key = "egk_" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(52))
    request_id = "obs-" + uuid.uuid4().hex

    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        auth = {"Authorization": f"Bearer {key}"}
        listed = http.get("/v1/memories", headers={**auth, "X-Request-ID": request_id})
        assert listed.status_code == 200 and listed.headers["x-request-id"] == request_id
        assert (
            http.post("/v1/memories", headers=auth, json={"content": f"deploy with fly, not {key}"}).status_code == 201
        )
        assert http.get(f"/v1/memories/{wrong_key}", headers=auth).status_code == 404
        assert http.get("/v1/memories", params={"api_key": key}).status_code == 401
        assert http.get("/v1/memories", headers={"Authorization": f"Bearer {wrong_key}"}).status_code == 401
        assert http.post(f"/mcp/v2/cli/{user_id}", headers={"Authorization": f"Bearer {wrong_key}"}).status_code == 401
        csrf = _CSRF.search(http.get("/login").text)
        assert csrf is not None
        login = http.post("/login", data={"_csrf": csrf.group(1), "email": "nobody@example.test", "password": PASSWORD})
        assert login.status_code == 400
        generated = http.get("/healthz").headers["x-request-id"]

    output = _stop(server)
    lines = [json.loads(line) for line in output.splitlines() if line.strip()]
    assert lines, "the server logged nothing"
    for line in lines:
        assert {"ts", "level", "logger", "message"} <= set(line), line

    access = [line for line in lines if line["logger"] == "engram.access"]
    (mine,) = [line for line in access if line.get("request_id") == request_id]
    assert mine["method"] == "GET" and mine["path"] == "/v1/memories" and mine["status"] == 200
    assert mine["user_id"] == user_id and isinstance(mine["duration_ms"], float)
    assert any(line.get("request_id") == generated and line["path"] == "/healthz" for line in access)
    assert any(line["path"] == "/login" and line["status"] == 400 for line in access)
    assert not [line for line in access if "?" in str(line["path"]) or "api_key" in str(line["message"])]

    for secret in (key, wrong_key, PASSWORD, server.env["ENGRAM_SECRET_KEY"]):
        assert secret not in output
    assert not re.search(r"egk_[A-Za-z0-9]{8}", output)


def test_on_a_terminal_the_default_log_is_text_for_people(tmp_path: Path) -> None:
    """Without ENGRAM_LOG_FORMAT, a person running `engram serve` in a terminal reads text lines, not JSON (the
    fixture above shows the JSON every other place gets)."""
    import pty

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(
        ENGRAM_DATA_DIR=str(tmp_path / "data"),
        ENGRAM_PORT=str(port),
        ENGRAM_SECRET_KEY="test-" + uuid.uuid4().hex,
        MEM0_TELEMETRY="False",
    )
    _engram(env, "migrate")
    controller, terminal = pty.openpty()
    popen = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve"], env=env, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    seen = b""
    try:
        deadline = time.monotonic() + 300  # a start takes seconds; only a hang reaches this
        while b"GET /healthz 200" not in seen:
            assert popen.poll() is None and time.monotonic() < deadline, seen.decode(errors="replace")
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
            ready, _, _ = select.select([controller], [], [], 0.5)
            if ready:
                with contextlib.suppress(OSError):  # EIO once the process is gone
                    seen += os.read(controller, 65536)
    finally:
        popen.send_signal(signal.SIGINT)
        popen.wait(timeout=60)
        os.close(controller)
    lines = [line for line in seen.decode(errors="replace").splitlines() if line.strip()]
    assert lines and not [line for line in lines if line.lstrip().startswith("{")], lines
    assert any("engram.access" in line and "GET /healthz 200" in line for line in lines), lines
