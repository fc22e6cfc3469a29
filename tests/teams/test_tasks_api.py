"""The task graph over REST: all-or-nothing creation, claims only of available tasks, completion by the assignee."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import RunningServer, add_key, make_account
from tests.teams.conftest import Agent, error


def team(server: RunningServer, session: str = "build", *names: str) -> list[Agent]:
    me = make_account(server)
    http = server.client(me.key)
    return [Agent(http, session, name) for name in names or ("lead", "coder", "tester")]


GRAPH: list[dict[str, Any]] = [
    {"id": "schema", "description": "Design the schema", "files": ["db/schema.sql"]},
    {"id": "api", "description": "Write the API", "deps": ["schema"], "files": ["src/api.py"]},
    {"id": "ui", "description": "Write the UI", "deps": ["schema"]},
    {"id": "e2e", "description": "End-to-end tests", "deps": ["api", "ui"]},
]


def test_a_graph_is_worked_from_available_tasks_to_the_end(server: RunningServer) -> None:
    lead, coder, tester = team(server)
    created = lead.create(*GRAPH)["tasks"]
    assert [t["id"] for t in created] == ["schema", "api", "ui", "e2e"]
    assert created[0]["status"] == "available" and created[0]["files"] == ["db/schema.sql"]
    assert created[1]["status"] == "blocked" and created[1]["blocked_by"] == ["schema"]
    assert created[3]["blocked_by"] == ["api", "ui"] and created[3]["created_by"] == "lead"

    refused = error(coder.claim("api"), 409)
    assert refused == "task 'api' is blocked: it waits for schema (not started)"
    assert coder.claim("api").json()["error"]["blocked_by"] == ["schema"]

    taken = coder.claim("schema")
    assert taken.status_code == 200 and taken.json()["status"] == "in_progress"
    assert taken.json()["assignee"] == "coder" and taken.json()["claimed_at"]
    assert error(tester.claim("schema"), 409) == "task 'schema' is already taken by coder"
    assert coder.claim("schema").status_code == 200  # a retried claim of one's own task
    assert "it waits for schema (in progress by coder)" in error(tester.claim("ui"), 409)

    assert (
        error(tester.complete("schema"), 409) == "task 'schema' is assigned to coder; only the assignee can complete it"
    )
    assert (
        error(tester.release("schema"), 409) == "task 'schema' is assigned to coder; only the assignee can release it"
    )

    done = coder.complete("schema", "tables users and orders", files_modified=["db/schema.sql", "./db/seed.sql"])
    assert done.status_code == 200, done.text
    assert done.json()["unblocked"] == ["api", "ui"]
    task = done.json()["task"]
    assert task["status"] == "completed" and task["result"] == "tables users and orders"
    assert task["files_modified"] == ["db/schema.sql", "db/seed.sql"] and task["completed_at"]
    again = coder.complete("schema", "tables users and orders")  # a retried completion changes nothing
    assert again.status_code == 200 and again.json()["unblocked"] == []
    assert error(coder.claim("schema"), 409) == "task 'schema' is already completed (by coder)"

    tasks = lead.tasks()
    assert {k: t["status"] for k, t in tasks.items()} == {
        "schema": "completed",
        "api": "available",
        "ui": "available",
        "e2e": "blocked",
    }
    assert list(lead.tasks(status="available")) == ["api", "ui"]

    assert tester.claim("ui").status_code == 200
    released = tester.release("ui")
    assert released.status_code == 200 and released.json()["status"] == "available"
    assert released.json()["assignee"] is None
    assert error(tester.release("ui"), 409) == "task 'ui' is not claimed by anyone; claim it first"
    assert coder.claim("api").status_code == 200 and tester.claim("ui").status_code == 200
    assert list(lead.tasks(status="in_progress")) == ["api", "ui"]
    assert coder.complete("api").json()["unblocked"] == []  # e2e still waits for ui
    assert tester.complete("ui").json()["unblocked"] == ["e2e"]
    assert lead.claim("e2e").status_code == 200
    assert lead.complete("e2e").status_code == 200
    assert all(t["status"] == "completed" for t in lead.tasks().values())


def test_new_tasks_may_depend_on_existing_ones(server: RunningServer) -> None:
    (lead,) = team(server, "grow", "lead")
    lead.create({"id": "a", "description": "first"})
    lead.claim("a")
    lead.complete("a")
    created = lead.create({"id": "b", "description": "after a", "deps": ["a"]})["tasks"]
    assert created[0]["status"] == "available" and created[0]["deps"] == ["a"]


@pytest.mark.parametrize(
    ("tasks", "status", "expected"),
    [
        (
            [{"id": "a", "description": "x"}, {"id": "a", "description": "y"}],
            422,
            "task id 'a' appears twice in this call",
        ),
        # Wrong only against what the session holds: a conflict, not a malformed call.
        ([{"id": "a", "description": "x", "deps": ["nope"]}], 409, "task 'a' depends on 'nope', which does not exist"),
        ([{"id": "a", "description": "x", "deps": ["a"]}], 422, "task 'a' depends on itself"),
        (
            [{"id": "a", "description": "x", "deps": ["b"]}, {"id": "b", "description": "y", "deps": ["a"]}],
            422,
            "the dependencies form a cycle: a -> b -> a",
        ),
        ([{"id": "ok", "description": "x"}, {"id": "old", "description": "y"}], 409, "task 'old' already exists"),
        # Wrong in itself and against the session: the call's own fault is named first (422).
        ([{"id": "old", "description": "x", "deps": ["old"]}], 422, "task 'old' depends on itself"),
    ],
)
def test_creation_is_all_or_nothing(
    server: RunningServer, tasks: list[dict[str, Any]], status: int, expected: str
) -> None:
    (lead,) = team(server, "strict", "lead")
    lead.create({"id": "old", "description": "there before"})
    message = error(lead.request("POST", "/tasks", json={"tasks": tasks}), status)
    assert message.startswith("no task was created: ") and expected in message
    assert list(lead.tasks()) == ["old"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"tasks": []}, "tasks"),
        ({"tasks": [{"id": "has space", "description": "x"}]}, "id"),
        ({"tasks": [{"id": "a/b", "description": "x"}]}, "id"),
        ({"tasks": [{"id": "x" * 65, "description": "x"}]}, "id"),
        ({"tasks": [{"id": "a", "description": ""}]}, "description"),
        ({"tasks": [{"id": "a", "description": "x" * 4001}]}, "description"),
        ({"tasks": [{"id": "a", "description": "x\u0000y"}]}, "NUL"),
        ({"tasks": [{"id": "a", "description": "x", "deps": "b"}]}, "deps"),
        ({"tasks": [{"id": "a", "description": "x", "files": ["."]}]}, "does not name a file"),
        ({"tasks": [{"id": "a", "description": "x", "owner": "me"}]}, "owner"),
        ({"tasks": [{"id": "a", "description": "x"}], "extra": 1}, "extra"),
        ({"tasks": [{"id": f"t{i}", "description": "x"} for i in range(501)]}, "tasks"),
    ],
)
def test_bad_task_input_is_a_precise_422_and_creates_nothing(
    api: RunningServer, body: dict[str, Any], fragment: str
) -> None:
    (lead,) = team(api, "bad", "lead")
    response = lead.request("POST", "/tasks", json=body)
    assert fragment in error(response, 422)
    assert lead.tasks() == {}


def test_bad_calls_on_tasks(api: RunningServer) -> None:
    lead, coder = team(api, "calls", "lead", "coder")
    lead.create({"id": "a", "description": "x"})
    assert error(coder.claim("missing"), 404) == "no task 'missing' in this session"
    assert error(coder.complete("missing"), 404) == "no task 'missing' in this session"
    assert error(coder.release("missing"), 404) == "no task 'missing' in this session"
    assert error(coder.complete("a"), 409) == "task 'a' is not claimed by anyone; claim it first"
    assert "result" in error(coder.request("POST", "/tasks/a/complete", json={"result": ""}), 422)
    assert "status" in error(lead.http.get(lead.url("/tasks"), params={"status": "done"}), 422)
    # Acting needs an agent; reading does not.
    assert "agent" in error(lead.http.post(lead.url("/tasks/a/claim")), 422)
    assert "'__'" in error(lead.http.post(lead.url("/tasks/a/claim"), params={"agent": "a__b"}), 400)
    assert lead.tasks()["a"]["status"] == "available"


def test_a_read_key_reads_tasks_but_cannot_change_them(api: RunningServer) -> None:
    me = make_account(api)
    writer = Agent(api.client(me.key), "ro", "lead")
    writer.create({"id": "a", "description": "x"})
    writer.create({"id": "c", "description": "z"})
    assert writer.claim("c").status_code == 200
    reader = Agent(api.client(add_key(api, me.user_id, scope="read").key), "ro", "reader")
    assert list(reader.tasks()) == ["a", "c"]
    assert reader.claim("a").status_code == 403
    assert reader.request("POST", "/tasks", json={"tasks": [{"id": "b", "description": "y"}]}).status_code == 403
    # Even under the assignee's own name, a read key neither completes nor releases its task.
    as_lead = Agent(reader.http, "ro", "lead")
    assert as_lead.complete("c").status_code == 403
    assert as_lead.release("c").status_code == 403
    tasks = writer.tasks()
    assert tasks["a"]["status"] == "available"
    assert (tasks["c"]["status"], tasks["c"]["assignee"]) == ("in_progress", "lead")


def test_tasks_are_isolated_between_sessions_and_tenants(api: RunningServer) -> None:
    (mine,) = team(api, "one", "lead")
    mine.create({"id": "secret", "description": "only in one"})
    other_session = Agent(mine.http, "two", "lead")
    assert other_session.tasks() == {}
    assert other_session.claim("secret").status_code == 404
    (stranger,) = team(api, "one", "lead")
    assert stranger.tasks() == {}
    assert stranger.claim("secret").status_code == 404
    assert mine.tasks()["secret"]["status"] == "available"
