"""Mem0 Platform's REST API as Mem0's client calls it (mem0ai 2.2.1): thin handlers over Mem0Service.

Errors keep Engram's ``{"error": {...}}`` body and add Mem0's ``detail``, which the client's error handler reads;
the status code picks its exception (401 AuthenticationError, 404 MemoryNotFoundError, 429 RateLimitError, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from litestar import Request, Response, Router, delete, get, post, put, route
from litestar.status_codes import HTTP_200_OK

from app.accounts.principal import Principal
from app.container import Container, authenticated
from app.errors import NotSupported
from app.http_errors import EXCEPTION_HANDLERS
from app.mem0compat.paths import SHARED_PREFIX
from app.mem0compat.service import Mem0Service

Body = dict[str, Any]


def _service(container: Container) -> Mem0Service:
    service = container.extras.get("mem0")
    if not isinstance(service, Mem0Service):
        service = container.extras["mem0"] = Mem0Service(container.db, container.memories)
    return service


def _with_detail(handler: Callable[[Request[Any, Any, Any], Any], Response[Any]]) -> Callable[..., Response[Any]]:
    def handle(request: Request[Any, Any, Any], exc: Any) -> Response[Any]:
        response = handler(request, exc)
        content = response.content
        if isinstance(content, dict) and isinstance(content.get("error"), dict):
            response.content = {"detail": content["error"].get("message"), **content}
        return response

    return handle


MEM0_EXCEPTION_HANDLERS: dict[Any, Any] = {kind: _with_detail(h) for kind, h in EXCEPTION_HANDLERS.items()}


@get("/v1/ping")
async def ping(principal: Principal, container: Container) -> Body:
    return await _service(container).ping(principal)


@post("/v3/memories/add", status_code=HTTP_200_OK)
async def add(data: Body, principal: Principal, container: Container) -> Body:
    return await _service(container).add(principal, data)


@post("/v3/memories/search", status_code=HTTP_200_OK)
async def search(data: Body, principal: Principal, container: Container) -> Body:
    return await _service(container).search(principal, data)


@post("/v3/memories", status_code=HTTP_200_OK)
async def get_all(
    request: Request[Any, Any, Any],
    principal: Principal,
    container: Container,
    data: Body | None = None,
    page: str | None = None,
    page_size: str | None = None,
) -> Body:
    base = str(request.base_url).rstrip("/")
    return await _service(container).get_all(principal, data or {}, page, page_size, base)


@get(SHARED_PREFIX + "/v1/memories/{memory_id:str}")
async def get_memory(memory_id: str, principal: Principal, container: Container) -> Body:
    return await _service(container).get(principal, memory_id)


@put(SHARED_PREFIX + "/v1/memories/{memory_id:str}")
async def update_memory(memory_id: str, data: Body, principal: Principal, container: Container) -> Body:
    return await _service(container).update(principal, memory_id, data)


@delete(SHARED_PREFIX + "/v1/memories/{memory_id:str}", status_code=HTTP_200_OK)
async def delete_memory(memory_id: str, principal: Principal, container: Container) -> Body:
    await _service(container).delete(principal, [memory_id])
    return {"message": "Memory deleted successfully!"}


@delete(SHARED_PREFIX + "/v1/memories", status_code=HTTP_200_OK)
async def delete_all(
    principal: Principal,
    container: Container,
    user_id: str | None = None,
    agent_id: str | None = None,
    app_id: str | None = None,
    run_id: str | None = None,
) -> Body:
    named = {"user_id": user_id, "agent_id": agent_id, "app_id": app_id, "run_id": run_id}
    deleted = await _service(container).delete_matching(principal, named)
    return {"message": f"Memories deleted successfully! ({deleted})"}


@get(SHARED_PREFIX + "/v1/memories/{memory_id:str}/history")
async def history(memory_id: str, principal: Principal, container: Container) -> list[Body]:
    return await _service(container).history(principal, memory_id)


@put("/v1/batch")
async def batch_update(data: Body, principal: Principal, container: Container) -> Body:
    return await _service(container).batch_update(principal, data)


@delete("/v1/batch", status_code=HTTP_200_OK)
async def batch_delete(data: Body, principal: Principal, container: Container) -> Body:
    return await _service(container).batch_delete(principal, data)


@get("/v1/entities")
async def entities(principal: Principal, container: Container) -> Body:
    return await _service(container).entities(principal)


@delete("/v2/entities/{kind:str}/{name:str}", status_code=HTTP_200_OK)
async def delete_entity(kind: str, name: str, principal: Principal, container: Container) -> Body:
    return await _service(container).delete_entity(principal, kind, name)


@post("/v1/exports", status_code=HTTP_200_OK)
async def create_export(data: Body, principal: Principal, container: Container) -> Body:
    return await _service(container).create_export(principal, data)


@post("/v1/exports/get", status_code=HTTP_200_OK)
async def get_export(data: Body, principal: Principal, container: Container) -> Body:
    return await _service(container).get_export(principal, data)


_UNSUPPORTED = {
    "/v1/summary": "memory summaries",
    "/v1/feedback": "feedback",
    "/v2/profiles/{rest:path}": "profiles",
    "/v2/entities/{kind:str}/{name:str}/profile": "profiles",
    "/api/v1/webhooks/{rest:path}": "webhooks",
    "/api/v1/orgs/{rest:path}": "project and organisation settings",
}


def _unsupported(path: str, feature: str) -> Any:
    async def refuse(principal: Principal) -> None:
        raise NotSupported(f"not supported by Engram: {feature} (see the README's 'Coming from Mem0')")

    refuse.__name__ = "unsupported_" + "".join(c if c.isalnum() else "_" for c in path)
    return route(path, http_method=["GET", "POST", "PUT", "PATCH", "DELETE"], status_code=400)(refuse)


mem0_router = Router(
    path="/",
    route_handlers=[
        ping,
        add,
        search,
        get_all,
        get_memory,
        update_memory,
        delete_memory,
        delete_all,
        history,
        batch_update,
        batch_delete,
        entities,
        delete_entity,
        create_export,
        get_export,
        *(_unsupported(path, feature) for path, feature in _UNSUPPORTED.items()),
    ],
    guards=[authenticated],
    exception_handlers=MEM0_EXCEPTION_HANDLERS,
    include_in_schema=False,
    tags=["mem0"],
)
