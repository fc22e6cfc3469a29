"""What the coordination operations return, to REST callers and MCP agents alike."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.coordination import Change, Claim, ClaimConflict
from app.teams.schemas import AgentOut


class ClaimOut(BaseModel):
    file_path: str
    agent: str
    operation: str
    fencing_token: int
    expires_at: datetime

    @classmethod
    def of(cls, claim: Claim) -> ClaimOut:
        return cls(
            file_path=claim.path,
            agent=claim.agent,
            operation=claim.operation,
            fencing_token=claim.fencing_token,
            expires_at=claim.expires_at,
        )


class ConflictOut(BaseModel):
    file_path: str
    holder: str
    operation: str
    expires_at: datetime

    @classmethod
    def of(cls, conflict: ClaimConflict) -> ConflictOut:
        return cls(
            file_path=conflict.path,
            holder=conflict.holder,
            operation=conflict.operation,
            expires_at=conflict.expires_at,
        )


class ClaimFilesResult(BaseModel):
    granted: bool = Field(description="True when every file was claimed; false when none was (all or nothing).")
    claims: list[ClaimOut]
    conflicts: list[ConflictOut]


class NotReleasedOut(BaseModel):
    """A file that was not released: nobody held it, or another agent does (then who, how and until when)."""

    file_path: str
    reason: Literal["not_held", "held_by_another_agent"]
    holder: str | None = None
    operation: str | None = None
    expires_at: datetime | None = None

    @classmethod
    def of(cls, item: ClaimConflict | str) -> NotReleasedOut:
        if isinstance(item, str):
            return cls(file_path=item, reason="not_held")
        return cls(
            file_path=item.path,
            reason="held_by_another_agent",
            holder=item.holder,
            operation=item.operation,
            expires_at=item.expires_at,
        )


class ReleaseFilesResult(BaseModel):
    released: list[str]
    not_released: list[NotReleasedOut]


class ChangeOut(BaseModel):
    cursor: str
    agent: str
    file_paths: list[str]
    changes_summary: str
    at: datetime

    @classmethod
    def of(cls, change: Change) -> ChangeOut:
        return cls(
            cursor=change.cursor,
            agent=change.agent,
            file_paths=change.file_paths,
            changes_summary=change.summary,
            at=change.at,
        )


class SyncResult(BaseModel):
    changes: list[ChangeOut]
    cursor: str = Field(description="Pass as `since` next time to get only newer changes.")
    reset: bool = Field(
        default=False,
        description="True when the change feed was reset since `since` was issued (its store restarted without its "
        "data): changes made before the reset may be lost; `changes` starts at the new feed's beginning.",
    )


class SessionStatus(BaseModel):
    session: str
    you: str | None = Field(description="The agent asking; null when read without one (a dashboard or a script).")
    agents: list[AgentOut]
    claims: list[ClaimOut]
    recent_changes: list[ChangeOut]


# --- the event stream (GET .../events): each event's name and the JSON in its data line --------------------------


class ReadyEvent(BaseModel):
    session: str = Field(description="The session the stream follows; sent first, once subscribed.")


class ResetEvent(BaseModel):
    message: str
    cursor: str = Field(description="Where the new feed begins; its changes follow.")


class RevokedEvent(BaseModel):
    message: str = Field(description="Why the stream ends: its credential was revoked or has expired.")


class SessionEvent(BaseModel):
    kind: Literal["claim", "release", "change", "agent", "message", "task"]
    agent: str | None = Field(description="The agent it is about.")
    at: datetime
    data: dict[str, Any] = Field(
        description="What happened: the claim, the change (with its cursor, also the SSE id), the agent, message or "
        "task as the matching REST endpoint shows it."
    )


SSE_EVENTS: dict[str, type[BaseModel]] = {
    "ready": ReadyEvent,
    "reset": ResetEvent,
    "revoked": RevokedEvent,
    **dict.fromkeys(("claim", "release", "change", "agent", "message", "task"), SessionEvent),
}
