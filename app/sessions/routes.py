"""REST ``/v1/sessions/{session}/...``: the coordination operations for scripts and dashboards, plus an SSE stream."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get, post
from litestar.openapi import ResponseSpec
from litestar.params import Parameter
from litestar.response import ServerSentEvent
from litestar.status_codes import HTTP_200_OK
from pydantic import Field

from app.accounts.principal import Principal
from app.admission.http import STREAM
from app.container import Container, authenticated
from app.coordination.cursors import CURSOR_PATTERN
from app.coordination.rules import (
    MAX_OPERATION_CHARS,
    MAX_PATH_CHARS,
    MAX_PATHS,
    MAX_SUMMARY_CHARS,
    OPERATION_PATTERN,
    PATH_SCHEMA,
)
from app.json_body import JsonIn
from app.memories.schemas import Name
from app.memories.scopes import viewer
from app.openapi import SSE_EVENTS_OPT, error_responses, name_parameter
from app.sessions.schemas import SSE_EVENTS, ChangeOut, ClaimFilesResult, ReleaseFilesResult, SessionStatus, SyncResult
from app.sessions.service import MAX_CLAIM_MINUTES, MAX_SYNC_MINUTES
from app.sessions.sse import event_stream
from app.teams.events import visible_to
from app.text import NOT_BLANK_SCHEMA

KEEPALIVE_SECONDS = 15
AgentParam = Annotated[str, name_parameter("agent", "The agent acting in the session")]
SessionPath = Annotated[str, name_parameter("session")]
FilePath = Annotated[str, Field(min_length=1, max_length=MAX_PATH_CHARS), PATH_SCHEMA]


# Stated in the schema; parse_cursor enforces it with a message that says what a cursor is.
CURSOR_SCHEMA = {"pattern": CURSOR_PATTERN}


class _In(JsonIn):
    """A request body."""


class ClaimIn(_In):
    agent: Name
    file_paths: list[FilePath] = Field(min_length=1, max_length=MAX_PATHS)
    operation: str = Field(
        default="write",
        min_length=1,
        max_length=MAX_OPERATION_CHARS,
        json_schema_extra={"pattern": OPERATION_PATTERN},  # check_operation enforces it, saying what is wrong
    )
    duration_minutes: int = Field(default=30, ge=1, le=MAX_CLAIM_MINUTES)


class ReleaseIn(_In):
    agent: Name
    file_paths: list[FilePath] = Field(min_length=1, max_length=MAX_PATHS)


class BroadcastIn(_In):
    agent: Name
    file_paths: list[FilePath] = Field(default_factory=list, max_length=MAX_PATHS)
    changes_summary: str = Field(
        min_length=1, max_length=MAX_SUMMARY_CHARS, json_schema_extra=NOT_BLANK_SCHEMA
    )  # check_summary enforces it


class SessionController(Controller):
    path = "/v1/sessions/{session:str}"
    guards = [authenticated]
    security = [{"bearer": []}, {"apiKey": []}]
    tags = ["sessions"]

    @post("/claims", status_code=HTTP_200_OK, summary="Claim files, all or none", responses=error_responses(403, 503))
    async def claim(
        self, session: SessionPath, data: ClaimIn, principal: Principal, container: Container
    ) -> ClaimFilesResult:
        identity = viewer(principal, session, data.agent)
        return await container.sessions.claim_files(
            principal, identity, data.file_paths, data.operation, data.duration_minutes
        )

    @post(
        "/release",
        status_code=HTTP_200_OK,
        summary="Release files this agent holds",
        responses=error_responses(403, 503),
    )
    async def release(
        self, session: SessionPath, data: ReleaseIn, principal: Principal, container: Container
    ) -> ReleaseFilesResult:
        return await container.sessions.release_files(
            principal, viewer(principal, session, data.agent), data.file_paths
        )

    @post(
        "/changes",
        status_code=HTTP_200_OK,
        summary="Broadcast a change to the session",
        responses=error_responses(403, 503),
    )
    async def broadcast(
        self, session: SessionPath, data: BroadcastIn, principal: Principal, container: Container
    ) -> ChangeOut:
        identity = viewer(principal, session, data.agent)
        return await container.sessions.broadcast_change(principal, identity, data.file_paths, data.changes_summary)

    @get("/changes", summary="The other agents' changes since a cursor", responses=error_responses(503))
    async def sync(
        self,
        session: SessionPath,
        agent: AgentParam,
        principal: Principal,
        container: Container,
        since: Annotated[
            str | None, Parameter(schema_extra=CURSOR_SCHEMA, description="The cursor a sync or a change returned")
        ] = None,
        minutes: Annotated[int, Parameter(ge=1, le=MAX_SYNC_MINUTES)] = 30,
        include_own: bool = False,
    ) -> SyncResult:
        identity = viewer(principal, session, agent)
        return await container.sessions.sync_changes(principal, identity, since, minutes, include_own)

    @get(
        "/status",
        summary="Agents, active claims and the latest changes",
        description="With `agent`, that agent reads (and is marked present); without, the caller reads without "
        "joining: a dashboard or a script does not become an agent of the session.",
        responses=error_responses(503),
    )
    async def status(
        self,
        session: SessionPath,
        principal: Principal,
        container: Container,
        agent: Annotated[str | None, name_parameter("agent", "The agent reading, if any")] = None,
    ) -> SessionStatus:
        return await container.sessions.status(principal, viewer(principal, session, agent))

    @get(
        "/events",
        opt={**STREAM, SSE_EVENTS_OPT: SSE_EVENTS},
        summary="Live claim, release and change events (Server-Sent Events)",
        description=(
            "Change events carry their cursor as the event id. Reconnecting with `Last-Event-ID` (or `since`) first "
            "replays the changes made after it, then goes on live: no change is missed or sent twice. If the feed was "
            "reset since that cursor (its store restarted without its data), a `reset` event comes first and the "
            "replay starts at the new feed's beginning. Claims and releases are live only; `GET .../status` gives "
            "the current claims."
        ),
        responses={
            **error_responses(503),
            HTTP_200_OK: ResponseSpec(
                str, media_type="text/event-stream", description="An endless stream of Server-Sent Events"
            ),
        },
    )
    async def events(
        self,
        session: SessionPath,
        principal: Principal,
        container: Container,
        agent: Annotated[str, name_parameter("agent", "Who is listening")] = "dashboard",
        since: Annotated[
            str | None, Parameter(schema_extra=CURSOR_SCHEMA, description="Replay the changes after this cursor first")
        ] = None,
        last_event_id: Annotated[
            str | None, Parameter(header="Last-Event-ID", required=False, schema_extra=CURSOR_SCHEMA)
        ] = None,
    ) -> ServerSentEvent:
        identity = viewer(principal, session, agent)
        # A key bound to an agent hears the messages that agent would (as its MCP stream does); an unbound key
        # speaks for the whole user, whose dashboard sees every message.
        listener = identity.agent if principal.bound else None
        return await event_stream(
            container.sessions.events(identity),
            session,
            resume_from=last_event_id or since,
            backlog=lambda cursor: container.sessions.missed_changes(identity, cursor),
            still_allowed=container.recheck(principal).holds,
            revocations=container.revocations.watch(principal.user_id),
            keep=(lambda event: visible_to(event, listener)) if listener is not None else None,
            slot=container.streams.hold(principal.user_id),
        )
