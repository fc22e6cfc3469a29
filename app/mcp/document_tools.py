"""The document tool, listed only when the URL names a session agent: index files an agent has read."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.mcp.caller import Caller
from app.mcp.tools import Args, Toolset
from app.projects.schemas import DocumentIn, IndexReport

MAX_FILES = 100

document_tools = Toolset()


class FileArg(BaseModel):
    path: str = Field(
        min_length=1, max_length=512, description="Relative to the repository root, e.g. 'docs/deploy.md'."
    )
    content: str = Field(description="The whole file as text.")


class IndexFilesArgs(Args):
    files: list[FileArg] = Field(
        min_length=1, max_length=MAX_FILES, description="The files to index, 1-100; all are indexed or none."
    )


@document_tools.tool()
async def index_files(caller: Caller, args: IndexFilesArgs) -> IndexReport:
    """Index project files you have read (README, docs, config) into this session's memory, so every agent of the
    session finds them with search_memory; each result then names its `source` (file and heading path).

    Markdown is split at its headings, JSON/YAML/TOML by top-level key. Indexing a file again replaces its old
    chunks; an unchanged file writes nothing. A binary, invalid or oversize file, or a path outside the
    repository ('..', absolute), refuses the whole call, naming the file and why.
    """
    documents = [DocumentIn(path=f.path, content=f.content) for f in args.files]
    return await caller.container.documents.put(caller.principal, caller.identity, documents, origin="agent")
