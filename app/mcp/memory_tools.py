"""The memory tools every client gets. Each calls one MemoryService method as the identity the URL names."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.mcp.caller import Caller
from app.mcp.tools import Args, Toolset
from app.memories.schemas import (
    MAX_TAGS,
    BatchResponse,
    EndUser,
    MemoryIn,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    Metadata,
    SearchIn,
    SearchResponse,
    Tag,
    Text,
    TopicsResponse,
)
from app.memories.scopes import Scope, Visibility

MAX_BATCH = 100
MAX_IDS = 100

memory_tools = Toolset()

_SCOPE = (
    "Who may read it: 'user' (you in every session and plain connection), 'session' (every agent of this "
    "session), 'agent' (only you, in this session), 'role' (every agent that joined with your role, in any "
    "session; join first with session_join). Default: 'session' in a session, otherwise 'user'; outside a "
    "session only 'user' is possible."
)
_VISIBILITY = "'private': only you can ever read it, whatever the scope (a scratchpad). Default 'public'."
_TAGS = "Short labels to filter by later, e.g. ['auth', 'decision']. At most 20, each 1-64 characters."
_END_USER = "The end user of the app this memory is about (an app that serves many people), e.g. 'alice@example.com'."
_METADATA = "Extra key/value facts (strings, numbers, booleans), e.g. {'file': 'src/app.py'}. Keys without '.'."


class NewMemory(Args):
    content: Text = Field(min_length=1, description="The fact to remember, self-contained, stored verbatim.")
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS, description=_TAGS)
    metadata: Metadata = Field(default_factory=dict, description=_METADATA)
    scope: Scope | None = Field(default=None, description=_SCOPE)
    visibility: Visibility = Field(default="public", description=_VISIBILITY)
    end_user: EndUser | None = Field(default=None, description=_END_USER)


class AddMemoriesArgs(Args):
    memories: list[NewMemory] = Field(
        min_length=1, max_length=MAX_BATCH, description="The memories to store, 1-100; all are stored or none."
    )


class SearchMemoryArgs(Args):
    query: str = Field(min_length=1, max_length=4000, description="What you are looking for, in plain words.")
    limit: int = Field(default=10, ge=1, le=100, description="At most this many results, best first.")
    tags: list[Tag] | None = Field(default=None, description="Only memories carrying all of these tags.")
    end_user: EndUser | None = Field(default=None, description="Only memories about this end user of the app.")
    threshold: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Minimum relevance from 0 to 1; by default 0.05, which drops unrelated memories; 0 keeps all.",
    )


class ListMemoriesArgs(Args):
    scope: Scope | None = Field(
        default=None, description="Only memories of this scope: 'user', 'session', 'agent' or 'role'."
    )
    tags: list[Tag] | None = Field(default=None, description="Only memories carrying all of these tags.")
    end_user: EndUser | None = Field(default=None, description="Only memories about this end user of the app.")
    limit: int = Field(default=50, ge=1, le=200, description="Page size, 1-200.")
    cursor: str | None = Field(default=None, description="The next_cursor of the previous page, to continue.")


class UpdateMemoryArgs(Args):
    memory_id: str = Field(min_length=1, max_length=128, description="The id of the memory to change.")
    content: Text | None = Field(default=None, min_length=1, description="The new text; omit to keep it.")
    tags: list[Tag] | None = Field(
        default=None, max_length=MAX_TAGS, description="The new tags, replacing the old ones; omit to keep them."
    )
    metadata: Metadata | None = Field(default=None, description="The new metadata, replacing the old; omit to keep it.")
    scope: Scope | None = Field(
        default=None,
        description="Widen who may read it: agent -> session, role or user; session or role -> user. Narrowing is "
        "refused.",
    )
    visibility: Visibility | None = Field(default=None, description="'public' shares a private memory.")


class DeleteMemoriesArgs(Args):
    memory_ids: list[str] = Field(
        min_length=1, max_length=MAX_IDS, description="Ids of the memories to delete, 1-100; all or none."
    )


class NoArgs(Args):
    pass


class DeletedMemories(BaseModel):
    deleted: list[str] = Field(description="The ids that were deleted.")


@memory_tools.tool()
async def add_memories(caller: Caller, args: AddMemoriesArgs) -> BatchResponse:
    """Store facts worth remembering beyond this conversation: decisions, conventions, user preferences, gotchas.

    Write each memory as one self-contained statement ("The API uses cursor pagination; never offsets").
    Returns the stored memories with their ids.
    """
    items = [
        MemoryIn(
            content=m.content,
            tags=m.tags,
            metadata=m.metadata,
            scope=m.scope,
            visibility=m.visibility,
            end_user=m.end_user,
        )
        for m in args.memories
    ]
    return BatchResponse(results=await caller.container.memories.add(caller.principal, caller.identity, items))


@memory_tools.tool(read_only=True)
async def search_memory(caller: Caller, args: SearchMemoryArgs) -> SearchResponse:
    """Find stored memories by meaning. Search before starting a task to reuse what is already known.

    Results come best first with a similarity score from 0 to 1.
    """
    request = SearchIn(
        query=args.query, limit=args.limit, tags=args.tags, threshold=args.threshold, end_user=args.end_user
    )
    return SearchResponse(results=await caller.container.memories.search(caller.principal, caller.identity, request))


@memory_tools.tool(read_only=True)
async def list_memories(caller: Caller, args: ListMemoriesArgs) -> MemoryPage:
    """List the memories you can read, newest first, one page at a time (pass next_cursor to continue)."""
    return await caller.container.memories.list(
        caller.principal,
        caller.identity,
        scope=args.scope,
        tags=args.tags or (),
        limit=args.limit,
        cursor=args.cursor,
        end_user=args.end_user,
    )


@memory_tools.tool()
async def update_memory(caller: Caller, args: UpdateMemoryArgs) -> MemoryOut:
    """Correct or refine one memory: give its id and whichever of content, tags or metadata should change.
    It can also widen who may read it (scope, or visibility 'public'); the history records the promotion."""
    patch = MemoryPatch(
        content=args.content, tags=args.tags, metadata=args.metadata, scope=args.scope, visibility=args.visibility
    )
    return await caller.container.memories.update(caller.principal, caller.identity, args.memory_id, patch)


@memory_tools.tool(destructive=True)
async def delete_memories(caller: Caller, args: DeleteMemoriesArgs) -> DeletedMemories:
    """Delete memories that are wrong or obsolete, by id. If any id is unknown, nothing is deleted."""
    deleted = await caller.container.memories.delete(caller.principal, caller.identity, args.memory_ids)
    return DeletedMemories(deleted=deleted)


@memory_tools.tool(read_only=True)
async def list_topics(caller: Caller, args: NoArgs) -> TopicsResponse:
    """The tags on the memories you can read, with how many memories carry each, most used first.

    Use it to see what is known before searching, or to pick consistent tags when adding.
    """
    return TopicsResponse(topics=await caller.container.memories.topics(caller.principal, caller.identity))
