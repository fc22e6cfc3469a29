"""The live events both backends publish, and their JSON form on the wire."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from app.coordination.models import Change, Claim, Event


def claim_event(agent: str, granted: list[Claim], at: datetime) -> Event:
    """Files granted to ``agent``."""
    first = granted[0]
    data: dict[str, Any] = {
        "paths": [c.path for c in granted],
        "operation": first.operation,
        "expires_at": first.expires_at.isoformat(),
        "fencing_tokens": {c.path: c.fencing_token for c in granted},
    }
    return Event(kind="claim", agent=agent, data=data, at=at)


def release_event(agent: str, released: list[str], at: datetime) -> Event:
    """Files ``agent`` let go of."""
    return Event(kind="release", agent=agent, data={"paths": released}, at=at)


def change_event(change: Change) -> Event:
    """A change announced on the feed."""
    data: dict[str, Any] = {"cursor": change.cursor, "paths": change.file_paths, "summary": change.summary}
    return Event(kind="change", agent=change.agent, data=data, at=change.at)


def encode_event(event: Event) -> str:
    """The JSON text published for ``event``."""
    return json.dumps({"kind": event.kind, "agent": event.agent, "data": event.data, "at": event.at.isoformat()})


def decode_event(text: str | bytes) -> Event:
    """The event ``encode_event`` wrote."""
    raw = json.loads(text)
    return Event(kind=raw["kind"], agent=raw["agent"], data=raw["data"], at=datetime.fromisoformat(raw["at"]))
