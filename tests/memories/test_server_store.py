"""What opening a Qdrant server asks of it (the contract tests run qdrant-client's local mode, which has no version)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.errors import ServiceUnavailable
from app.memories.embedder import OnnxMiniLMEmbedder
from app.memories.engine import MemoryEngine
from app.memories.vector_stores.server import scopes_idf_by_tenant
from tests.harness import free_port

# qdrant-client checks the server's version on its own too, in a thread of its own: it finds 1.18 too old for it.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Failed to obtain server version", "ignore:Qdrant client version .* is incompatible"
)


@pytest.fixture
def qdrant_18() -> Iterator[tuple[str, list[str]]]:
    """A stand-in for a Qdrant 1.18 server: its root endpoint, and the paths asked of it."""
    asked: list[str] = []
    both_checks = threading.Event()  # ours and qdrant-client's: the server stays up until both were answered

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            found = self.path == "/"
            body = json.dumps({"title": "qdrant - vector search engine", "version": "1.18.2"} if found else {})
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())
            if asked.count("/") >= 2:
                both_checks.set()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", asked
    both_checks.wait(timeout=10)
    server.shutdown()
    server.server_close()


def test_a_qdrant_server_without_per_tenant_idf_is_refused_before_anything_is_created(
    qdrant_18: tuple[str, list[str]], tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    # It would ignore the tenant's IDF corpus: every tenant's words would weigh in every tenant's scores.
    url, asked = qdrant_18
    with pytest.raises(ServiceUnavailable, match=r"version 1\.18\.2: Engram needs 1\.19 or later"):
        MemoryEngine.open(data_dir=tmp_path, embedder=embedder, qdrant_url=url)
    assert set(asked) == {"/"}


@pytest.mark.parametrize(
    ("version", "scoped"),
    [
        ("1.19.0", True),
        ("1.20.3", True),
        ("2.0.0", True),
        ("1.18.9", False),
        ("1.9.0", False),
        ("", False),
        ("dev", False),
    ],
)
def test_per_tenant_idf_comes_with_qdrant_1_19(version: str, scoped: bool) -> None:
    assert scopes_idf_by_tenant(version) is scoped
