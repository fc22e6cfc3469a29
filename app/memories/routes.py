"""REST ``/v1`` for memories: thin handlers over MemoryService."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Response, delete, get, patch, post
from litestar.openapi import ResponseSpec
from litestar.params import Parameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED
from pydantic import BaseModel, ValidationError

from app.accounts.principal import Principal
from app.container import Container, authenticated
from app.errors import ValidationFailed
from app.memories.schemas import (
    HISTORY_PAGE,
    MAX_EVENT_ID,
    MAX_HISTORY_PAGE,
    BatchResponse,
    CreatedMemory,
    HistoryResponse,
    MemoryBatchIn,
    MemoryIn,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    SearchIn,
    SearchResponse,
    TopicsResponse,
)
from app.memories.scopes import Scope
from app.openapi import body_one_of, error_responses, name_parameter
from app.validation_words import in_words

SessionQuery = Annotated[str | None, name_parameter("session", "Read as this session (a plain key may name any)")]
AgentQuery = Annotated[str | None, name_parameter("agent", "Read as this agent of the session (needs session)")]


def _parse_add(data: dict[str, Any]) -> MemoryIn | MemoryBatchIn:
    """One memory, or a batch when the body has ``memories``: validated as that one shape, so errors name its fields."""
    model: type[MemoryIn] | type[MemoryBatchIn] = MemoryBatchIn if "memories" in data else MemoryIn
    return model.model_validate(data)


class SingleAddResponse(CreatedMemory):
    results: list[CreatedMemory]


class NothingInferred(BaseModel):
    """With ``infer``, the LLM may find nothing worth keeping: 200, nothing stored."""

    id: None
    results: list[CreatedMemory]


class Deleted(BaseModel):
    deleted: list[str]


class MemoryController(Controller):
    path = "/v1"
    guards = [authenticated]
    security = [{"bearer": []}, {"apiKey": []}]
    tags = ["memories"]

    @post(
        "/memories",
        status_code=HTTP_201_CREATED,
        summary="Add one memory, or a batch with {'memories': [...]}",
        operation_class=body_one_of(MemoryIn, MemoryBatchIn),
        responses={
            **error_responses(403, 409, 413, 503),
            HTTP_200_OK: ResponseSpec(NothingInferred, description="infer found nothing to keep; nothing stored"),
        },
    )
    async def add(
        self, data: dict[str, Any], principal: Principal, container: Container
    ) -> Response[SingleAddResponse | BatchResponse]:
        try:
            body = _parse_add(data)
        except ValidationError as exc:
            raise ValidationFailed(in_words(exc)) from None
        items = body.memories if isinstance(body, MemoryBatchIn) else [body]
        created = await container.memories.add(principal, None, items)
        if isinstance(body, MemoryBatchIn):
            return Response(BatchResponse(results=created), status_code=HTTP_201_CREATED)
        if not created:  # infer extracted nothing worth keeping
            return Response(NothingInferred(id=None, results=[]), status_code=HTTP_200_OK)  # type: ignore[arg-type]
        first = created[0]
        return Response(SingleAddResponse(**first.model_dump(), results=created), status_code=HTTP_201_CREATED)

    @get(
        "/memories", summary="List readable memories, newest first, with cursor pagination", responses=error_responses()
    )
    async def list_memories(
        self,
        principal: Principal,
        container: Container,
        session: SessionQuery = None,
        agent: AgentQuery = None,
        # `scope` is Litestar's name for the ASGI scope, so the query parameter needs another Python name.
        memory_scope: Annotated[Scope | None, Parameter(query="scope", description="user, session or agent")] = None,
        tags: Annotated[
            list[str] | None,
            Parameter(
                description="Memories carrying all of these tags: repeat the parameter (`tags=a&tags=b`); a comma is "
                "part of a tag, so `tags=a,b` is the one tag 'a,b'"
            ),
        ] = None,
        limit: Annotated[int, Parameter(ge=1, le=200)] = 50,
        cursor: str | None = None,
        end_user: Annotated[
            str | None, Parameter(max_length=128, description="Only memories about this end user of your app")
        ] = None,
    ) -> MemoryPage:
        return await container.memories.list(
            principal,
            None,
            session=session,
            agent=agent,
            scope=memory_scope,
            tags=tags or (),
            limit=limit,
            cursor=cursor,
            end_user=end_user,
        )

    @post(
        "/memories/search",
        status_code=HTTP_200_OK,
        summary="Semantic search over readable memories",
        responses=error_responses(503),
    )
    async def search(self, data: SearchIn, principal: Principal, container: Container) -> SearchResponse:
        return SearchResponse(results=await container.memories.search(principal, None, data))

    @get("/memories/{memory_id:str}", summary="One memory by id", responses=error_responses(404))
    async def get_memory(self, memory_id: str, principal: Principal, container: Container) -> MemoryOut:
        return await container.memories.get(principal, None, memory_id)

    @patch(
        "/memories/{memory_id:str}",
        summary="Change a memory's content, tags or metadata",
        responses=error_responses(403, 404, 409, 413, 503),
    )
    async def update(self, memory_id: str, data: MemoryPatch, principal: Principal, container: Container) -> MemoryOut:
        return await container.memories.update(principal, None, memory_id, data)

    @delete(
        "/memories/{memory_id:str}",
        status_code=HTTP_200_OK,
        summary="Delete a memory; its history stays",
        responses=error_responses(403, 404, 503),
    )
    async def delete_memory(self, memory_id: str, principal: Principal, container: Container) -> Deleted:
        return Deleted(deleted=await container.memories.delete(principal, None, [memory_id]))

    @get(
        "/memories/{memory_id:str}/history",
        summary="A memory's ADD, UPDATE, PROMOTE, DELETE and CONFLICT events, oldest first, a page at a time",
        responses=error_responses(404),
    )
    async def history(
        self,
        memory_id: str,
        principal: Principal,
        container: Container,
        limit: Annotated[int, Parameter(ge=1, le=MAX_HISTORY_PAGE, description="Events per page")] = HISTORY_PAGE,
        after: Annotated[
            int | None,
            Parameter(ge=0, le=MAX_EVENT_ID, description="The `next` of the previous page: the events after that one"),
        ] = None,
    ) -> HistoryResponse:
        return await container.memories.history(principal, None, memory_id, limit=limit, after=after)

    @get("/topics", summary="The tags of readable memories with counts", responses=error_responses())
    async def topics(
        self, principal: Principal, container: Container, session: SessionQuery = None, agent: AgentQuery = None
    ) -> TopicsResponse:
        return TopicsResponse(topics=await container.memories.topics(principal, None, session=session, agent=agent))
