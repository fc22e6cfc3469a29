"""kill -9 during a write burst: after a restart every acknowledged write is there and searchable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.harness import free_port

ENGRAM = str(Path(sys.executable).with_name("engram"))


def _env(data_dir: Path, port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "ENGRAM_DATA_DIR": str(data_dir),
            "ENGRAM_PORT": str(port),
            "ENGRAM_HOST": "127.0.0.1",
            "ENGRAM_LOG_LEVEL": "warning",
            "MEM0_TELEMETRY": "False",
        }
    )
    env.pop("ENGRAM_DATABASE_URL", None)
    env.pop("ENGRAM_REDIS_URL", None)
    return env


def _start(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    # A file, not a pipe: the server logs every request to stderr and an unread pipe would fill up and block it.
    log = tempfile.TemporaryFile()  # noqa: SIM115 (it lives as long as the server process)
    proc = subprocess.Popen([ENGRAM, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 300  # a start takes seconds; only a hang reaches this
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"server exited: {log.read().decode(errors='replace')[-4000:]}")
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not come up")


@pytest.mark.slow
def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    port = free_port()
    env = _env(tmp_path, port)
    subprocess.run([ENGRAM, "migrate"], env=env, check=True, capture_output=True)
    user_id = subprocess.run(
        [ENGRAM, "users", "create", "crash@example.test"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    key = subprocess.run(
        [ENGRAM, "keys", "create", user_id], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()

    server = _start(env, port)
    acknowledged: dict[str, str] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def writer(worker: int) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as http:
            n = 0
            while not stop.is_set():
                content = f"crash probe w{worker} n{n} zebra{worker}x{n}"
                try:
                    response = http.post("/v1/memories", json={"content": content}, timeout=60)
                except httpx.HTTPError:
                    return
                if response.status_code == 201:
                    with lock:
                        acknowledged[response.json()["id"]] = content
                n += 1

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 300
    while len(acknowledged) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(server.pid, signal.SIGKILL)
    server.wait(timeout=10)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
    assert len(acknowledged) >= 40

    server = _start(env, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as http:
            for memory_id, content in acknowledged.items():
                response = http.get(f"/v1/memories/{memory_id}")
                assert response.status_code == 200, f"acknowledged write {memory_id} lost"
                assert response.json()["content"] == content
            missing = set(acknowledged)
            deadline = time.monotonic() + 300
            while missing and time.monotonic() < deadline:
                for memory_id in sorted(missing):
                    results = http.post(
                        "/v1/memories/search", json={"query": acknowledged[memory_id], "limit": 5}
                    ).json()["results"]
                    if memory_id in {r["id"] for r in results}:
                        missing.discard(memory_id)
            assert not missing, f"{len(missing)} acknowledged writes are not searchable after restart"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
