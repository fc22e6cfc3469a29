"""Request and response shapes of document indexing, shared by REST, MCP and the command line."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from app.json_body import JsonIn, JsonTime
from app.projects.files import DOCUMENT_PATH_PATTERN, MAX_PATH_CHARS


class _In(JsonIn):
    """A request body."""


class DocumentIn(_In):
    path: str = Field(
        min_length=1,
        max_length=MAX_PATH_CHARS,
        description="The file's path relative to the project root.",
        # Stated for clients; clean_path enforces it (pydantic's regex engine has no look-ahead), naming what is wrong.
        json_schema_extra={"pattern": DOCUMENT_PATH_PATTERN},
    )
    content: str = Field(description="The whole file, as UTF-8 text.")
    modified_at: Annotated[datetime | None, JsonTime] = Field(
        default=None, description="The file's modification time; default: now."
    )

    @field_validator("modified_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class DocumentBatchIn(_In):
    documents: list[DocumentIn] = Field(min_length=1, description="Indexed all together or not at all.")


class Skipped(BaseModel):
    path: str
    reason: str = Field(description="binary, too_large, invalid_utf8, outside_project, invalid_path, ...")
    message: str


class FileResult(BaseModel):
    path: str
    status: Literal["added", "changed", "unchanged", "removed"]
    chunks: int = Field(description="Chunks the file has now (0 once removed).")


class IndexReport(BaseModel):
    """What one indexing run did."""

    session: str
    project: str | None = None
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    chunks_written: int = 0
    chunks_removed: int = 0
    seconds: float = 0.0
    skipped: list[Skipped] = Field(default_factory=list)
    files: list[FileResult] = Field(default_factory=list, description="Every file added, changed or removed.")

    def merge(self, other: IndexReport) -> None:
        self.added += other.added
        self.changed += other.changed
        self.removed += other.removed
        self.unchanged += other.unchanged
        self.chunks_written += other.chunks_written
        self.chunks_removed += other.chunks_removed
        self.skipped.extend(other.skipped)
        self.files.extend(other.files)


class DocumentOut(BaseModel):
    path: str
    content_hash: str = Field(description="SHA-256 (hex) of the file's UTF-8 bytes as indexed.")
    size: int
    chunks: int
    origin: str = Field(description="folder (a registered project), upload (REST) or agent (MCP)")
    modified_at: datetime | None
    indexed_at: datetime


class DocumentList(BaseModel):
    session: str
    documents: list[DocumentOut]
