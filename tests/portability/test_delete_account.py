"""Deleting an account from the dashboard erases it everywhere: no row of any table names it, the index holds none
of its points, its coordination state is gone, its keys and tokens stop at once, its machines hear 410; other
accounts keep everything."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy import inspect, text

from app.sync import credentials
from app.sync.credentials import AccountGone
from tests.harness import RunningServer
from tests.oauth.conftest import make_sync_client, sync_token
from tests.portability.conftest import export_of, fill, fill_with
from tests.web.conftest import PASSWORD, Browser


def rows_naming(server: RunningServer, needle: str) -> dict[str, int]:
    """For every table of the database (read from the database, not the models): the rows naming ``needle``."""

    async def scan() -> dict[str, int]:
        found: dict[str, int] = {}
        async with server.container.db.engine.connect() as conn:
            tables = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
            assert "memories" in tables and "erased_credentials" in tables
            for table in tables:
                rows = (await conn.execute(text(f'SELECT * FROM "{table}"'))).all()
                hits = sum(1 for row in rows if any(needle in str(value) for value in row))
                if hits:
                    found[table] = hits
        return found

    result: dict[str, int] = server.run(scan())
    return result


def index_ids(server: RunningServer, user_id: str) -> set[str]:
    result: set[str] = server.run(server.container.engine.ids(user_id=user_id))
    return result


def claim(server: RunningServer, key: str, agent: str) -> None:
    with server.client(key) as http:
        response = http.post("/v1/sessions/web/claims", json={"agent": agent, "file_paths": ["src/app.py"]})
        assert response.status_code == 200 and response.json()["granted"], response.text


def coordination_of(server: RunningServer, user_id: str) -> list[str]:
    """Whatever the coordination backend holds for ``user_id``'s sessions."""
    coordination = server.container.coordination
    if coordination.name == "memory":
        return [str(key) for key in coordination._sessions if key.user_id == user_id]

    async def keys() -> list[str]:
        return [k async for k in coordination._client.scan_iter(match=f"*{user_id}*")]

    result: list[str] = server.run(keys())
    return result


def test_deleting_from_the_dashboard_erases_everything_of_the_account_and_nothing_else(
    api: RunningServer, browser: Callable[[], Browser]
) -> None:
    victim = browser().signup()
    assert victim.user_id is not None
    key = victim.create_key()
    fill_with(api, key)
    claim(api, key, "arch")
    machine = make_sync_client(api, victim.user_id, "laptop")
    token = sync_token(api, machine).json()["access_token"]
    before = export_of(api, key)
    memory_ids = {line["id"] for line in before[1:] if line["type"] == "memory"}
    assert memory_ids and index_ids(api, victim.user_id) >= memory_ids
    assert coordination_of(api, victim.user_id)

    other_id, other_key = fill(api)
    claim(api, other_key, "dev")
    other_rows = rows_naming(api, other_id)
    other_export = export_of(api, other_key)
    other_index = index_ids(api, other_id)

    page = victim.get("/account/delete")
    assert page.status_code == 200 and "Delete my account" in page.text

    wrong = victim.submit("/account/delete", "/account/delete", password="not my password at all")
    assert wrong.status_code == 400 and "not your password" in wrong.text
    no_csrf = victim.post("/account/delete", {"password": PASSWORD})
    assert no_csrf.status_code == 403
    with api.client(key) as http:
        assert http.get("/v1/memories").status_code == 200  # neither did anything

    done = victim.submit("/account/delete", "/account/delete", password=PASSWORD)
    assert done.status_code == 200 and "Account deleted" in done.text, done.text
    assert victim.get("/dashboard").status_code in (302, 303)  # the browser session ended with it

    assert rows_naming(api, victim.user_id) == {}
    assert index_ids(api, victim.user_id) == set()
    assert not memory_ids & index_ids(api, other_id)
    assert coordination_of(api, victim.user_id) == []
    with api.client(key) as http:
        assert http.get("/v1/memories").status_code == 401
    with httpx.Client(base_url=api.base_url, timeout=30) as http:
        gone = http.get("/sync/v1/me", headers={"Authorization": f"Bearer {token}"})
        assert gone.status_code == 410 and gone.json()["error"]["code"] == "account_deleted", gone.text
        refused = sync_token(api, machine)
        assert refused.status_code in (400, 401)
        assert refused.json()["error_description"].startswith("account_deleted"), refused.text

    # The node's own OAuth client hears it as final too (what its worker does when a token must be renewed).
    assert isinstance(asyncio.run(_renewal(api, machine)), AccountGone)

    assert rows_naming(api, other_id) == other_rows
    assert export_of(api, other_key)[1:] == other_export[1:]
    assert index_ids(api, other_id) == other_index
    assert coordination_of(api, other_id)


async def _renewal(server: RunningServer, machine: dict[str, str]) -> Exception | None:
    async with httpx.AsyncClient(timeout=30) as http:
        edge = await credentials.discover(http, server.base_url)
        try:
            await credentials.client_credentials_token(
                http, edge, credentials.NodeClient(machine["client_id"], machine["client_secret"])
            )
        except Exception as exc:
            return exc
    return None


def test_an_unknown_token_still_hears_401_not_410(api: RunningServer) -> None:
    with httpx.Client(base_url=api.base_url, timeout=30) as http:
        answer = http.get("/sync/v1/me", headers={"Authorization": "Bearer not-a-token"})
    assert answer.status_code == 401


def test_the_dashboard_download_is_the_accounts_export(api: RunningServer, browser: Callable[[], Browser]) -> None:
    person = browser().signup()
    key = person.create_key()
    fill_with(api, key)
    download = person.get("/account/export")
    assert download.status_code == 200
    assert download.headers["content-disposition"].startswith("attachment; filename=")
    lines = [line for line in download.text.splitlines() if line]
    expected = export_of(api, key)
    got: list[Any] = [json.loads(line) for line in lines]
    assert got[1:] == expected[1:] and got[0]["user_id"] == person.user_id
