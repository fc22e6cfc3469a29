"""``GET /v1/export`` (streamed JSONL, a read key suffices) and ``POST /v1/import`` (JSONL body, write scope)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.params import Parameter
from litestar.response import Stream
from pydantic import BaseModel

from app.accounts.principal import Principal
from app.admission.http import OWN_BODY, admit_after_body, body_chunks
from app.container import Container, authenticated
from app.errors import PayloadTooLarge
from app.identity import validate_name
from app.openapi import error_responses
from app.openapi.params import name_parameter
from app.portability import service
from app.portability.importer import parse, split_body

JSONL = "application/x-ndjson"


class ImportSummary(BaseModel):
    imported: int
    skipped: int
    refused: int
    reasons: list[dict[str, Any]]


async def lines_of(lines: AsyncIterator[str]) -> AsyncIterator[bytes]:
    async for line in lines:
        yield (line + "\n").encode()


def export_filename(user_id: str, session: str | None) -> str:
    return f"engram-{user_id}{'-' + session if session else ''}.jsonl"


class PortabilityController(Controller):
    path = "/v1"
    guards = [authenticated]
    security = [{"bearer": []}, {"apiKey": []}]
    tags = ["portability"]

    @get(
        "/export",
        summary="Everything of the key's user (or one session) as engram-export JSONL, streamed",
        media_type=JSONL,
        responses=error_responses(),
    )
    async def export(
        self,
        principal: Principal,
        container: Container,
        session: Annotated[
            str | None, name_parameter("session", "Only this session's memories, documents, messages")
        ] = None,
        vectors: Annotated[bool, Parameter(description="Add each memory's dense vector (with the model id)")] = False,
    ) -> Stream:
        # An export holds every agent's private memories: more than any one agent may read.
        principal.require_unbound("an export")
        if session is not None:
            validate_name(session, "session")
        lines = service.export(container, principal.user_id, session=session, vectors=vectors)
        return Stream(
            lines_of(lines),
            media_type=JSONL,
            headers={
                "Content-Disposition": f'attachment; filename="{export_filename(principal.user_id, session)}"',
                "Cache-Control": "no-store",
            },
        )

    @post(
        "/import",
        summary="Import an engram-export (JSONL body) into the key's user: idempotent",
        status_code=200,
        request_max_body_size=None,
        responses=error_responses(403, 408, 413),
        opt=OWN_BODY,
    )
    async def import_(
        self, request: Request[Any, Any, Any], principal: Principal, container: Container
    ) -> ImportSummary:
        principal.require_write()
        principal.require_unbound("an import")
        limit = container.settings.import_max_bytes
        too_large = f"an import body holds at most {limit} bytes; use `engram import` for more"
        if (request.content_length or 0) > limit:
            raise PayloadTooLarge(too_large)
        body = bytearray()
        # Received before the request takes its slot (app.admission.http): a slow upload holds none.
        async for chunk in body_chunks(request, container.settings.request_body_seconds):
            body += chunk
            if len(body) > limit:
                raise PayloadTooLarge(too_large)
        await admit_after_body(request, principal)
        parsed = parse(split_body(bytes(body)))
        summary = await service.import_into(container, principal.user_id, parsed)
        return ImportSummary(**summary.as_json())
