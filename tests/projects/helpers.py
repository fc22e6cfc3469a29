"""Shared by the project tests: a real folder of docs, what its chunks should be, and what the server holds."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from app.projects import files
from app.projects.chunking import chunk_document
from app.projects.files import DEFAULT_EXCLUDES, DEFAULT_PATTERNS
from app.projects.walker import Rules, walk

README = """# Shop

An online shop for second-hand books.

## Deploy

We deploy with flyctl from main; staging first, then production.

### Database

Migrations run in the release command before the new machines start.

## Testing

Run make test; it needs PostgreSQL and Redis.
"""

GUIDE = """# Contributor guide

## Branches

Name branches after the issue, e.g. issue-42-search.

## Reviews

Every change needs one approving review from the owning team.
"""


def make_repo(root: Path) -> Path:
    """A small repository: markdown, YAML, TOML and JSON, an ignored folder and a few files to skip."""
    write(root, "README.md", README)
    write(root, "docs/guide.md", GUIDE)
    write(root, "config/app.yaml", "server:\n  port: 8080\ncache:\n  ttl: 60\n")
    write(root, "pyproject.toml", '[project]\nname = "shop"\n\n[tool.ruff]\nline-length = 120\n')
    write(root, "package.json", '{"name": "shop", "scripts": {"test": "vitest"}}\n')
    write(root, "src/app.py", "print('not a document')\n")
    write(root, ".gitignore", "private/\n")
    write(root, "private/notes.md", "# Private\n\nNever indexed.\n")
    return root


def write(root: Path, path: str, data: str | bytes) -> Path:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        target.write_bytes(data)
    else:
        target.write_text(data)
    return target


def expected(root: Path, max_memory_chars: int, max_bytes: int = files.DEFAULT_MAX_BYTES) -> Counter[str]:
    """The sources the folder's chunks should have, each as many times as it should occur."""
    counts: Counter[str] = Counter()
    for found in walk(Rules(root, DEFAULT_PATTERNS, DEFAULT_EXCLUDES)).found:
        try:
            text = found.read(max_bytes)
        except files.Refused:
            continue
        counts.update(chunk.source(found.path) for chunk in chunk_document(found.path, text, max_memory_chars))
    return counts


def indexed(http: httpx.Client, session: str) -> Counter[str]:
    """The sources of the document chunks the server holds in the session, with how many of each."""
    counts: Counter[str] = Counter()
    cursor = None
    while True:
        params: dict[str, Any] = {"session": session, "tags": ["document"], "limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = http.get("/v1/memories", params=params)
        assert page.status_code == 200, page.text
        counts.update(m["source"] for m in page.json()["memories"])
        cursor = page.json()["next_cursor"]
        if not cursor:
            return counts


def wait_for(check: Callable[[], Any], *, seconds: float = 60.0, what: str = "the condition") -> Any:
    """Poll until ``check`` returns something truthy; fail after the deadline with its last value."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last value {value!r}")
        time.sleep(0.05)


def settles_to(http: httpx.Client, session: str, root: Path, max_memory_chars: int) -> Callable[[], bool]:
    want = expected(root, max_memory_chars)
    return lambda: indexed(http, session) == want
