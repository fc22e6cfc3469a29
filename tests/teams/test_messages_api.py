"""Messages over REST: addressing, the inbox with per-agent read marks, refusals that name who exists."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import RunningServer, add_key, make_account
from tests.teams.conftest import Agent, error


def team(server: RunningServer, session: str, *names: str) -> list[Agent]:
    me = make_account(server)
    http = server.client(me.key)
    return [Agent(http, session, name) for name in names]


def contents(inbox: dict[str, Any]) -> list[str]:
    return [m["content"] for m in inbox["messages"]]


def test_messages_reach_an_agent_a_role_and_everyone(server: RunningServer) -> None:
    arch, back1, back2, front = team(server, "chat", "arch", "back1", "back2", "front")
    arch.join("architect")
    back1.join("backend", capabilities=["python"])
    back2.join("backend")
    front.join("frontend", client="cursor")

    direct = arch.send("back1", "Which ORM?")
    assert set(direct) == {"id", "from", "to", "kind", "content", "attachments", "reply_to", "time", "read"}
    assert direct["from"] == "arch" and direct["to"] == "back1" and direct["kind"] == "question"
    arch.send("role:backend", "API contract v1", kind="contract", attachments=[{"file": "api.yaml", "content": "x"}])
    arch.send("*", "standup in 5", kind="status")
    answer = back1.send("arch", "SQLAlchemy", kind="answer", reply_to=direct["id"])
    assert answer["reply_to"] == direct["id"]

    first = back1.inbox()
    assert contents(first) == ["Which ORM?", "API contract v1", "standup in 5"]
    assert first["messages"][1]["attachments"] == [{"file": "api.yaml", "diff": None, "content": "x"}]
    assert all(not m["read"] for m in first["messages"]) and first["more"] is False
    assert back1.inbox()["messages"] == []  # read marks are kept
    assert contents(back1.inbox(unread_only="false")) == ["Which ORM?", "API contract v1", "standup in 5"]
    assert all(m["read"] for m in back1.inbox(unread_only="false")["messages"])

    assert contents(back2.inbox()) == ["API contract v1", "standup in 5"]  # read marks are per agent
    assert contents(front.inbox()) == ["standup in 5"]
    assert contents(arch.inbox()) == ["SQLAlchemy"]  # never one's own messages

    log = arch.http.get(arch.url("/messages")).json()
    assert [m["content"] for m in log["messages"]] == ["Which ORM?", "API contract v1", "standup in 5", "SQLAlchemy"]
    assert log["next_after"] is None


def test_peeking_and_paging_the_inbox(server: RunningServer) -> None:
    a, b = team(server, "pages", "a", "b")
    b.inbox()  # b has used the session, so a may address it
    for i in range(5):
        a.send("b", f"m{i}", kind="status")
    peek = b.inbox(mark_read="false", limit=2)
    assert contents(peek) == ["m0", "m1"] and peek["more"] is True
    assert contents(b.inbox(limit=3)) == ["m0", "m1", "m2"]
    rest = b.inbox(limit=3)
    assert contents(rest) == ["m3", "m4"] and rest["more"] is False
    log = a.http.get(a.url("/messages"), params={"limit": 2}).json()
    assert [m["content"] for m in log["messages"]] == ["m0", "m1"]
    after = a.http.get(a.url("/messages"), params={"after": log["next_after"]}).json()
    assert [m["content"] for m in after["messages"]] == ["m2", "m3", "m4"]


def test_an_agent_joining_a_role_later_finds_that_roles_messages(api: RunningServer) -> None:
    a, b, late = team(api, "late", "a", "b", "late")
    b.join("qa")
    a.send("role:qa", "please test login", kind="task")
    late.join("qa")
    assert contents(late.inbox()) == ["please test login"]
    assert contents(b.inbox()) == ["please test login"]


def test_unknown_addressees_are_refused_naming_those_that_exist(api: RunningServer) -> None:
    a, b = team(api, "names", "a", "b")
    b.join("backend")
    assert error(a.request("POST", "/messages", json={"to": "ghost", "kind": "question", "content": "?"}), 404) == (
        "this session has never seen an agent 'ghost'; agents: b"
    )
    assert error(a.request("POST", "/messages", json={"to": "role:qa", "kind": "status", "content": "x"}), 404) == (
        "no agent of this session has ever had role 'qa'; roles: role:backend"
    )
    assert "yourself" in error(a.request("POST", "/messages", json={"to": "a", "kind": "status", "content": "x"}), 422)
    b.ok("DELETE", "/agents")
    # An agent that left was seen: it can still be written to and finds the message when it comes back.
    a.send("b", "when you are back")
    a.send("role:backend", "to the role b had")
    assert contents(b.inbox()) == ["when you are back"]  # b has no role until it joins again
    b.join("backend")
    assert contents(b.inbox()) == ["to the role b had"]
    assert a.http.get(a.url("/messages")).json()["messages"][0]["to"] == "b"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"to": "b", "kind": "gossip", "content": "x"}, "kind"),
        ({"to": "b", "kind": "question", "content": ""}, "content"),
        ({"to": "b", "kind": "question", "content": "x" * 16001}, "content"),
        ({"to": "b", "kind": "question", "content": "nul\u0000"}, "NUL"),
        ({"to": "b", "kind": "diff", "content": "x", "attachments": [{"file": "a.py"}]}, "exactly one"),
        (
            {"to": "b", "kind": "diff", "content": "x", "attachments": [{"file": "a", "diff": "-", "content": "+"}]},
            "one",
        ),
        ({"to": "b", "kind": "diff", "content": "x", "attachments": [{"diff": "-"}]}, "file"),
        ({"to": "b", "kind": "diff", "content": "x", "attachments": [{"file": "/", "diff": "-"}]}, "does not name"),
        ({"to": "b", "kind": "diff", "content": "x", "attachments": [{"file": "a", "diff": "\u0000"}]}, "NUL"),
        ({"to": "b", "kind": "question", "content": "x", "reply_to": 0}, "reply_to"),
        ({"to": "b", "kind": "question", "content": "x", "urgent": True}, "urgent"),
        ({"to": "", "kind": "question", "content": "x"}, "to"),
    ],
)
def test_bad_messages_are_refused_and_nothing_is_stored(
    api: RunningServer, body: dict[str, Any], fragment: str
) -> None:
    a, b = team(api, "bad", "a", "b")
    b.inbox()
    assert fragment in error(a.request("POST", "/messages", json=body), 422)
    assert b.inbox()["messages"] == []
    assert a.http.get(a.url("/messages")).json()["messages"] == []


def test_a_reply_must_answer_a_message_of_the_same_session(api: RunningServer) -> None:
    a, b = team(api, "one", "a", "b")
    b.inbox()
    other = Agent(a.http, "two", "a")
    Agent(a.http, "two", "c").inbox()
    elsewhere = other.send("c", "in session two")
    message = error(a.request("POST", "/messages", json={**_question("b"), "reply_to": elsewhere["id"]}), 404)
    assert message == f"reply_to {elsewhere['id']} is not a message of this session"


def _question(to: str) -> dict[str, Any]:
    return {"to": to, "kind": "question", "content": "?"}


def test_inbox_bad_input_and_keys(api: RunningServer) -> None:
    me = make_account(api)
    a = Agent(api.client(me.key), "keys", "a")
    assert "limit" in error(a.request("GET", "/inbox", params={"limit": 0}), 422)
    assert "limit" in error(a.request("GET", "/inbox", params={"limit": 201}), 422)
    assert "agent" in error(a.http.get(a.url("/inbox")), 422)
    reader = Agent(api.client(add_key(api, me.user_id, scope="read").key), "keys", "r")
    reader.inbox()
    assert reader.request("POST", "/messages", json=_question("a")).status_code == 403
    a.send("r", "for the reader")
    # A read key reads its inbox but marks nothing (marking is a write): the message stays unread for the agent.
    assert contents(reader.inbox()) == ["for the reader"]
    assert contents(reader.inbox(unread_only="true")) == ["for the reader"]


def test_messages_are_isolated_between_sessions_and_tenants(api: RunningServer) -> None:
    (a, b) = team(api, "iso", "a", "b")
    b.inbox()
    a.send("*", "for iso only", kind="status")
    assert Agent(a.http, "other", "b").inbox()["messages"] == []
    (stranger,) = team(api, "iso", "b")
    assert stranger.inbox()["messages"] == []
    assert stranger.http.get(stranger.url("/messages")).json()["messages"] == []
    assert contents(b.inbox()) == ["for iso only"]


def test_a_key_bound_to_an_agent_reads_only_that_agents_part_of_the_log(server: RunningServer) -> None:
    owner = make_account(server)
    agents = {name: Agent(server.client(owner.key), "bound-log", name) for name in ("dev", "qa", "ops")}
    agents["dev"].join("developer")
    agents["qa"].join("tester")
    agents["ops"].join("operator")
    agents["dev"].send("qa", "dev to qa")
    agents["qa"].send("dev", "qa to dev")
    agents["dev"].send("role:tester", "dev to the testers")
    agents["ops"].send("*", "ops to everyone")
    agents["qa"].send("ops", "qa to ops")
    agents["ops"].send("role:developer", "ops to the developers")

    def log(key: str) -> list[str]:
        with server.client(key) as http:
            response = http.get("/v1/sessions/bound-log/messages")
            assert response.status_code == 200, response.text
            return [m["content"] for m in response.json()["messages"]]

    everything = [
        "dev to qa",
        "qa to dev",
        "dev to the testers",
        "ops to everyone",
        "qa to ops",
        "ops to the developers",
    ]
    assert log(owner.key) == everything
    dev = add_key(server, owner.user_id, session="bound-log", agent="dev")
    assert log(dev.key) == ["dev to qa", "qa to dev", "dev to the testers", "ops to everyone", "ops to the developers"]
    qa = add_key(server, owner.user_id, session="bound-log", agent="qa")
    assert log(qa.key) == ["dev to qa", "qa to dev", "dev to the testers", "ops to everyone", "qa to ops"]
    stranger = add_key(server, owner.user_id, session="bound-log", agent="newcomer")  # never joined: no role
    assert log(stranger.key) == ["ops to everyone"]
