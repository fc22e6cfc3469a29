"""Machine (client_credentials) clients: only an API key makes one, and the owner sees and revokes every one.

The hole this pins shut: an OAuth access token used to register a machine client that outlived every revocation of
the grant behind that token.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.harness import RunningServer, make_account
from tests.oauth.conftest import register, token_request
from tests.web.conftest import Browser

ENGRAM = str(Path(sys.executable).with_name("engram"))


def _machine_client(api: RunningServer, key: str, **metadata: Any) -> dict[str, Any]:
    return register(
        api, key=key, grant_types=["client_credentials"], token_endpoint_auth_method="client_secret_basic", **metadata
    )


def _machine_token(api: RunningServer, client: dict[str, Any]) -> Any:
    return token_request(api, {"grant_type": "client_credentials"}, auth=(client["client_id"], client["client_secret"]))


def test_an_oauth_access_token_cannot_register_a_machine_client(
    api: RunningServer, user: Browser, tokens_for: Any
) -> None:
    issued = tokens_for(user, f"{api.base_url}/v1")
    assert "memories:write" in issued["scope"]
    response = api.client(issued["access_token"]).post(
        "/oauth/register", json={"grant_types": ["client_credentials"], "client_name": "sneaky"}
    )
    assert response.status_code == 403, response.text
    assert response.json()["error"] == "access_denied"
    assert "API key" in response.json()["error_description"]
    # The same token may still register an ordinary client, which needs a person's consent before it gets anything.
    ordinary = api.client(issued["access_token"]).post(
        "/oauth/register", json={"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}
    )
    assert ordinary.status_code == 201, ordinary.text


def test_the_owner_lists_and_revokes_machine_clients_on_the_dashboard(api: RunningServer, user: Browser) -> None:
    assert user.user_id is not None
    key = user.create_key("scripts")
    client = _machine_client(api, key, client_name="nightly backup")
    token = _machine_token(api, client).json()["access_token"]
    with api.client(token) as rest:
        assert rest.get("/v1/memories").status_code == 200

        page = user.get("/dashboard/sync").text  # machine clients are listed on the sync page
        rows = dict(re.findall(r'<tr class="(?:active|revoked)" data-client-id="([^"]+)">(.*?)</tr>', page, re.S))
        assert client["client_id"] in rows
        assert "nightly backup" in rows[client["client_id"]] and "scripts" in rows[client["client_id"]]

        action = f"/dashboard/clients/{client['client_id']}/revoke"
        assert user.post(action, {"_csrf": "forged"}).status_code == 403
        stranger = Browser(api).signup()
        assert stranger.submit("/dashboard/sync", action).status_code == 404
        assert rest.get("/v1/memories").status_code == 200

        assert user.submit("/dashboard/sync", action).status_code == 303
        cut_off = rest.get("/v1/memories")
    assert cut_off.status_code == 401
    again = _machine_token(api, client)
    assert again.status_code == 401 and again.json()["error"] == "invalid_client"
    assert f'<tr class="revoked" data-client-id="{client["client_id"]}">' in user.get("/dashboard/sync").text


def test_the_cli_lists_and_revokes_machine_clients(api: RunningServer, tmp_path: Path) -> None:
    owner = make_account(api)
    other = make_account(api)
    mine = _machine_client(api, owner.key, client_name="ci runner", scope="memories:read")
    _machine_client(api, other.key, client_name="not yours")
    token = _machine_token(api, mine).json()["access_token"]
    env = {
        "ENGRAM_DATABASE_URL": api.settings.resolved_database_url,
        "ENGRAM_DATA_DIR": str(tmp_path),
        "ENGRAM_SECRET_KEY": api.settings.secret_key or "",
        "MEM0_TELEMETRY": "False",
        "PATH": "/usr/bin:/bin",
    }

    listed = subprocess.run(
        [ENGRAM, "oauth", "clients", "list", owner.user_id], env=env, capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["client_id"], r["name"], r["scope"], r["status"]) for r in rows] == [
        (mine["client_id"], "ci runner", "memories:read", "active")
    ]
    assert rows[0]["registered_with_key"] == owner.key_id and rows[0]["last_token_at"] is not None

    revoked = subprocess.run(
        [ENGRAM, "oauth", "clients", "revoke", mine["client_id"]], env=env, capture_output=True, text=True, timeout=120
    )
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.strip() == f"revoked {mine['client_id']} and 1 of its tokens"
    assert api.client(token).get("/v1/memories").status_code == 401
    assert _machine_token(api, mine).status_code == 401

    unknown = subprocess.run(
        [ENGRAM, "oauth", "clients", "revoke", "egc_nope"], env=env, capture_output=True, text=True, timeout=120
    )
    assert unknown.returncode == 1 and "no machine client" in unknown.stderr


def test_the_migration_revokes_machine_clients_that_an_oauth_token_made(tmp_path: Path) -> None:
    """Clients minted through the hole before the fix (an owner, no registering key) die with the upgrade."""
    import sqlite3

    from alembic import command

    from app.migrate import alembic_config

    path = tmp_path / "m.db"
    config = alembic_config(f"sqlite+aiosqlite:///{path}")
    command.upgrade(config, "0005_client_key")
    now, later = "2026-11-01 00:00:00.000000", "2030-01-01 00:00:00.000000"
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO users (id, email, plan, created_at) VALUES ('u_1', 'a@b.c', 'free', ?)", (now,))
        for client_id, key in (("egc_minted", None), ("egc_keyed", "k_1")):
            db.execute(
                "INSERT INTO oauth_clients (id, secret_hash, owner_id, client_metadata, created_at,"
                " registered_with_key) VALUES (?, 'x', 'u_1', '{}', ?, ?)",
                (client_id, now, key),
            )
            db.execute(
                "INSERT INTO oauth_tokens (id, family_id, client_id, user_id, grant_type, scope, resource, access_hash,"
                " access_expires_at, created_at) VALUES (?, ?, ?, 'u_1', 'client_credentials', 'memories:write', 'r',"
                " ?, ?, ?)",
                ("t_" + client_id, "f_" + client_id, client_id, "h_" + client_id, later, now),
            )
    command.upgrade(config, "0006_client_revocation")
    with sqlite3.connect(path) as db:
        clients = dict(db.execute("SELECT id, revoked_at IS NOT NULL FROM oauth_clients").fetchall())
        tokens = dict(db.execute("SELECT client_id, revoked_at IS NOT NULL FROM oauth_tokens").fetchall())
    assert clients == {"egc_minted": 1, "egc_keyed": 0}
    assert tokens == {"egc_minted": 1, "egc_keyed": 0}
