"""Typed tools: a function's docstring is what the agent reads, its argument and return models are the schemas."""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, get_type_hints

import mcp.types as types
from pydantic import BaseModel, ConfigDict, ValidationError

from app.db import busy_database
from app.errors import AppError, RateLimited
from app.mcp.caller import Caller
from app.mcp.errors import protocol_error

log = logging.getLogger(__name__)

ToolFn = Callable[[Caller, Any], Awaitable[BaseModel]]
F = TypeVar("F", bound=ToolFn)


class Args(BaseModel):
    """Tool arguments: unknown keys are refused, so a misspelt argument is reported instead of ignored."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    args: type[BaseModel]
    result: type[BaseModel]
    run: ToolFn
    read_only: bool
    destructive: bool
    # Built once: pydantic's schema generation costs milliseconds, and listings happen on every 2026-07-28 call.
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]

    def definition(self, description: str | None = None) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=description or self.description,
            input_schema=self.input_schema,
            output_schema=self.output_schema,
            annotations=types.ToolAnnotations(
                read_only_hint=self.read_only,
                destructive_hint=self.destructive,
                idempotent_hint=self.read_only,
                open_world_hint=False,
            ),
        )

    async def call(self, caller: Caller, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Validate, run, and answer with text and structured content; caller mistakes become tool errors."""
        started = time.perf_counter()
        outcome = "limited"  # unless _call returns: only a limit escapes it, as a protocol error
        try:
            result, outcome = await self._call(caller, arguments)
            return result
        finally:
            metrics = caller.container.metrics
            metrics.tool_calls.labels(self.name, outcome).inc()
            metrics.tool_duration.labels(self.name).observe(time.perf_counter() - started)

    async def _call(self, caller: Caller, arguments: dict[str, Any] | None) -> tuple[types.CallToolResult, str]:
        """The result and its outcome: ok, tool_error (the caller's to fix) or error (ours, e.g. a backend down)."""
        try:
            args = self.args.model_validate(arguments or {})
        except ValidationError as exc:
            message = f"invalid arguments for {self.name}: {validation_message(exc)}"
            return tool_error(message, "invalid_arguments"), "tool_error"
        try:
            result = await self.run(caller, args)
        except RateLimited as exc:
            # A limit is not the tool's answer but the service refusing the request, as it does over HTTP (429).
            raise protocol_error(exc) from exc
        except AppError as exc:
            return tool_error(exc.message, exc.code), "error" if exc.status_code >= 500 else "tool_error"
        except Exception as exc:
            if (busy := busy_database(exc)) is not None:  # a database wait outside bounded_waits: at capacity
                log.warning("tool %s: database wait ran out: %s", self.name, exc)
                return tool_error(busy.message, busy.code), "error"
            log.exception("tool %s failed", self.name)
            return tool_error("internal error; it has been logged", "internal_error"), "error"
        structured = result.model_dump(mode="json")
        text = types.TextContent(type="text", text=json.dumps(structured, ensure_ascii=False))
        return types.CallToolResult(content=[text], structured_content=structured), "ok"


class Toolset:
    """An ordered set of tools, filled by decorating functions ``async def name(caller, args: Args) -> Result``."""

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}

    def tool(self, *, read_only: bool = False, destructive: bool = False) -> Callable[[F], F]:
        def register(fn: F) -> F:
            hints = get_type_hints(fn)
            self.tools[fn.__name__] = Tool(
                name=fn.__name__,
                description=_paragraphs(fn.__doc__ or ""),
                args=hints["args"],
                result=hints["return"],
                run=fn,
                read_only=read_only,
                destructive=destructive,
                input_schema=hints["args"].model_json_schema(mode="validation"),
                output_schema=hints["return"].model_json_schema(mode="serialization"),
            )
            return fn

        return register

    def __iter__(self) -> Any:
        return iter(self.tools.values())

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)


def _paragraphs(doc: str) -> str:
    """A docstring as the agent should read it: paragraphs kept, the source's line wrapping dropped."""
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


def tool_error(message: str, code: str) -> types.CallToolResult:
    """A failed call the agent can read and act on (not a protocol error)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"Error ({code}): {message}")],
        is_error=True,
    )


def validation_message(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()[:10])
