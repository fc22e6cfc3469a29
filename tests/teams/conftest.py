"""Helpers for the team tests: REST calls acting as an agent of a session, on PostgreSQL and on SQLite."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.harness import RunningServer


@pytest.fixture(params=["api", "sqlite_api"])
def server(request: pytest.FixtureRequest) -> RunningServer:
    """The test runs on PostgreSQL and on SQLite (the claim is one SQL statement on each)."""
    running: RunningServer = request.getfixturevalue(request.param)
    return running


class Agent:
    """One agent of a session, speaking REST with ``?agent=``."""

    def __init__(self, http: httpx.Client, session: str, name: str) -> None:
        self.http, self.session, self.name = http, session, name

    def url(self, path: str) -> str:
        return f"/v1/sessions/{self.session}{path}"

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        params = {"agent": self.name, **kwargs.pop("params", {})}
        return self.http.request(method, self.url(path), params=params, **kwargs)

    def ok(self, method: str, path: str, status: int = 200, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        assert response.status_code == status, response.text
        return response.json()

    def join(self, role: str, **fields: Any) -> Any:
        return self.ok("POST", "/agents", json={"role": role, **fields})

    def send(self, to: str, content: str, kind: str = "question", **fields: Any) -> Any:
        return self.ok("POST", "/messages", 201, json={"to": to, "kind": kind, "content": content, **fields})

    def inbox(self, **params: Any) -> Any:
        return self.ok("GET", "/inbox", params=params)

    def create(self, *tasks: dict[str, Any]) -> Any:
        return self.ok("POST", "/tasks", 201, json={"tasks": list(tasks)})

    def claim(self, task_id: str) -> httpx.Response:
        return self.request("POST", f"/tasks/{task_id}/claim")

    def complete(self, task_id: str, result: str = "done", **fields: Any) -> httpx.Response:
        return self.request("POST", f"/tasks/{task_id}/complete", json={"result": result, **fields})

    def release(self, task_id: str) -> httpx.Response:
        return self.request("POST", f"/tasks/{task_id}/release")

    def tasks(self, **params: Any) -> dict[str, Any]:
        """The task list read without an agent, as a dashboard does."""
        response = self.http.get(self.url("/tasks"), params=params)
        assert response.status_code == 200, response.text
        return {t["id"]: t for t in response.json()["tasks"]}


def error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    message: str = response.json()["error"]["message"]
    return message
