"""A session's memories and documents on its page, re-indexing its registered project, and deleting the session
(after a confirmation that says how much goes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from litestar import Request, Response, post

from app.accounts.models import User
from app.container import Container
from app.errors import AppError, NotFound
from app.identity import validate_name
from app.projects import repository as projects
from app.projects.models import Document, Project
from app.sessions.erase import SessionContents, contents, erase
from app.teams import erase as teams
from app.web.flash import Flash, redirect_with
from app.web.pages import form_data, web_principal
from app.web.session import verify_csrf

# The indexed files listed on a session's page; beyond this many it says how many more there are.
FILES_SHOWN = 200


@dataclass(frozen=True, slots=True)
class SessionHoldings:
    contents: SessionContents
    files: list[Document]
    chunks: int
    project: Project | None
    archived: bool


async def holdings(container: Container, user_id: str, session: str) -> SessionHoldings:
    """What the session holds besides its live coordination: counts, indexed files, its registered project."""
    counted = await contents(container, user_id, session)
    async with container.db.session() as db:
        files = list(await projects.listing(db, user_id, session))
        project = await projects.project(db, user_id, session)
        archived = session in await teams.archived(db, user_id)
    return SessionHoldings(counted, files[:FILES_SHOWN], sum(f.chunks for f in files), project, archived)


def session_name(session: str) -> str:
    """A session named in a page's path; a name that cannot be one is a page that does not exist."""
    try:
        return validate_name(session, "session")
    except AppError:
        raise NotFound("there is no such session") from None


def session_url(session: str) -> str:
    return f"/dashboard/sessions/{quote(session, safe='')}"


@post("/dashboard/sessions/{session:str}/reindex", status_code=303)
async def reindex(request: Request[Any, Any, Any], session: str, user: User, container: Container) -> Response[Any]:
    """Index the session's registered project folder again now: add, replace and remove what changed."""
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    name = session_name(session)
    project = await container.projects.find(name, user.id)
    report = await container.projects.reconcile(project)
    notice = (
        f"Re-indexed {project.path}: {report.added} added, {report.changed} changed, {report.removed} removed, "
        f"{report.unchanged} unchanged ({report.seconds:.1f} s)."
    )
    return redirect_with(request, session_url(name) + "#holdings", Flash(notice=notice))


@post("/dashboard/sessions/{session:str}/archive", status_code=303)
async def archive(request: Request[Any, Any, Any], session: str, user: User, container: Container) -> Response[Any]:
    """Archive the session (or, with ``undo``, bring it back): the list leaves it out; nothing of it is deleted."""
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    name = session_name(session)
    undo = data.get("undo") == "1"
    async with container.db.session() as db:
        await teams.set_archived(db, user.id, name, not undo)
    if undo:
        return redirect_with(request, session_url(name), Flash(notice=f"Session {name} is back in the list."))
    notice = f"Session {name} archived: it is left out of the list; its memories, messages and tasks are kept."
    return redirect_with(request, "/dashboard/sessions", Flash(notice=notice))


@post("/dashboard/sessions/{session:str}/delete", status_code=303)
async def delete_session(
    request: Request[Any, Any, Any], session: str, user: User, container: Container
) -> Response[Any]:
    """Delete the session's memories (indexed files included), messages and tasks."""
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    name = session_name(session)
    erased = await erase(container, web_principal(user), name)
    notice = f"Session {name} deleted: {erased.describe()}. Memories keep their history."
    return redirect_with(request, "/dashboard/sessions", Flash(notice=notice))
