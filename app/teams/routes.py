"""REST ``/v1/sessions/{session}/...`` for teams: agents, messages, the inbox and tasks, acting as ``?agent=``.

Reading the agents, the message log and the tasks needs no agent and does not make the reader one.
"""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get, post
from litestar.params import Parameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from app.accounts.principal import Principal
from app.container import Container, authenticated
from app.memories.scopes import viewer
from app.openapi import error_responses, name_parameter
from app.teams.schemas import (
    MAX_INBOX_PAGE,
    MAX_MESSAGE_ID,
    AgentOut,
    AgentsOut,
    CompleteIn,
    InboxOut,
    JoinIn,
    LeaveOut,
    MessageIn,
    MessageLog,
    MessageOut,
    TaskCompleted,
    TaskList,
    TaskOut,
    TasksIn,
    TaskStatus,
)

Agent = Annotated[str, name_parameter("agent", "The agent acting in the session")]
Session = Annotated[str, name_parameter("session")]


class TeamController(Controller):
    path = "/v1/sessions/{session:str}"
    guards = [authenticated]
    security = [{"bearer": []}, {"apiKey": []}]
    tags = ["teams"]

    @get(
        "/agents",
        summary="The session's agents: role, capabilities, client, active or idle, files and task",
        responses=error_responses(503),
    )
    async def agents(self, session: Session, principal: Principal, container: Container) -> AgentsOut:
        return await container.teams.agents.agents(principal, viewer(principal, session, None))

    @post(
        "/agents",
        status_code=HTTP_200_OK,
        summary="Join the session as ?agent= with a role",
        responses=error_responses(403, 409, 503),
    )
    async def join(
        self, session: Session, agent: Agent, data: JoinIn, principal: Principal, container: Container
    ) -> AgentOut:
        return await container.teams.agents.join(principal, viewer(principal, session, agent), data)

    @delete(
        "/agents",
        status_code=HTTP_200_OK,
        summary="Leave: release the agent's files and unfinished tasks",
        responses=error_responses(403, 404, 503),
    )
    async def leave(self, session: Session, agent: Agent, principal: Principal, container: Container) -> LeaveOut:
        return await container.teams.agents.leave(principal, viewer(principal, session, agent))

    @post(
        "/messages",
        status_code=HTTP_201_CREATED,
        summary="Send a message to an agent, a role:NAME or '*'",
        responses=error_responses(403, 404, 503),
    )
    async def send(
        self, session: Session, agent: Agent, data: MessageIn, principal: Principal, container: Container
    ) -> MessageOut:
        return await container.teams.messages.send(principal, viewer(principal, session, agent), data)

    @get("/messages", summary="Every message of the session, oldest first (the log)", responses=error_responses(503))
    async def log(
        self,
        session: Session,
        principal: Principal,
        container: Container,
        after: Annotated[
            int | None, Parameter(ge=0, le=MAX_MESSAGE_ID, description="Only messages after this id")
        ] = None,
        limit: Annotated[int, Parameter(ge=1, le=500)] = 100,
    ) -> MessageLog:
        identity = viewer(principal, session, None)
        return await container.teams.messages.log(principal, identity, after=after, limit=limit)

    @get(
        "/inbox", summary="The messages to ?agent=, its role or everyone, oldest first", responses=error_responses(503)
    )
    async def inbox(
        self,
        session: Session,
        agent: Agent,
        principal: Principal,
        container: Container,
        unread_only: bool = True,
        mark_read: bool = True,
        limit: Annotated[int, Parameter(ge=1, le=MAX_INBOX_PAGE)] = 50,
    ) -> InboxOut:
        return await container.teams.messages.inbox(
            principal,
            viewer(principal, session, agent),
            unread_only=unread_only,
            mark_read=mark_read,
            limit=limit,
        )

    @get(
        "/tasks",
        summary="Every task with its status: blocked, available, in_progress or completed",
        responses=error_responses(503),
    )
    async def tasks(
        self, session: Session, principal: Principal, container: Container, status: TaskStatus | None = None
    ) -> TaskList:
        return await container.teams.tasks.list(principal, viewer(principal, session, None), status)

    @post(
        "/tasks",
        status_code=HTTP_201_CREATED,
        summary="Create tasks, all or none",
        responses=error_responses(403, 409, 503),
    )
    async def create_tasks(
        self, session: Session, agent: Agent, data: TasksIn, principal: Principal, container: Container
    ) -> TaskList:
        return await container.teams.tasks.create(principal, viewer(principal, session, agent), data.tasks)

    @post(
        "/tasks/{task_id:str}/claim",
        status_code=HTTP_200_OK,
        summary="Claim an available task",
        responses=error_responses(403, 404, 409, 503),
    )
    async def claim(
        self, session: Session, task_id: str, agent: Agent, principal: Principal, container: Container
    ) -> TaskOut:
        return await container.teams.tasks.claim(principal, viewer(principal, session, agent), task_id)

    @post(
        "/tasks/{task_id:str}/complete",
        status_code=HTTP_200_OK,
        summary="Complete a task you are working on",
        responses=error_responses(403, 404, 409, 503),
    )
    async def complete(
        self, session: Session, task_id: str, agent: Agent, data: CompleteIn, principal: Principal, container: Container
    ) -> TaskCompleted:
        identity = viewer(principal, session, agent)
        return await container.teams.tasks.complete(principal, identity, task_id, data)

    @post(
        "/tasks/{task_id:str}/release",
        status_code=HTTP_200_OK,
        summary="Give back a task you are working on",
        responses=error_responses(403, 404, 409, 503),
    )
    async def release(
        self, session: Session, task_id: str, agent: Agent, principal: Principal, container: Container
    ) -> TaskOut:
        return await container.teams.tasks.release(principal, viewer(principal, session, agent), task_id)
