"""A session agent's readable resources: the session's status, its change feed, the agent's inbox and the tasks.

They exist so that clients of the stateless 2026-07-28 revision, which have no standing stream, can still be told
when the session moves: they subscribe to these URIs with ``subscriptions/listen`` (see ``app.mcp.listen``) and
read them again when notified. The URIs name only the session; the endpoint's URL already names the user, so a
caller can never reach another tenant's resources, and a URI of another session of the same user is refused.
"""

from __future__ import annotations

import json

import mcp.types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from app.coordination import Event
from app.mcp.caller import Caller

SCHEME = "engram"
_STATUS = "status"
_CHANGES = "changes"
_INBOX = "inbox"
_TASKS = "tasks"
_NAMES = (_STATUS, _CHANGES, _INBOX, _TASKS)

# Which resource each kind of live event changes (a message reaches only its addressees: see listen).
_TOUCHED_BY: dict[str, tuple[str, ...]] = {
    "change": (_CHANGES, _STATUS),
    "claim": (_STATUS,),
    "release": (_STATUS,),
    "agent": (_STATUS,),
    "task": (_TASKS, _STATUS),
    "message": (_INBOX,),
}


def resource_uri(session: str, name: str) -> str:
    return f"{SCHEME}://sessions/{session}/{name}"


def own_uris(caller: Caller) -> frozenset[str]:
    """The resource URIs this caller may read and subscribe to: its own session's, and none outside session mode."""
    session = caller.identity.session
    if session is None or not caller.in_session:
        return frozenset()
    return frozenset(resource_uri(session, name) for name in _NAMES)


def uris_touched(caller: Caller, event: Event) -> list[str]:
    """The caller's resources that ``event`` changed."""
    session = caller.identity.session
    if session is None:
        return []
    return [resource_uri(session, name) for name in _TOUCHED_BY.get(event.kind, ())]


def list_resources(caller: Caller) -> list[types.Resource]:
    session = caller.identity.session
    if session is None or not caller.in_session:
        return []
    return [
        types.Resource(
            uri=resource_uri(session, _STATUS),
            name=f"session {session}: status",
            description="The agents of this session and when each was last seen, the active file claims, and the "
            "latest changes (the same as session_status). Changes whenever an agent claims, releases or broadcasts.",
            mime_type="application/json",
        ),
        types.Resource(
            uri=resource_uri(session, _CHANGES),
            name=f"session {session}: changes",
            description="Every agent's changes of the last 30 minutes, oldest first, with the cursor to pass to "
            "session_sync_changes. Changes whenever an agent broadcasts.",
            mime_type="application/json",
        ),
        types.Resource(
            uri=resource_uri(session, _INBOX),
            name=f"session {session}: inbox",
            description="Your unread messages (to you, your role or everyone), oldest first; reading it does not "
            "mark them read (session_inbox does). Changes whenever a message for you arrives.",
            mime_type="application/json",
        ),
        types.Resource(
            uri=resource_uri(session, _TASKS),
            name=f"session {session}: tasks",
            description="The session's tasks with their status (the same as session_task_list). Changes whenever a "
            "task is created, claimed, completed or released.",
            mime_type="application/json",
        ),
    ]


async def read_resource(caller: Caller, uri: str) -> types.ReadResourceResult:
    if uri not in own_uris(caller):
        raise MCPError(
            code=types.INVALID_PARAMS,
            message=f"Resource not found: {uri!r}; this endpoint has "
            + (", ".join(sorted(own_uris(caller))) or "no resources outside session mode"),
        )
    sessions, teams = caller.container.sessions, caller.container.teams
    body: BaseModel
    if uri.endswith(f"/{_STATUS}"):
        body = await sessions.status(caller.principal, caller.identity)
    elif uri.endswith(f"/{_INBOX}"):
        body = await teams.messages.inbox(caller.principal, caller.identity, mark_read=False)
    elif uri.endswith(f"/{_TASKS}"):
        body = await teams.tasks.list(caller.principal, caller.identity)
    else:
        body = await sessions.sync_changes(caller.principal, caller.identity, include_own=True)
    text = json.dumps(body.model_dump(mode="json"), ensure_ascii=False)
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
    )
