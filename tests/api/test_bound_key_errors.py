"""What a key bound to one session and agent hears when a REST request names another place: the names it asked for,
and nothing it did not ask for."""

from __future__ import annotations

from tests.harness import RunningServer, add_key, make_account


def test_naming_only_another_session_is_refused_without_mentioning_an_agent(api: RunningServer) -> None:
    owner = make_account(api)
    bob = add_key(api, owner.user_id, session="proj", agent="bob")
    with api.client(bob.key) as http:
        response = http.get("/v1/memories", params={"session": "other"})
    assert response.status_code == 403, response.text
    message = response.json()["error"]["message"]
    assert message.endswith("it cannot act as session 'other'"), message
    assert "None" not in message


def test_naming_another_session_and_agent_names_both(api: RunningServer) -> None:
    owner = make_account(api)
    bob = add_key(api, owner.user_id, session="proj", agent="bob")
    with api.client(bob.key) as http:
        response = http.post("/v1/memories", json={"content": "x", "session": "other", "agent": "eve"})
    assert response.status_code == 403, response.text
    assert response.json()["error"]["message"].endswith("it cannot act as session 'other', agent 'eve'")
