"""The sessions view: the user's sessions, and per session its agents (with roles), task board, messages, claims and
latest changes, refreshed live over Server-Sent Events."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from litestar import Request, Response, get
from litestar.response import Redirect, ServerSentEvent

from app.accounts.models import User
from app.container import Container
from app.coordination import Change, Claim, SessionKey
from app.db import utcnow
from app.errors import AppError
from app.identity import Identity, validate_name
from app.memories import repository as memory_repository
from app.projects import repository as project_repository
from app.sessions.sse import event_stream
from app.teams import erase as team_erase
from app.teams.schemas import AgentOut, MessageOut, TaskOut
from app.web.pages import PAGE_HEADERS, render, render_html
from app.web.session_admin import FILES_SHOWN, holdings, session_name
from app.web.taskboard import Board, layout

KEEPALIVE_SECONDS = 15
LATEST_CHANGES = 20
LATEST_MESSAGES = 50
# The dashboard watches without joining: it never touches presence, so it does not show up as an agent.
WATCHER = "dashboard"


@dataclass(frozen=True, slots=True)
class SessionView:
    session: str
    agents: list[AgentOut]
    claims: list[Claim]
    changes: list[Change]
    tasks: list[TaskOut]
    board: Board
    messages: list[MessageOut]


async def read_session(container: Container, user_id: str, session: str) -> SessionView:
    """Who is in the session (roles, state, files, task), the task graph, the latest messages and changes
    (newest first) and what is claimed. Reading it does not make the dashboard an agent."""
    coordination, teams = container.coordination, container.teams
    key = SessionKey(user_id, session)
    presence = await coordination.presence(key)
    claims = await coordination.claims(key)
    page = await coordination.changes(key, since_time=utcnow() - timedelta(days=7), limit=1000)
    agents = await teams.agents.roster(key, presence, claims)
    tasks = await teams.tasks.graph(user_id, session)
    messages = await teams.messages.latest(user_id, session, LATEST_MESSAGES)
    changes = list(reversed(page.changes[-LATEST_CHANGES:]))
    return SessionView(session, agents, claims, changes, tasks, layout(tasks), messages)


@get("/dashboard/sessions", name="web:sessions")
async def sessions(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    name = request.query_params.get("session", "").strip()[:200]
    known = await container.teams.agents.sessions(user.id)
    async with container.db.session() as db:
        written = await memory_repository.counts_by_session(db, user.id)
        indexed = await project_repository.totals_by_session(db, user.id)
        archived = await team_erase.archived(db, user.id)
    listed: dict[str, Any] = {
        "sessions": [s for s in known if s.session not in archived],
        "archived": sorted(archived.values(), key=lambda a: a.archived_at, reverse=True),
        "written": written,
        "indexed": indexed,
    }
    if not name:
        return render(request, "sessions.html", user=user, **listed)
    try:
        validate_name(name, "session")
    except AppError as exc:
        return render(
            request,
            "sessions.html",
            status_code=400,
            user=user,
            **listed,
            errors={"session": exc.message},
            values={"session": name},
        )
    return Redirect(f"/dashboard/sessions/{quote(name, safe='')}", status_code=303)


@get("/dashboard/sessions/{session:str}", name="web:session")
async def session_page(
    request: Request[Any, Any, Any], session: str, user: User, container: Container
) -> Response[Any]:
    name = session_name(session)
    view = await read_session(container, user.id, name)
    held = await holdings(container, user.id, name)
    return render(request, "session.html", user=user, view=view, held=held, files_shown=FILES_SHOWN)


@get("/dashboard/sessions/{session:str}/panel")
async def session_panel(
    request: Request[Any, Any, Any], session: str, user: User, container: Container
) -> Response[Any]:
    """The lists alone, which the page's script swaps in when an event arrives."""
    view = await read_session(container, user.id, session_name(session))
    html = render_html(request, "session_panel.html", {"view": view})
    # A fragment, but HTML a browser can be sent to or frame: the headers of every page.
    return Response(content=html, media_type="text/html", headers=PAGE_HEADERS)


@get("/dashboard/sessions/{session:str}/events")
async def session_events(session: str, user: User, container: Container) -> ServerSentEvent:
    """Live events of the session (claims, changes, agents, messages, tasks), authenticated by the session cookie."""
    identity = Identity(user.id, session_name(session), WATCHER)
    # The page only needs to know that something happened; it re-reads the panel.
    return await event_stream(
        container.sessions.events(identity),
        identity.session or "",
        payload=lambda event: {"kind": event.kind, "agent": event.agent, "at": event.at.isoformat()},
        headers={"Cache-Control": "no-store"},
        slot=container.streams.hold(user.id),
    )
