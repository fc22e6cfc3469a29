"""The OpenAPI document as served: Litestar's, with every pydantic model described by pydantic itself.

Litestar converts pydantic models into schemas on its own and loses things on the way (``pattern``, a ``minimum`` of
0, ``additionalProperties: false`` for models that forbid extra fields). Pydantic's JSON Schema is exact and is
OpenAPI 3.1's dialect, so each model's component is replaced with it. Nothing else in the document is rewritten except
what Litestar cannot express: headers of error responses, and optional query parameters (never ``null`` on the wire).
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, ClassVar, Literal

from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.spec import OpenAPIMediaType, Operation, Reference, RequestBody, Schema
from litestar.routes import HTTPRoute
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from app.openapi.errors import DESCRIPTIONS, HEADERS, ErrorBody

Mode = Literal["validation", "serialization"]
# A handler's ``opt`` key: the events of its ``text/event-stream`` answer, by name, each with the model of its data.
SSE_EVENTS_OPT = "sse_events"
REF = "#/components/schemas/{model}"


def body_one_of(*models: type[BaseModel]) -> type[Operation]:
    """An ``operation_class`` for a route that parses its JSON body itself: the body is one of ``models``."""

    @dataclass
    class BodyOneOf(Operation):
        body_models: ClassVar[tuple[type[BaseModel], ...]] = models

        def __post_init__(self) -> None:
            refs: list[Schema | Reference] = [Reference(ref=REF.format(model=m.__name__)) for m in models]
            schema = refs[0] if len(refs) == 1 else Schema(one_of=refs)
            self.request_body = RequestBody(
                content={"application/json": OpenAPIMediaType(schema=schema)}, required=True
            )

    return BodyOneOf


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _documented_handlers(app: Litestar) -> Iterator[HTTPRouteHandler]:
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                if handler.resolve_include_in_schema():
                    yield handler


def _models_of(app: Litestar) -> dict[type[BaseModel], Mode]:
    """Every pydantic model the documented routes take or give; a model that is both is described as taken."""
    found: dict[type[BaseModel], Mode] = {ErrorBody: "serialization"}
    for handler in _documented_handlers(app):
        signature = handler.parsed_fn_signature
        given = [*_models_in(signature.return_type.annotation)]
        for spec in (handler.responses or {}).values():
            given.extend(_models_in(spec.data_container))
        taken = [*getattr(handler.operation_class, "body_models", ())]
        if (data := signature.parameters.get("data")) is not None:
            taken.extend(_models_in(data.annotation))
        given.extend((handler.opt.get(SSE_EVENTS_OPT) or {}).values())
        for model in given:
            found.setdefault(model, "serialization")
        for model in taken:
            found[model] = "validation"
    return found


def _drop_property_titles(schema: Any) -> None:
    """Pydantic titles every property after its name; that is noise in a rendered schema."""
    if isinstance(schema, dict):
        for prop in (schema.get("properties") or {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        for value in schema.values():
            _drop_property_titles(value)
    elif isinstance(schema, list):
        for item in schema:
            _drop_property_titles(item)


def _component_schemas(models: dict[type[BaseModel], Mode]) -> dict[str, Any]:
    _, top = models_json_schema([(model, mode) for model, mode in models.items()], ref_template=REF)
    schemas: dict[str, Any] = top.get("$defs", {})
    _drop_property_titles(schemas)
    return schemas


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``X | None`` for a query parameter means "may be left out", which ``required: false`` already says."""
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list):
            kept = [o for o in options if o != {"type": "null"}]
            if len(kept) == 1 and len(kept) < len(options):
                merged = {k: v for k, v in schema.items() if k != key}
                merged.update(kept[0])
                if merged.get("default", 0) is None:
                    del merged["default"]
                return merged
    if isinstance(schema.get("type"), list) and "null" in schema["type"]:
        types = [t for t in schema["type"] if t != "null"]
        schema = {**schema, "type": types[0] if len(types) == 1 else types}
        if isinstance(schema.get("enum"), list):
            schema["enum"] = [v for v in schema["enum"] if v is not None]
    return schema


def _operations(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for item in document.get("paths", {}).values():
        for method in ("get", "put", "post", "delete", "options", "head", "patch", "trace"):
            if isinstance(item.get(method), dict):
                yield item[method]


def _error(status: int) -> dict[str, Any]:
    schema = {"$ref": REF.format(model="ErrorBody")}
    description = DESCRIPTIONS.get(status) or HTTPStatus(status).phrase
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _replace_litestar_errors(responses: dict[str, Any]) -> None:
    """A route that declares no errors gets Litestar's ``{status_code, detail}``, which the API never answers
    (app.http_errors renders every error as an ErrorBody, and a ValidationException as 422)."""
    for status in [s for s in responses if s.startswith(("4", "5"))]:
        schema = responses[status].get("content", {}).get("application/json", {}).get("schema", {})
        if {"status_code", "detail"} <= set(schema.get("properties", {})):
            del responses[status]
            responses.setdefault("422" if status == "400" else status, _error(422 if status == "400" else int(status)))


_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _parameter_bounds(app: Litestar) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(path, method, parameter name, its numeric bounds) of every documented operation, from the handlers."""
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            if not handler.resolve_include_in_schema():
                continue
            for name, parameter in handler.parsed_fn_signature.parameters.items():
                kwarg = parameter.kwarg_definition
                bounds = {
                    key: getattr(kwarg, attr) for attr, key in _BOUNDS.items() if getattr(kwarg, attr, None) is not None
                }
                if bounds:
                    query = getattr(kwarg, "query", None) or name
                    for method in handler.http_methods:
                        yield route.path_format, method.lower(), query, bounds


def _describe_event_streams(document: dict[str, Any], app: Litestar) -> None:
    """An event stream is text, a line at a time: the schema says so, and names each event with its data's shape
    (``x-events``; OpenAPI 3.1 has no keyword for the items of a stream)."""
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            events: dict[str, type[BaseModel]] | None = handler.opt.get(SSE_EVENTS_OPT)
            if not events or not handler.resolve_include_in_schema():
                continue
            for method in handler.http_methods:
                operation = document["paths"][route.path_format][method.lower()]
                media = operation["responses"]["200"]["content"]["text/event-stream"]
                media["schema"] = {
                    "type": "string",
                    "description": "Server-Sent Events: each is `event: NAME`, one `data:` line of JSON shaped as "
                    "`x-events` says for NAME, and for a change its cursor as `id:`. A `: keepalive` comment comes "
                    "after 15 s of quiet.",
                    "x-events": {name: {"$ref": REF.format(model=model.__name__)} for name, model in events.items()},
                }


def _restore_parameter_bounds(document: dict[str, Any], app: Litestar) -> None:
    """Litestar drops a bound of 0 (falsy) and the bounds of an optional parameter; the handler still has them."""
    for path, method, name, bounds in _parameter_bounds(app):
        operation = document.get("paths", {}).get(path, {}).get(method)
        for parameter in (operation or {}).get("parameters", []):
            if parameter.get("name") == name and isinstance(parameter.get("schema"), dict):
                parameter["schema"].update(bounds)


def _this_servers_limits(components: dict[str, Any], app: Litestar) -> None:
    """What this server's settings allow, where they narrow the models: a memory's length, and infer without an LLM."""
    container = app.state.get("container")
    memory_in = components.get("MemoryIn", {}).get("properties")
    if container is None or not memory_in:
        return
    memory_in["content"]["maxLength"] = container.settings.max_memory_chars
    if not container.engine.infer_available:
        memory_in["infer"] = {
            "type": "boolean",
            "const": False,
            "default": False,
            "description": "Always false here: this server has no LLM configured (ENGRAM_LLM_BASE_URL).",
        }


def finalize(document: dict[str, Any], app: Litestar) -> dict[str, Any]:
    """A copy of Litestar's document with exact model schemas, the body limit's 413, error headers and non-null
    query parameters."""
    document = copy.deepcopy(document)
    components = document.setdefault("components", {}).setdefault("schemas", {})
    components.update(_component_schemas(_models_of(app)))
    _this_servers_limits(components, app)
    for operation in _operations(document):
        responses = operation.setdefault("responses", {})
        _replace_litestar_errors(responses)
        if "requestBody" in operation:
            # The body limit (ENGRAM_MAX_BODY_BYTES) holds for the whole server, whatever the route declares.
            responses.setdefault("413", _error(413))
        for parameter in operation.get("parameters", []):
            if parameter.get("in") != "path" and isinstance(parameter.get("schema"), dict):
                parameter["schema"] = _without_null(parameter["schema"])
        for status, response in operation.get("responses", {}).items():
            for media in (response.get("content") or {}).values():
                schema = media.get("schema")
                # Litestar writes a union of responses as oneOf, but one shape can fit several (a single add's answer
                # also fits the batch's): anyOf is what is meant.
                if isinstance(schema, dict) and "oneOf" in schema:
                    schema["anyOf"] = schema.pop("oneOf")
            headers = HEADERS.get(int(status)) if status.isdigit() else None
            if headers:
                response["headers"] = {**response.get("headers", {}), **headers}
    _restore_parameter_bounds(document, app)
    _describe_event_streams(document, app)
    return document
