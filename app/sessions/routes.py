"""REST ``/v1/sessions/{session}/...``: the coordination operations for scripts and dashboards, plus an SSE stream."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get, post
from litestar.params import Parameter
from litestar.response import ServerSentEvent
from litestar.status_codes import HTTP_200_OK
from pydantic import BaseModel, ConfigDict, Field

from app.accounts.principal import Principal
from app.container import Container, authenticated
from app.memories.scopes import viewer
from app.sessions.schemas import ChangeOut, ClaimFilesResult, ReleaseFilesResult, SessionStatus, SyncResult
from app.sessions.sse import event_stream

KEEPALIVE_SECONDS = 15
AgentParam = Annotated[str, Parameter(description="The agent acting in the session")]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClaimIn(_In):
    agent: str
    file_paths: list[str] = Field(min_length=1)
    operation: str = "write"
    duration_minutes: int = 30


class ReleaseIn(_In):
    agent: str
    file_paths: list[str] = Field(min_length=1)


class BroadcastIn(_In):
    agent: str
    file_paths: list[str] = Field(default_factory=list)
    changes_summary: str = Field(min_length=1)


class SessionController(Controller):
    path = "/v1/sessions/{session:str}"
    guards = [authenticated]
    security = [{"bearer": []}, {"apiKey": []}]
    tags = ["sessions"]

    @post("/claims", status_code=HTTP_200_OK, summary="Claim files, all or none")
    async def claim(self, session: str, data: ClaimIn, principal: Principal, container: Container) -> ClaimFilesResult:
        identity = viewer(principal.user_id, session, data.agent)
        return await container.sessions.claim_files(
            principal, identity, data.file_paths, data.operation, data.duration_minutes
        )

    @post("/release", status_code=HTTP_200_OK, summary="Release files this agent holds")
    async def release(
        self, session: str, data: ReleaseIn, principal: Principal, container: Container
    ) -> ReleaseFilesResult:
        return await container.sessions.release_files(
            principal, viewer(principal.user_id, session, data.agent), data.file_paths
        )

    @post("/changes", status_code=HTTP_200_OK, summary="Broadcast a change to the session")
    async def broadcast(self, session: str, data: BroadcastIn, principal: Principal, container: Container) -> ChangeOut:
        identity = viewer(principal.user_id, session, data.agent)
        return await container.sessions.broadcast_change(principal, identity, data.file_paths, data.changes_summary)

    @get("/changes", summary="The other agents' changes since a cursor")
    async def sync(
        self,
        session: str,
        agent: AgentParam,
        principal: Principal,
        container: Container,
        since: str | None = None,
        minutes: int = 30,
        include_own: bool = False,
    ) -> SyncResult:
        identity = viewer(principal.user_id, session, agent)
        return await container.sessions.sync_changes(principal, identity, since, minutes, include_own)

    @get("/status", summary="Agents, active claims and the latest changes")
    async def status(
        self, session: str, agent: AgentParam, principal: Principal, container: Container
    ) -> SessionStatus:
        return await container.sessions.status(principal, viewer(principal.user_id, session, agent))

    @get(
        "/events",
        summary="Live claim, release and change events (Server-Sent Events)",
        description=(
            "Change events carry their cursor as the event id. Reconnecting with `Last-Event-ID` (or `since`) first "
            "replays the changes made after it, then goes on live: no change is missed or sent twice. Claims and "
            "releases are live only; `GET .../status` gives the current claims."
        ),
    )
    async def events(
        self,
        session: str,
        principal: Principal,
        container: Container,
        agent: str = "dashboard",
        since: Annotated[str | None, Parameter(description="Replay the changes after this cursor first")] = None,
        last_event_id: Annotated[str | None, Parameter(header="Last-Event-ID", required=False)] = None,
    ) -> ServerSentEvent:
        identity = viewer(principal.user_id, session, agent)
        return await event_stream(
            container.sessions.events(identity),
            session,
            resume_from=last_event_id or since,
            backlog=lambda cursor: container.sessions.missed_changes(identity, cursor),
            still_allowed=container.recheck(principal).holds,
        )
