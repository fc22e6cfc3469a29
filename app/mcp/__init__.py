"""MCP over Streamable HTTP at ``/mcp/v2/{client_name}/{user_id}``: memory tools, and coordination in session mode."""

from app.mcp.endpoint import McpEndpoint

__all__ = ["McpEndpoint"]
