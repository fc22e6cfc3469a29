"""Coordination tools, listed only when the URL names a session agent. Each calls one SessionService method."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from app.coordination.rules import MAX_PATH_CHARS, MAX_PATHS, MAX_SUMMARY_CHARS, PATH_SCHEMA
from app.mcp.caller import Caller
from app.mcp.tools import Args, Toolset
from app.sessions.schemas import ChangeOut, ClaimFilesResult, ReleaseFilesResult, SessionStatus, SyncResult
from app.sessions.service import MAX_CLAIM_MINUTES, MAX_SYNC_MINUTES

session_tools = Toolset()

FilePath = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH_CHARS), PATH_SCHEMA]
_PATHS = "Paths relative to the repository root, e.g. ['src/app.py']; 1-100 of them."


class ClaimArgs(Args):
    file_paths: list[FilePath] = Field(min_length=1, max_length=MAX_PATHS, description=_PATHS)
    operation: str = Field(
        default="write",
        min_length=1,
        max_length=32,
        description="What you are about to do, shown to the others ('write', 'refactor', ...). Every claim is "
        "exclusive whatever the label.",
    )
    duration_minutes: int = Field(
        default=30, ge=1, le=MAX_CLAIM_MINUTES, description="How long the claim holds unless renewed or released."
    )


class ReleaseArgs(Args):
    file_paths: list[FilePath] = Field(min_length=1, max_length=MAX_PATHS, description=_PATHS)


class BroadcastArgs(Args):
    file_paths: list[FilePath] = Field(
        default_factory=list, max_length=MAX_PATHS, description="The files the change touched (may be empty)."
    )
    changes_summary: str = Field(
        min_length=1,
        max_length=MAX_SUMMARY_CHARS,
        description="What changed and what the others must know, e.g. 'renamed parse() to parse_html()'.",
    )


class SyncArgs(Args):
    since: str | None = Field(
        default=None, max_length=128, description="The cursor a previous sync returned; only newer changes come back."
    )
    minutes: int = Field(
        default=30, ge=1, le=MAX_SYNC_MINUTES, description="Without `since`: how far back to look, in minutes."
    )
    include_own: bool = Field(default=False, description="Also return the changes you broadcast yourself.")


class StatusArgs(Args):
    pass


@session_tools.tool(read_only=True)
async def session_status(caller: Caller, args: StatusArgs) -> SessionStatus:
    """Who is working in this session and when each agent was last seen, which files are claimed by whom
    until when, and the latest changes. Call it when you start, to see what the others are doing."""
    return await caller.container.sessions.status(caller.principal, caller.identity)


@session_tools.tool()
async def session_claim_files(caller: Caller, args: ClaimArgs) -> ClaimFilesResult:
    """Claim files before editing them, so no other agent of this session edits them at the same time.

    All or nothing: if any file is held by another agent, nothing is claimed and `conflicts` names each file,
    its holder and when the claim expires; wait, or work on something else. Claiming files you already hold
    extends the claim. Each granted claim carries a fencing token that grows with every grant of that file.
    Release the files when you are done.
    """
    return await caller.container.sessions.claim_files(
        caller.principal, caller.identity, args.file_paths, args.operation, args.duration_minutes
    )


@session_tools.tool()
async def session_release_files(caller: Caller, args: ReleaseArgs) -> ReleaseFilesResult:
    """Release files you claimed, once your edits are done. Only the holder can release a claim;
    `not_released` lists the other files, each with its reason: `not_held` (nobody held it) or
    `held_by_another_agent` (with the holder, and when their claim expires)."""
    return await caller.container.sessions.release_files(caller.principal, caller.identity, args.file_paths)


@session_tools.tool()
async def session_broadcast_change(caller: Caller, args: BroadcastArgs) -> ChangeOut:
    """Tell the other agents of this session what you changed, right after changing it: renamed functions,
    changed interfaces, new files, decisions. They receive it live and through session_sync_changes."""
    return await caller.container.sessions.broadcast_change(
        caller.principal, caller.identity, args.file_paths, args.changes_summary
    )


@session_tools.tool(read_only=True)
async def session_sync_changes(caller: Caller, args: SyncArgs) -> SyncResult:
    """The changes the other agents broadcast, oldest first. Pass the returned `cursor` as `since` next time
    to get exactly the newer ones, none skipped or repeated. Sync before editing shared code."""
    return await caller.container.sessions.sync_changes(
        caller.principal, caller.identity, args.since, args.minutes, args.include_own
    )
