"""Edge sync carries the end-user dimension and Mem0's agent without a run, both ways."""

from __future__ import annotations

import os
import uuid

os.environ.setdefault("MEM0_TELEMETRY", "False")

from mem0 import MemoryClient

from tests.harness import RunningServer, make_account
from tests.sync.test_protocol import pull_all, push, token_for, wire


def test_end_users_and_agents_outside_a_session_travel_with_sync(api: RunningServer) -> None:
    account = make_account(api)
    token = token_for(api, account.user_id)
    mem0 = MemoryClient(api_key=account.key, host=api.base_url)
    written = mem0.add("Prefers trains to planes", user_id="zoe@example.com", agent_id="planner", infer=False)
    memory_id = written["results"][0]["id"]
    plain = mem0.add("No end user here", infer=False, agent_id="planner")["results"][0]["id"]
    mem0.client.close()

    changes, _ = pull_all(api, token, "n_laptop")
    by_id = {c["memory_id"]: c["record"] for c in changes}
    assert by_id[memory_id]["end_user"] == "zoe@example.com" and by_id[memory_id]["agent"] == "planner"
    assert "end_user" not in by_id[plain]  # sent only when set: a peer from before it takes the rest

    pushed = str(uuid.uuid4())
    change = wire(pushed, "Allergic to cats")
    change["record"].update(end_user="yan", agent="helper")
    response = push(api, token, [change])
    assert response.status_code == 200, response.text
    with api.client(account.key) as http:
        got = http.get(f"/v1/memories/{pushed}").json()
    assert (got["end_user"], got["agent"], got["session"]) == ("yan", "helper", None)
    refused = wire(str(uuid.uuid4()), "agent memory of a session scope without a session")
    refused["record"].update(agent="helper", scope="session")
    assert push(api, token, [refused]).status_code == 422
