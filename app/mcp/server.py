"""The MCP server: which tools a caller sees, how a call reaches them, and the hooks live push needs."""

from __future__ import annotations

from typing import Any

import mcp.types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from app.errors import AppError
from app.mcp.caller import Caller, caller_from_request
from app.mcp.document_tools import document_tools
from app.mcp.errors import protocol_error
from app.mcp.listen import listen
from app.mcp.live import LiveSessions
from app.mcp.memory_tools import memory_tools
from app.mcp.resources import list_resources, read_resource
from app.mcp.session_tools import session_tools
from app.mcp.team_tools import session_join  # noqa: F401  (registers the team tools among the session tools)
from app.mcp.tools import Tool, tool_error

SESSION_ID_HEADER = "mcp-session-id"

INSTRUCTIONS = (
    "Engram is your long-term memory. Search it (search_memory) before starting work, and store what future "
    "sessions should know (add_memories): decisions, conventions, preferences, pitfalls."
)


def whoami(caller: Caller) -> str:
    identity = caller.identity
    return (
        f"You are agent `{identity.agent}` in session `{identity.session}` (user `{identity.user_id}`, connected "
        f"from `{caller.client_name}`). Other agents work in this session too: when you start, join with your role "
        "(session_join), run session_status and read your session_inbox; claim files before editing them, broadcast "
        "what you changed, sync the others' changes, and take tasks from session_task_list."
    )


def tools_for(caller: Caller) -> list[Tool]:
    """Session tools first in session mode, so that the first description tells the agent who it is."""
    return [*session_tools, *memory_tools, *document_tools] if caller.in_session else list(memory_tools)


def definitions(caller: Caller) -> list[types.Tool]:
    tools = tools_for(caller)
    out = [tool.definition() for tool in tools]
    if caller.in_session and out:
        out[0] = tools[0].definition(f"{whoami(caller)}\n\n{tools[0].description}")
    return out


def input_schema(name: str) -> dict[str, Any] | None:
    """For the SDK's check of 2026-07-28 ``Mcp-Param-*`` headers; without it the SDK lists every tool per call."""
    tool = memory_tools.get(name) or session_tools.get(name) or document_tools.get(name)
    return tool.input_schema if tool is not None else None


def _session_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    headers = getattr(ctx.request, "headers", None)
    return headers.get(SESSION_ID_HEADER) if headers is not None else None


class _HonestServer(Server[Any]):
    """Declares only what Engram does. An endpoint's tool and resource lists never change while a client holds them
    (they depend on the URL alone), so no list-changed notification will ever come: say so, at every revision. (At
    2026-07-28 the SDK would declare listChanged for every list merely because subscriptions/listen is served.)"""

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        if capabilities.tools is not None:
            capabilities.tools.list_changed = False
        if capabilities.resources is not None:
            capabilities.resources.list_changed = False
        return capabilities


def build_server(live: LiveSessions) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=definitions(caller_from_request(ctx.request)))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = caller_from_request(ctx.request)
        tool = memory_tools.get(params.name) or session_tools.get(params.name) or document_tools.get(params.name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        if memory_tools.get(params.name) is None and not caller.in_session:
            return tool_error(
                f"{params.name} works only in session mode: connect to /mcp/v2/<client>/USER__session__SESSION__AGENT",
                "not_in_session",
            )
        return await tool.call(caller, params.arguments)

    async def list_session_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=list_resources(caller_from_request(ctx.request)))

    async def read_session_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        try:
            return await read_resource(caller_from_request(ctx.request), str(params.uri))
        except AppError as exc:
            raise protocol_error(exc) from exc

    async def initialized(ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
        caller = caller_from_request(ctx.request)
        session_id = _session_id(ctx)
        if caller.in_session and session_id:
            live.start_push(
                session_id, caller.container.sessions, ctx.session, caller.container.recheck(caller.principal)
            )

    async def set_level(ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        session_id = _session_id(ctx)
        if session_id:
            live.set_log_level(session_id, params.level)
        return types.EmptyResult()

    async def personal_instructions(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            caller = caller_from_request(ctx.request)
            if caller.in_session:
                result["instructions"] = f"{whoami(caller)}\n\n{INSTRUCTIONS}"
        return result

    server: Server[Any] = _HonestServer(
        "engram",
        version="0.1.0",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=input_schema,
        on_list_resources=list_session_resources,
        on_read_resource=read_session_resource,
        # Push for 2026-07-28 clients, which have no GET stream: see app.mcp.listen.
        on_subscriptions_listen=listen,
    )
    server.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
    # Declares the logging capability: pushed session events travel as log notifications.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    server.middleware.append(personal_instructions)
    return server
