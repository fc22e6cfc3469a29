"""The dashboard's "Link a machine": a sync client of the logged-in user, its secret shown once, CSRF-protected;
listed and revoked with the other machine clients, and revoking it stops its next sync request."""

from __future__ import annotations

import html
import re
from typing import Any

from tests.harness import RunningServer
from tests.oauth.conftest import sync_token
from tests.web.conftest import Browser


def _shown(page: str, element: str) -> str:
    match = re.search(rf'id="{element}"[^>]*>([^<]+)<', page)
    assert match, page
    return html.unescape(match.group(1))


def test_link_a_machine_shows_the_secret_once_and_revoking_it_stops_sync(api: RunningServer, browser: Any) -> None:
    user: Browser = browser().signup()
    made = user.submit("/dashboard/sync", "/dashboard/sync-clients", machine_name="build server")
    assert made.status_code == 201, made.text
    client = {
        "client_id": _shown(made.text, "sync-client-id"),
        "client_secret": _shown(made.text, "sync-client-secret"),
    }
    command = _shown(made.text, "cmd-sync-link")
    assert command == (
        f"engram sync link {api.base_url} --user LOCAL_USER_ID --client-id {client['client_id']} "
        f"--client-secret {client['client_secret']}"
    )

    issued = sync_token(api, client)
    assert issued.status_code == 200 and issued.json()["scope"] == "sync", issued.text
    with api.client(issued.json()["access_token"]) as sync:
        assert sync.get("/sync/v1/me").json()["user_id"] == user.user_id

        later = user.get("/dashboard/sync").text
        assert client["client_secret"] not in later
        row = re.search(rf'<tr class="active" data-client-id="{client["client_id"]}">(.*?)</tr>', later, re.S)
        assert row and "build server" in row.group(1) and ">sync<" in row.group(1)
        stranger: Browser = browser().signup()
        assert client["client_id"] not in stranger.get("/dashboard/sync").text

        assert user.submit("/dashboard/sync", f"/dashboard/clients/{client['client_id']}/revoke").status_code == 303
        assert sync.get("/sync/v1/me").status_code == 401
    assert sync_token(api, client).json()["error"] == "invalid_client"


def test_link_a_machine_refuses_bad_input_and_forged_forms(api: RunningServer, browser: Any) -> None:
    user: Browser = browser().signup()
    for name, message in (("   ", "name must be 1-100 characters"), ("x" * 101, "name must be 1-100 characters")):
        refused = user.submit("/dashboard/sync", "/dashboard/sync-clients", machine_name=name)
        assert refused.status_code == 422 and message in refused.text, refused.text
        assert 'id="new-sync-client"' not in refused.text
    forged = user.post("/dashboard/sync-clients", {"_csrf": "forged", "machine_name": "evil"})
    assert forged.status_code == 403
    anonymous = Browser(api).post("/dashboard/sync-clients", {"machine_name": "nobody"})
    assert anonymous.status_code in (303, 403)
    assert "sync-client-id" not in user.get("/dashboard/sync").text and "evil" not in user.get("/dashboard/sync").text
