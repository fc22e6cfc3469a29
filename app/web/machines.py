"""The Sync page: link a machine (sync credentials), the machine clients, and the linked machines, each listed once."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get, post

from app.accounts.models import User
from app.container import Container
from app.errors import AppError
from app.oauth import machine_clients
from app.sync import peers
from app.web.flash import Flash, redirect_with
from app.web.pages import form_data, render
from app.web.session import verify_csrf

SYNC_PAGE = "/dashboard/sync"


async def _page(
    request: Request[Any, Any, Any], container: Container, user: User, *, status_code: int = 200, **extra: Any
) -> Response[Any]:
    async with container.db.session() as db_session:
        clients = await machine_clients.list_for(db_session, user.id)
        machines = await peers.linked_machines(db_session, user.id)
    return render(
        request,
        "sync.html",
        status_code=status_code,
        user=user,
        machine_clients=clients,
        linked_machines=machines,
        base_url=container.settings.resolved_public_base_url,
        **extra,
    )


@get(SYNC_PAGE, name="web:sync")
async def sync_page(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    return await _page(request, container, user)


@post("/dashboard/sync-clients", status_code=201)
async def create_sync_client(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    """Link a machine: a sync client (client_credentials, scope sync) of this user; its secret is shown this once."""
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    name = data.get("machine_name", "").strip()[:200]
    try:
        async with container.db.session() as db_session:
            created = await machine_clients.create_sync_client(db_session, user.id, name)
    except AppError as exc:
        return await _page(
            request,
            container,
            user,
            status_code=422,
            sync_errors={"machine_name": exc.message},
            sync_values={"machine_name": name},
        )
    return await _page(request, container, user, status_code=201, new_sync_client=created)


@post("/dashboard/clients/{client_id:str}/revoke", status_code=303)
async def revoke_machine_client(
    request: Request[Any, Any, Any], client_id: str, user: User, container: Container
) -> Response[Any]:
    """Revoke a machine client of this user: it gets no new token and the ones it has stop working."""
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    async with container.db.session() as db_session:
        await machine_clients.revoke(db_session, client_id, user_id=user.id)
    notice = f"Machine client {client_id} revoked: it gets no new token and its tokens stopped working."
    return redirect_with(request, SYNC_PAGE + "#clients", Flash(notice=notice))
