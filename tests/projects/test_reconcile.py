"""A project's reconcile, in process: what it re-reads, what it removes, and what it leaves to other writers."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.accounts.principal import Principal
from app.identity import Identity
from app.projects.schemas import DocumentIn
from tests.projects.helpers import write
from tests.sync.conftest import Node, node_settings, open_node

MAX_DOCUMENT_BYTES = 2_000
SESSION = "shop"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def node(tmp_path: Path, embedder: Any) -> AsyncIterator[Node]:
    settings = node_settings(tmp_path / "data", max_document_bytes=MAX_DOCUMENT_BYTES)
    async with open_node(settings, embedder) as opened:
        yield opened


async def registered(node: Node, root: Path) -> tuple[Principal, Any]:
    who = await node.user()
    await node.container.projects.add(who.user_id, SESSION, str(root))
    return who, await node.container.projects.find(SESSION, who.user_id)


async def held(node: Node, who: Principal) -> dict[str, tuple[str, int]]:
    """The session's documents: path -> (origin, chunks)."""
    listed = await node.container.documents.list(who, Identity(who.user_id, SESSION, None))
    return {d.path: (d.origin, d.chunks) for d in listed.documents}


async def chunk_texts(node: Node, who: Principal) -> list[str]:
    page = await node.container.memories.list(who, Identity(who.user_id, SESSION, None), limit=100)
    return sorted(m.content for m in page.memories)


@pytest.mark.anyio
async def test_a_file_edited_in_place_to_the_same_size_is_read_again_when_its_time_changes(
    node: Node, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    path = write(root, "README.md", "# Deploy\n\nWe deploy with flyctl.\n")
    who, project = await registered(node, root)
    assert (await node.container.projects.reconcile(project)).added == 1
    stat = path.stat()
    path.write_text("# Deploy\n\nWe deploy with kamal!.\n")  # the same number of bytes
    assert path.stat().st_size == stat.st_size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    report = await node.container.projects.reconcile(project)
    assert (report.changed, report.unchanged) == (1, 0)
    assert any("kamal" in text for text in await chunk_texts(node, who))
    assert not any("flyctl" in text for text in await chunk_texts(node, who))
    # Untouched since: not read at all.
    assert (await node.container.projects.reconcile(project)).unchanged == 1


@pytest.mark.anyio
async def test_reconcile_removes_only_what_the_folder_indexed(node: Node, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, "README.md", "# Shop\n\nSecond-hand books.\n")
    write(root, "docs/gone.md", "# Gone\n\nSoon deleted.\n")
    write(root, "docs/blob.md", b"\x89PNG\x00\x00")  # a file the folder cannot index
    who, project = await registered(node, root)
    await node.container.projects.reconcile(project)
    identity = Identity(who.user_id, SESSION, None)
    uploads = [
        DocumentIn(path="notes/upload.md", content="# Notes\n\nSent over REST.\n"),
        DocumentIn(path="docs/blob.md", content="# Blob\n\nThe text an agent sent for this path.\n"),
    ]
    await node.container.documents.put(who, identity, uploads, origin="upload")

    (root / "docs/gone.md").unlink()
    report = await node.container.projects.reconcile(project)
    assert [f.path for f in report.files if f.status == "removed"] == ["docs/gone.md"]
    assert await held(node, who) == {
        "README.md": ("folder", 1),
        "notes/upload.md": ("upload", 1),
        "docs/blob.md": ("upload", 1),
    }


@pytest.mark.anyio
async def test_a_file_that_becomes_binary_or_too_large_loses_its_chunks(node: Node, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, "README.md", "# Shop\n\nSecond-hand books.\n")
    write(root, "docs/logo.md", "# Logo\n\nA drawing of a book.\n")
    write(root, "docs/huge.md", "# Huge\n\nA short page for now.\n")
    who, project = await registered(node, root)
    assert (await node.container.projects.reconcile(project)).added == 3

    write(root, "docs/logo.md", b"\x89PNG\x00\x00\x00 a drawing of a book")
    write(root, "docs/huge.md", "# Huge\n\n" + "word " * MAX_DOCUMENT_BYTES)
    report = await node.container.projects.reconcile(project)
    assert {(s.path, s.reason) for s in report.skipped} == {("docs/logo.md", "binary"), ("docs/huge.md", "too_large")}
    assert report.removed == 2
    assert await held(node, who) == {"README.md": ("folder", 1)}
    [left] = await chunk_texts(node, who)
    assert "Second-hand books" in left
