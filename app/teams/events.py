"""The live events of a team (agents joining and leaving, messages, tasks), published through coordination.

The database holds the record; these events only tell connected agents and dashboards at once. A message event
names its recipients as resolved when it was sent (``"*"`` for everyone), so that a stream pushes it only to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.coordination import Event
from app.teams.schemas import MessageOut

EVERYONE = "*"
ROLE_PREFIX = "role:"


def agent_event(agent: str, action: str, role: str | None, at: datetime) -> Event:
    """``agent`` joined or left the registry."""
    return Event(kind="agent", agent=agent, data={"action": action, "role": role}, at=at)


def message_event(message: MessageOut, recipients: Sequence[str] | str) -> Event:
    """A message sent; ``recipients`` are the agent names it is pushed to, or ``"*"``."""
    data: dict[str, Any] = message.model_dump(mode="json", exclude={"read"})
    data["recipients"] = recipients if isinstance(recipients, str) else list(recipients)
    return Event(kind="message", agent=message.sender(), data=data, at=message.time)


def task_event(agent: str, action: str, task_ids: Sequence[str], at: datetime, **extra: Any) -> Event:
    """Tasks created, claimed, completed (with the ids it ``unblocked``) or released by ``agent``."""
    return Event(kind="task", agent=agent, data={"action": action, "tasks": list(task_ids), **extra}, at=at)


def visible_to(event: Event, agent: str | None) -> bool:
    """Whether a stream of ``agent`` (None: the owner's dashboard) should carry ``event``: a message goes to its
    recipients only; everything else goes to everyone."""
    if event.kind != "message" or agent is None:
        return True
    recipients = event.data.get("recipients")
    if event.agent == agent:
        return False
    return recipients == EVERYONE or (isinstance(recipients, list) and agent in recipients)
