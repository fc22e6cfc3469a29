"""What the team operations take and return, for REST callers and MCP agents alike.

Field constraints live here once: the MCP tools and the REST bodies are built from these models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, computed_field, model_validator

from app.column_limits import MAX_INT64
from app.coordination.rules import MAX_PATH_CHARS, MAX_PATHS, PATH_SCHEMA
from app.json_body import JsonIn
from app.text import NO_NUL_SCHEMA, NOT_BLANK_SCHEMA, pydantic_text

MAX_CAPABILITIES = 20
MAX_MESSAGE_CHARS = 16_000
MAX_ATTACHMENTS = 20
MAX_ATTACHMENT_CHARS = 100_000
MAX_TASKS_PER_CALL = 500
MAX_TASKS_PER_SESSION = 5_000
MAX_DEPS = 100
MAX_DESCRIPTION_CHARS = 4_000
MAX_RESULT_CHARS = 16_000
MAX_INBOX_PAGE = 200
# Message ids are 64-bit integers (session_messages.id): a larger one names no message and cannot be bound.
MAX_MESSAGE_ID = MAX_INT64

MessageKind = Literal["question", "answer", "status", "task", "contract", "diff"]
MESSAGE_KINDS: tuple[str, ...] = ("question", "answer", "status", "task", "contract", "diff")
TaskStatus = Literal["blocked", "available", "in_progress", "completed"]
TASK_STATUSES: tuple[str, ...] = ("blocked", "available", "in_progress", "completed")
AgentState = Literal["active", "idle"]

# Names of roles follow the rule of session and agent names, so that "role:NAME" and memory keys stay unambiguous.
RoleName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
TaskId = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$")]
# Every stored text goes through the one rule of app.text (the services check it again).
Text = Annotated[str, AfterValidator(pydantic_text), Field(json_schema_extra=NO_NUL_SCHEMA)]
Label = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=64),
    AfterValidator(pydantic_text),
    Field(json_schema_extra=NOT_BLANK_SCHEMA),
]
FilePath = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH_CHARS), PATH_SCHEMA]
Recipient = Annotated[str, StringConstraints(min_length=1, max_length=70)]


class _In(JsonIn):
    """A request body."""


class JoinIn(_In):
    role: RoleName = Field(description="What you do in this team, e.g. 'backend', 'architect', 'tester'.")
    capabilities: list[Label] = Field(
        default_factory=list, max_length=MAX_CAPABILITIES, description="What you are good at, e.g. ['python', 'sql']."
    )
    client: Label | None = Field(default=None, description="The client you run in, e.g. 'cursor' or 'claude-code'.")


class AttachmentIn(_In):
    # Exactly one of diff and content, as the schema says it.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": [given], "properties": {given: {"type": "string"}, left: {"type": "null"}}}
                for given, left in (("diff", "content"), ("content", "diff"))
            ]
        }
    )

    file: FilePath = Field(description="The file the attachment is about, relative to the repository root.")
    diff: Text | None = Field(default=None, max_length=MAX_ATTACHMENT_CHARS, description="A unified diff of the file.")
    content: Text | None = Field(default=None, max_length=MAX_ATTACHMENT_CHARS, description="The file's content.")

    @model_validator(mode="after")
    def _one_body(self) -> AttachmentIn:
        if (self.diff is None) == (self.content is None):
            raise ValueError("an attachment is {file, diff} or {file, content}: give exactly one of diff and content")
        return self


class MessageIn(_In):
    to: Recipient = Field(description="An agent's name, 'role:NAME' for every agent of a role, or '*' for everyone.")
    kind: MessageKind = Field(description="question, answer, status, task, contract or diff.")
    content: Text = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="The message itself.")
    attachments: list[AttachmentIn] = Field(default_factory=list, max_length=MAX_ATTACHMENTS)
    reply_to: int | None = Field(
        default=None, ge=1, le=MAX_MESSAGE_ID, description="The id of the message this one answers."
    )


class TaskIn(_In):
    id: TaskId = Field(description="A short id unique in the session, e.g. 'api-schema' (letters, digits, . _ : -).")
    description: Text = Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS, description="What is to be done.")
    deps: list[TaskId] = Field(
        default_factory=list, max_length=MAX_DEPS, description="Ids of the tasks that must be completed first."
    )
    files: list[FilePath] = Field(default_factory=list, max_length=MAX_PATHS, description="The files it touches.")


class TasksIn(_In):
    tasks: list[TaskIn] = Field(min_length=1, max_length=MAX_TASKS_PER_CALL)


class CompleteIn(_In):
    result: Text = Field(min_length=1, max_length=MAX_RESULT_CHARS, description="What was done, for the others.")
    files_modified: list[FilePath] = Field(default_factory=list, max_length=MAX_PATHS)


class AgentOut(BaseModel):
    """An agent of the session: what it said it is (session_join), whether it is active, what it holds."""

    agent: str
    last_seen: datetime
    role: str | None = None
    capabilities: list[str] = Field(default_factory=list)
    client: str | None = None
    joined: bool = Field(default=False, description="In the registry (session_join), until session_leave.")
    status: AgentState = Field(default="active", description="active, or idle after 5 minutes without a call.")
    files: list[str] = Field(default_factory=list, description="The files it has claimed.")
    task: str | None = Field(default=None, description="The task it is working on (the earliest it claimed).")
    tasks: list[str] = Field(default_factory=list, description="Every task it has in progress.")

    @computed_field(description="The same as status.")  # type: ignore[prop-decorator]
    @property
    def state(self) -> AgentState:
        return self.status


class AgentsOut(BaseModel):
    session: str
    agents: list[AgentOut]


class LeaveOut(BaseModel):
    agent: str
    released_files: list[str]
    released_tasks: list[str]


class AttachmentOut(BaseModel):
    file: str
    diff: str | None = None
    content: str | None = None


class MessageOut(BaseModel):
    id: int
    __annotations__["from"] = str
    to: str
    kind: MessageKind
    content: str
    attachments: list[AttachmentOut]
    reply_to: int | None
    time: datetime
    read: bool = Field(default=False, description="Whether you had read it before this call.")

    def sender(self) -> str:
        return str(getattr(self, "from"))


class InboxOut(BaseModel):
    messages: list[MessageOut] = Field(description="Addressed to you, your role or everyone; oldest first.")
    more: bool = Field(description="More messages match than `limit` let through; call again for the rest.")


class MessageLog(BaseModel):
    messages: list[MessageOut]
    next_after: int | None = Field(description="Pass as `after` for the next page; null when there is none.")


class TaskOut(BaseModel):
    id: str
    description: str
    deps: list[str]
    files: list[str]
    status: TaskStatus
    blocked_by: list[str] = Field(default_factory=list, description="The dependencies not completed yet.")
    assignee: str | None = None
    result: str | None = None
    files_modified: list[str] = Field(default_factory=list)
    created_by: str
    created_at: datetime
    claimed_at: datetime | None = None
    completed_at: datetime | None = None


class TaskList(BaseModel):
    tasks: list[TaskOut]


class TaskCompleted(BaseModel):
    task: TaskOut
    unblocked: list[str] = Field(description="The tasks this completion made available.")
