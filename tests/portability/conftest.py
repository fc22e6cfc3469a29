"""Accounts filled with one of everything an export carries, through the public API."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.harness import RunningServer, make_account
from tests.sync.test_link import edge, node  # noqa: F401  (an edge and a node, for the deleted-account sync test)
from tests.web.conftest import browser, chromium  # noqa: F401  (the pages' fixtures, for the dashboard's routes)


def fill(server: RunningServer) -> tuple[str, str]:
    """A new account holding memories of every scope (one private, one edited, one deleted), a document, agents,
    messages with a reply and read marks, and tasks with a dependency. Returns (user_id, key)."""
    account = make_account(server)
    fill_with(server, account.key)
    return account.user_id, account.key


def fill_with(server: RunningServer, key: str) -> None:
    """Fill the account of ``key`` (see ``fill``)."""
    with server.client(key) as http:
        _ok(http.post("/v1/sessions/web/agents", params={"agent": "arch"}, json={"role": "architect"}))
        _ok(http.post("/v1/sessions/web/agents", params={"agent": "dev"}, json={"role": "developer"}))
        memories = [
            {"content": "We deploy with fly", "tags": ["deploy"], "metadata": {"env": "prod", "n": 3}},
            {"content": "The web session uses React", "session": "web", "scope": "session"},
            {"content": "arch's own scratch note", "session": "web", "agent": "arch", "scope": "agent"},
            {"content": "Architects review schemas", "session": "web", "agent": "arch", "scope": "role"},
            {"content": "A private thought", "session": "web", "agent": "dev", "visibility": "private"},
            {"content": "This one will be deleted"},
        ]
        ids = [_ok(http.post("/v1/memories", json=m))["id"] for m in memories]
        _ok(http.patch(f"/v1/memories/{ids[0]}", json={"content": "We deploy with fly.io", "tags": ["deploy", "ops"]}))
        _ok(http.patch(f"/v1/memories/{ids[1]}", json={"scope": "user"}))
        _ok(http.delete(f"/v1/memories/{ids[5]}"))
        doc = "# Guide\n\nInstall it.\n\n## Deploy\n\nRun fly deploy from the root.\n"
        _ok(http.put("/v1/sessions/web/documents", json={"path": "docs/guide.md", "content": doc}))
        first = _ok(
            http.post(
                "/v1/sessions/web/messages",
                params={"agent": "arch"},
                json={"to": "dev", "kind": "question", "content": "Is the schema ready?"},
            )
        )
        _ok(
            http.post(
                "/v1/sessions/web/messages",
                params={"agent": "dev"},
                json={"to": "arch", "kind": "answer", "content": "Yes", "reply_to": first["id"]},
            )
        )
        _ok(http.get("/v1/sessions/web/inbox", params={"agent": "dev", "mark_read": "true"}))
        tasks = {
            "tasks": [
                {"id": "schema", "description": "Write the schema"},
                {"id": "api", "description": "API", "deps": ["schema"], "files": ["api.py"]},
            ]
        }
        _ok(http.post("/v1/sessions/web/tasks", params={"agent": "arch"}, json=tasks))
        _ok(http.post("/v1/sessions/web/tasks/schema/claim", params={"agent": "dev"}))
        _ok(
            http.post(
                "/v1/sessions/web/tasks/schema/complete",
                params={"agent": "dev"},
                json={"result": "done", "files_modified": ["schema.sql"]},
            )
        )


def _ok(response: httpx.Response) -> Any:
    assert response.status_code < 300, (response.request.method, response.request.url, response.text)
    return response.json()


def export_of(server: RunningServer, key: str, **params: str) -> list[dict[str, Any]]:
    with server.client(key) as http:
        response = http.get("/v1/export", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines() if line]


def body_of(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def comparable(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """An export without what an import makes anew: the header's user, time; message ids (reply_to as content)."""
    header, records = lines[0], lines[1:]
    messages = {r["id"]: r for r in records if r["type"] == "message"}
    out: dict[str, Any] = {"header": {k: v for k, v in header.items() if k not in ("user_id", "exported_at")}}
    for record in records:
        record = dict(record)
        if record["type"] == "message":
            reply = record.pop("reply_to")
            record["reply_to"] = messages[reply]["content"] if reply is not None else None
            record.pop("id")
        out.setdefault(record["type"], []).append(record)
    for kind in out:
        if kind != "header":
            out[kind].sort(key=lambda r: json.dumps(r, sort_keys=True))
    return out
