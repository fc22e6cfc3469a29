"""REST ``/v1/sessions/{session}/documents``: index, remove and list a session's files (for hosted use)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, delete, get, put
from litestar.params import Parameter
from litestar.status_codes import HTTP_200_OK
from pydantic import ValidationError

from app.accounts.principal import Principal
from app.container import Container, authenticated
from app.errors import ValidationFailed
from app.memories.scopes import viewer
from app.openapi import body_one_of, error_responses, name_parameter
from app.projects.files import DOCUMENT_PATH_PATTERN, MAX_PATH_CHARS
from app.projects.schemas import DocumentBatchIn, DocumentIn, DocumentList, IndexReport
from app.validation_words import in_words

SessionPath = Annotated[str, name_parameter("session")]


def _parse(data: dict[str, Any] | list[Any]) -> list[DocumentIn]:
    """One document ``{path, content, modified_at}``, or a batch: ``{"documents": [...]}`` (or a bare list)."""
    try:
        if isinstance(data, list):
            return DocumentBatchIn.model_validate({"documents": data}).documents
        if "documents" in data:
            return DocumentBatchIn.model_validate(data).documents
        return [DocumentIn.model_validate(data)]
    except ValidationError as exc:
        raise ValidationFailed(in_words(exc)) from None


class DocumentController(Controller):
    path = "/v1/sessions/{session:str}/documents"
    guards = [authenticated]
    security = [{"bearer": []}, {"apiKey": []}]
    tags = ["documents"]

    @put(
        status_code=HTTP_200_OK,
        summary="Index files into the session",
        description=(
            'A file `{path, content, modified_at}`, or a batch `{"documents": [...]}`, indexed all together or not '
            "at all: a refused file (binary, too large, a path outside the project) is named with its reason in a "
            "422 and nothing is written. A file whose content hash is unchanged writes nothing; a changed one "
            "replaces every chunk it had. Each chunk is a session memory whose `source` names the file and its "
            "heading path."
        ),
        operation_class=body_one_of(DocumentIn, DocumentBatchIn),
        responses=error_responses(403, 409, 413, 503),
    )
    async def index(
        self, session: SessionPath, data: dict[str, Any] | list[Any], principal: Principal, container: Container
    ) -> IndexReport:
        identity = viewer(principal, session, None)
        return await container.documents.put(principal, identity, _parse(data), origin="upload")

    @delete(
        status_code=HTTP_200_OK,
        summary="Remove indexed files and all their chunks, all or none",
        responses=error_responses(403, 404, 409, 503),
    )
    async def remove(
        self,
        session: SessionPath,
        principal: Principal,
        container: Container,
        paths: Annotated[
            list[str],
            Parameter(
                query="path",
                description="A file to remove, relative to the project root; repeat for several",
                min_items=1,
                schema_extra={
                    "items": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_PATH_CHARS,
                        "pattern": DOCUMENT_PATH_PATTERN,
                    }
                },
            ),
        ],
    ) -> IndexReport:
        return await container.documents.remove(principal, viewer(principal, session, None), paths)

    @get(
        summary="The indexed files of the session, with their content hashes and chunk counts",
        responses=error_responses(),
    )
    async def listing(self, session: SessionPath, principal: Principal, container: Container) -> DocumentList:
        return await container.documents.list(principal, viewer(principal, session, None))
