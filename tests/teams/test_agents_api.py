"""The registry over REST: joining with a role, the roster in status, leaving, and reading without joining."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import RunningServer, make_account
from tests.teams.conftest import Agent, error


def roster(agent: Agent, **params: Any) -> dict[str, dict[str, Any]]:
    response = agent.http.get(agent.url("/status"), params=params)
    assert response.status_code == 200, response.text
    return {a["agent"]: a for a in response.json()["agents"]}


def test_join_shows_role_capabilities_client_files_and_task_in_status(server: RunningServer) -> None:
    me = make_account(server)
    http = server.client(me.key)
    back, front = Agent(http, "reg", "back"), Agent(http, "reg", "front")
    joined = back.join("backend", capabilities=["python", "sql", "python"], client="cursor")
    assert joined["agent"] == "back" and joined["role"] == "backend" and joined["joined"] is True
    assert joined["capabilities"] == ["python", "sql"] and joined["client"] == "cursor"
    assert joined["state"] == "active"
    front.join("frontend")
    claim = {"agent": "back", "file_paths": ["src/api.py"]}
    assert http.post("/v1/sessions/reg/claims", json=claim).status_code == 200
    back.create({"id": "t1", "description": "api"})
    assert back.claim("t1").status_code == 200

    agents = roster(back)  # read without ?agent=: the reader does not join
    assert set(agents) == {"back", "front"}
    assert agents["back"]["files"] == ["src/api.py"] and agents["back"]["task"] == "t1"
    assert agents["back"]["tasks"] == ["t1"] and agents["back"]["state"] == "active"
    assert agents["front"]["role"] == "frontend" and agents["front"]["capabilities"] == []
    assert agents["front"]["client"] is None and agents["front"]["files"] == [] and agents["front"]["task"] is None
    status = http.get("/v1/sessions/reg/status").json()
    assert status["you"] is None
    listed = http.get("/v1/sessions/reg/agents").json()
    assert listed["session"] == "reg" and {a["agent"] for a in listed["agents"]} == {"back", "front"}

    rejoined = back.join("architect")
    assert rejoined["role"] == "architect" and rejoined["capabilities"] == [] and rejoined["client"] is None


def test_leave_releases_files_and_unfinished_tasks_and_leaves_the_roster(server: RunningServer) -> None:
    me = make_account(server)
    http = server.client(me.key)
    back, lead = Agent(http, "bye", "back"), Agent(http, "bye", "lead")
    back.join("backend")
    lead.join("lead")
    http.post("/v1/sessions/bye/claims", json={"agent": "back", "file_paths": ["a.py", "b.py"]})
    http.post("/v1/sessions/bye/claims", json={"agent": "lead", "file_paths": ["c.py"]})
    lead.create({"id": "t1", "description": "x"}, {"id": "t2", "description": "y"}, {"id": "t3", "description": "z"})
    for task in ("t1", "t2", "t3"):
        assert back.claim(task).status_code == 200
    assert back.complete("t3").status_code == 200

    left = back.ok("DELETE", "/agents")
    assert left == {"agent": "back", "released_files": ["a.py", "b.py"], "released_tasks": ["t1", "t2"]}
    assert set(roster(lead)) == {"lead"}
    claims = http.get("/v1/sessions/bye/status").json()["claims"]
    assert [(c["file_path"], c["agent"]) for c in claims] == [("c.py", "lead")]
    tasks = lead.tasks()
    assert tasks["t1"]["status"] == "available" and tasks["t2"]["status"] == "available"
    assert tasks["t3"]["status"] == "completed" and tasks["t3"]["assignee"] == "back"
    again = back.ok("DELETE", "/agents")  # leaving twice is harmless
    assert again == {"agent": "back", "released_files": [], "released_tasks": []}
    # Coming back: any call shows the agent again, without a role until it joins.
    assert back.claim("t1").status_code == 200
    assert roster(lead)["back"]["role"] is None and roster(lead)["back"]["joined"] is False


def test_reading_status_agents_messages_and_tasks_without_an_agent_joins_nobody(server: RunningServer) -> None:
    me = make_account(server)
    http = server.client(me.key)
    for path in ("/status", "/agents", "/messages", "/tasks"):
        assert http.get(f"/v1/sessions/quiet{path}").status_code == 200, path
    assert http.get("/v1/sessions/quiet/agents").json()["agents"] == []
    assert http.get("/v1/sessions/quiet/status").json()["agents"] == []
    # With ?agent= the reader is an agent of the session.
    assert http.get("/v1/sessions/quiet/status", params={"agent": "me"}).json()["you"] == "me"
    assert [a["agent"] for a in http.get("/v1/sessions/quiet/agents").json()["agents"]] == ["me"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "role"),
        ({"role": ""}, "role"),
        ({"role": "back end"}, "role"),
        ({"role": "x" * 65}, "role"),
        ({"role": "a", "capabilities": "python"}, "capabilities"),
        ({"role": "a", "capabilities": [""]}, "capabilities"),
        ({"role": "a", "capabilities": ["x"] * 21}, "capabilities"),
        ({"role": "a", "client": "x" * 65}, "client"),
        ({"role": "a", "team": "blue"}, "team"),
    ],
)
def test_bad_joins_are_refused_and_join_nothing(api: RunningServer, body: dict[str, Any], fragment: str) -> None:
    me = make_account(api)
    agent = Agent(api.client(me.key), "badjoin", "a")
    assert fragment in error(agent.request("POST", "/agents", json=body), 422)
    assert api.client(me.key).get("/v1/sessions/badjoin/agents").json()["agents"] == []
