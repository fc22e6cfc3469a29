"""Team tools (registry, messages, tasks), listed and callable only in session mode, beside the coordination tools.

Each calls one service method of ``app.teams``; their arguments are the shared models of ``app.teams.schemas``.
"""

from __future__ import annotations

from pydantic import Field

from app.mcp.caller import Caller
from app.mcp.session_tools import session_tools
from app.mcp.tools import Args
from app.teams.schemas import (
    MAX_ATTACHMENTS,
    MAX_INBOX_PAGE,
    MAX_MESSAGE_CHARS,
    MAX_MESSAGE_ID,
    MAX_PATHS,
    MAX_RESULT_CHARS,
    MAX_TASKS_PER_CALL,
    AgentOut,
    AttachmentIn,
    CompleteIn,
    FilePath,
    InboxOut,
    JoinIn,
    LeaveOut,
    MessageIn,
    MessageKind,
    MessageOut,
    Recipient,
    TaskCompleted,
    TaskId,
    TaskIn,
    TaskList,
    TaskOut,
    TaskStatus,
    Text,
)


class JoinArgs(Args, JoinIn):
    pass


class NoArgs(Args):
    pass


class SendArgs(Args):
    to: Recipient = Field(
        description="Who gets it: an agent's name (e.g. 'coder'), 'role:NAME' for every agent with that role "
        "(e.g. 'role:backend'), or '*' for everyone in the session."
    )
    kind: MessageKind = Field(description="question, answer, status, task, contract or diff.")
    content: Text = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="The message itself.")
    attachments: list[AttachmentIn] = Field(
        default_factory=list,
        max_length=MAX_ATTACHMENTS,
        description="Files that go with it, each {file, diff} or {file, content}.",
    )
    reply_to: int | None = Field(
        default=None, ge=1, le=MAX_MESSAGE_ID, description="The id of the message you are answering."
    )


class InboxArgs(Args):
    unread_only: bool = Field(default=True, description="Only messages you have not read yet.")
    mark_read: bool = Field(default=True, description="Mark the returned messages as read.")
    limit: int = Field(default=50, ge=1, le=MAX_INBOX_PAGE, description="At most this many, oldest first.")


class TaskCreateArgs(Args):
    tasks: list[TaskIn] = Field(
        min_length=1,
        max_length=MAX_TASKS_PER_CALL,
        description="The tasks, each {id, description, deps=[], files=[]}; deps name tasks of this call or "
        "existing ones. All are created or none.",
    )


class TaskIdArgs(Args):
    task_id: TaskId = Field(description="The id of the task.")


class TaskCompleteArgs(Args):
    task_id: TaskId = Field(description="The id of the task you finished.")
    result: Text = Field(min_length=1, max_length=MAX_RESULT_CHARS, description="What you did, for the others.")
    files_modified: list[FilePath] = Field(
        default_factory=list, max_length=MAX_PATHS, description="The files you changed."
    )


class TaskListArgs(Args):
    status: TaskStatus | None = Field(
        default=None, description="Only tasks with this status: blocked, available, in_progress or completed."
    )


@session_tools.tool()
async def session_join(caller: Caller, args: JoinArgs) -> AgentOut:
    """Tell the team who you are: your role (e.g. 'backend'), your capabilities (e.g. ['python', 'sql']) and the
    client you run in. The others see it in session_status, can message your role ('role:backend'), and you can
    read and write memories of scope 'role', which follow that role from session to session."""
    request = JoinIn(role=args.role, capabilities=args.capabilities, client=args.client)
    return await caller.container.teams.agents.join(caller.principal, caller.identity, request)


@session_tools.tool(destructive=True)
async def session_leave(caller: Caller, args: NoArgs) -> LeaveOut:
    """Leave the team when you are done: you leave the registry, and your claimed files and your unfinished
    tasks are given back so that others can take them."""
    return await caller.container.teams.agents.leave(caller.principal, caller.identity)


@session_tools.tool()
async def session_send_message(caller: Caller, args: SendArgs) -> MessageOut:
    """Send a message to another agent, to every agent of a role ('role:backend') or to everyone ('*'): ask a
    question, answer one (reply_to), report status, hand over a task, agree on a contract or share a diff.
    Connected agents get it at once; the others find it in session_inbox."""
    request = MessageIn(
        to=args.to, kind=args.kind, content=args.content, attachments=args.attachments, reply_to=args.reply_to
    )
    return await caller.container.teams.messages.send(caller.principal, caller.identity, request)


@session_tools.tool()
async def session_inbox(caller: Caller, args: InboxArgs) -> InboxOut:
    """The messages sent to you, to your role or to everyone, oldest first, each with id, from, kind, content,
    attachments, reply_to and time. By default only unread ones, which it then marks read. Check it when you
    start and between tasks."""
    return await caller.container.teams.messages.inbox(
        caller.principal, caller.identity, unread_only=args.unread_only, mark_read=args.mark_read, limit=args.limit
    )


@session_tools.tool()
async def session_task_create(caller: Caller, args: TaskCreateArgs) -> TaskList:
    """Split work into tasks that others can take: each {id, description, deps, files}. A task becomes
    available once every task in its deps is completed. All tasks are created or none: a duplicate id, a
    dependency that does not exist, or a cycle is refused, saying what is wrong."""
    return await caller.container.teams.tasks.create(caller.principal, caller.identity, args.tasks)


@session_tools.tool()
async def session_task_claim(caller: Caller, args: TaskIdArgs) -> TaskOut:
    """Take an available task (every dependency completed, nobody working on it). Exactly one agent gets it;
    a task that is taken, completed or still blocked is refused, naming who has it or what it waits for."""
    return await caller.container.teams.tasks.claim(caller.principal, caller.identity, args.task_id)


@session_tools.tool()
async def session_task_complete(caller: Caller, args: TaskCompleteArgs) -> TaskCompleted:
    """Mark your task completed with its result and the files you changed. The tasks it unblocks become
    available (listed in `unblocked`) and the session's agents are told at once."""
    request = CompleteIn(result=args.result, files_modified=args.files_modified)
    return await caller.container.teams.tasks.complete(caller.principal, caller.identity, args.task_id, request)


@session_tools.tool()
async def session_task_release(caller: Caller, args: TaskIdArgs) -> TaskOut:
    """Give back a task you claimed but will not finish, so that another agent can take it."""
    return await caller.container.teams.tasks.release(caller.principal, caller.identity, args.task_id)


@session_tools.tool(read_only=True)
async def session_task_list(caller: Caller, args: TaskListArgs) -> TaskList:
    """Every task of the session with its status: blocked (with blocked_by), available, in_progress (with
    assignee) or completed (with result and files_modified). Pass status to see only those, e.g. 'available'."""
    return await caller.container.teams.tasks.list(caller.principal, caller.identity, args.status)
