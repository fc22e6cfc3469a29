"""Teams of agents in a session: the registry (roles, presence), messages with an inbox, and a task graph."""

from __future__ import annotations

from dataclasses import dataclass

from app.coordination import Coordination
from app.db import Database
from app.teams.messages import MessageService
from app.teams.service import TeamService
from app.teams.tasks import TaskService

__all__ = ["MessageService", "TaskService", "TeamService", "Teams"]


@dataclass(frozen=True, slots=True)
class Teams:
    """The three team services, built once and sharing the registry."""

    agents: TeamService
    messages: MessageService
    tasks: TaskService

    @classmethod
    def build(cls, db: Database, coordination: Coordination) -> Teams:
        agents = TeamService(db, coordination)
        return cls(agents, MessageService(db, coordination, agents), TaskService(db, coordination, agents))
