"""The dashboard's "Linked machines": cutting one off (the list is part of the Sync page)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post

from app.accounts.models import User
from app.container import Container
from app.sync import peers
from app.web.flash import Flash, redirect_with
from app.web.pages import form_data
from app.web.session import verify_csrf


@post("/dashboard/machines/{peer_id:str}/cut-off", status_code=303)
async def cut_off_machine(
    request: Request[Any, Any, Any], peer_id: str, user: User, container: Container
) -> Response[Any]:
    """Stop a linked machine: its grant (and its sync client) are revoked, so its next request is refused."""
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    async with container.db.session() as db_session:
        name = await peers.cut_off(db_session, user.id, peer_id)
    notice = f"Cut off {name}: its next request is refused. Link it again to resume."
    return redirect_with(request, "/dashboard/sync#machines", Flash(notice=notice))
