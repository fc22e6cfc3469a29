"""TEST DOUBLE for a paid LLM API this machine cannot reach: an OpenAI-compatible chat completions server.

``FakeOpenAI`` is a real HTTP server on 127.0.0.1 that answers ``POST /v1/chat/completions`` the way an
OpenAI-compatible API would. It replies in the shape mem0 2.2.1's additive extraction parses: a JSON object
``{"memory": [{"text": ...}, ...]}`` as the message content. What it "extracts" is decided by ``extract`` (the fixed
``FACTS`` unless a test gives its own). Everything else around it (mem0, the embedder, the store, Engram) is real.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FACTS = ["User's favourite coffee is a flat white", "User lives in Lisbon"]

Extract = Callable[[dict[str, Any]], list[str]]


def fixed_facts(body: dict[str, Any]) -> list[str]:
    return list(FACTS)


class FakeOpenAI:
    """Records every request; answers each chat completion with the facts ``extract`` finds in its body."""

    def __init__(self, extract: Extract = fixed_facts) -> None:
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                content = json.dumps({"memory": [{"text": fact} for fact in extract(body)]})
                reply = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
