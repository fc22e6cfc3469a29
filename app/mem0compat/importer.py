"""``engram import --from mem0 FILE --user USER_ID`` and ``engram import --from mem0-platform --api-key K --user
USER_ID``: move a Mem0 user's memories into an Engram account, keeping ids, entity ids, metadata, categories and
times, and embedding the text again with Engram's model. Each batch is stored all or none; a memory whose id the
account already has is passed over, so running an import again adds nothing."""

from __future__ import annotations

import argparse
import asyncio
import gzip
import io
import json
import sys
import uuid
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from app.accounts.principal import READ, WRITE, Principal
from app.errors import AppError, ValidationFailed
from app.identity import validate_name
from app.mem0compat.mapping import APP_ID_KEY
from app.memories import repository
from app.memories.models import MemoryRecord
from app.memories.schemas import MAX_END_USER, MAX_TAGS
from app.memories.service import MemoryService
from app.settings import Settings
from app.text import check_metadata, check_text

SOURCES = ("mem0", "mem0-platform")
BATCH = 100
# Every memory the platform holds names at least one entity; its get_all needs a filter that says so.
ANY_ENTITY = {"OR": [{"user_id": "*"}, {"agent_id": "*"}, {"app_id": "*"}, {"run_id": "*"}]}


@dataclass
class Summary:
    imported: int = 0
    skipped: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)  # (which memory, why)

    def lines(self) -> list[str]:
        head = f"imported {self.imported}, skipped {self.skipped} (already present), refused {len(self.refused)}"
        return [head, *(f"refused {which}: {why}" for which, why in self.refused)]


class Refused(ValueError):
    """One memory of the source that cannot be stored as it is; the message says why."""


# --- reading the sources ----------------------------------------------------------------------------------------


def read_file(path: Path) -> list[dict[str, Any]]:
    """The memories of a Mem0 get_all output or export (JSON or JSONL), or of an OpenMemory export zip."""
    if not path.is_file():
        raise ValidationFailed(f"no file {path}")
    if zipfile.is_zipfile(path):
        return _openmemory(path)
    text = path.read_text(encoding="utf-8")
    try:
        return _memories_of(json.loads(text))
    except json.JSONDecodeError:
        pass
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValidationFailed(f"{path}:{number} is neither JSON nor a JSONL line: {exc.msg}") from None
    return _memories_of(rows)


def _memories_of(data: Any) -> list[dict[str, Any]]:
    """A list of memories, a get_all page (``results``) or an export (``memories`` or one list of objects)."""
    if isinstance(data, Mapping):
        for key in ("results", "memories"):
            if isinstance(data.get(key), list):
                return _memories_of(data[key])
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) == 1:
            return _memories_of(lists[0])
        raise ValidationFailed("the file holds no list of memories (results, memories, or one list of objects)")
    if not isinstance(data, list) or not all(isinstance(m, Mapping) for m in data):
        raise ValidationFailed("the file holds no list of memory objects")
    return [dict(m) for m in data]


def _openmemory(path: Path) -> list[dict[str, Any]]:
    """OpenMemory's export zip: memories.jsonl.gz (one memory a line) and memories.json (user, apps, categories)."""
    with zipfile.ZipFile(path) as archive:
        names = {name.rsplit("/", 1)[-1]: name for name in archive.namelist() if not name.endswith("/")}
        if "memories.json" not in names:
            raise ValidationFailed(f"{path} is a zip without memories.json: not an OpenMemory export")
        relational = json.loads(archive.read(names["memories.json"]))
        logical = archive.read(names["memories.jsonl.gz"]) if "memories.jsonl.gz" in names else None
    end_user = (relational.get("user") or {}).get("user_id")
    apps = {a.get("id"): a.get("name") for a in relational.get("apps") or []}
    categories = {c.get("id"): c.get("name") for c in relational.get("categories") or []}
    if logical is not None:
        with gzip.GzipFile(fileobj=io.BytesIO(logical)) as lines:
            rows = [json.loads(line) for line in lines if line.strip()]
        return [{**row, "user_id": end_user, "app_id": row.get("app")} for row in rows]
    return [
        {
            **row,
            "user_id": end_user,
            "app_id": apps.get(row.get("app_id")),
            "categories": [categories[c] for c in row.get("category_ids") or [] if c in categories],
        }
        for row in relational.get("memories") or []
    ]


def read_platform(api_key: str, host: str | None, *, page_size: int = BATCH) -> Iterator[dict[str, Any]]:
    """Every memory of a Mem0 Platform project, a page at a time, through Mem0's own client."""
    from mem0 import MemoryClient

    client = MemoryClient(api_key=api_key, host=host)
    try:
        page = 1
        while True:
            answer = client.get_all(filters=ANY_ENTITY, page=page, page_size=page_size)
            results = answer.get("results", []) if isinstance(answer, Mapping) else answer
            yield from results
            if not isinstance(answer, Mapping) or not answer.get("next") or not results:
                return
            page += 1
    finally:
        client.client.close()


# --- one memory -------------------------------------------------------------------------------------------------


def _time(value: Any, name: str) -> datetime | None:
    if value in (None, ""):
        return None
    try:
        when = (
            datetime.fromtimestamp(value, UTC)
            if isinstance(value, int | float)
            else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        )
    except (ValueError, OverflowError, OSError):
        raise Refused(f"{name} {value!r} is not a date") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _name(value: Any, key: str, part: str) -> str | None:
    if value in (None, ""):
        return None
    try:
        return validate_name(str(value), part)
    except AppError as exc:
        raise Refused(f"{key}: {exc.message}") from None


def to_record(raw: Mapping[str, Any], user_id: str, max_chars: int) -> MemoryRecord:
    """One Mem0 (or OpenMemory) memory as an Engram record of ``user_id``; Refused says what cannot be kept."""
    memory_id = str(raw.get("id") or "")
    try:
        memory_id = str(uuid.UUID(memory_id))
    except ValueError:
        raise Refused(f"id {memory_id!r} is not a UUID") from None
    state = raw.get("state")
    if state not in (None, "active"):
        raise Refused(f"its state is {state!r}; only active memories are imported")
    data = raw.get("data")
    text = raw.get("memory") or raw.get("content") or raw.get("text") or (data or {}).get("memory")
    if not isinstance(text, str) or not text.strip():
        raise Refused("it has no text")
    if len(text) > max_chars:
        raise Refused(f"its text is {len(text)} characters; the limit is {max_chars}")
    end_user = raw.get("user_id")
    if end_user is not None and (not isinstance(end_user, str) or not end_user or len(end_user) > MAX_END_USER):
        raise Refused(f"user_id must be text of at most {MAX_END_USER} characters")
    metadata = dict(raw.get("metadata") or {})
    app_id = raw.get("app_id")
    if app_id:
        metadata[APP_ID_KEY] = str(app_id)
    categories = raw.get("categories") or []
    if not isinstance(categories, list) or not all(isinstance(c, str) and 0 < len(c) <= 64 for c in categories):
        raise Refused("categories must be a list of names of 1-64 characters")
    tags = list(dict.fromkeys(categories))
    if len(tags) > MAX_TAGS:
        raise Refused(f"it has {len(tags)} categories; Engram keeps at most {MAX_TAGS}")
    try:
        check_text(text, "memory")
        check_metadata(metadata)
        for tag in tags:
            check_text(tag, "categories")
    except AppError as exc:
        raise Refused(exc.message) from None
    created = _time(raw.get("created_at"), "created_at") or datetime.now(UTC)
    updated = _time(raw.get("updated_at"), "updated_at") or created
    return MemoryRecord(
        id=memory_id,
        user_id=user_id,
        session=_name(raw.get("run_id"), "run_id", "session"),
        agent=_name(raw.get("agent_id"), "agent_id", "agent"),
        end_user=end_user,
        scope="user",
        visibility="user",
        role=None,
        content=text,
        tags=tags,
        metadata_=metadata,
        created_at=created,
        updated_at=updated,
    )


# --- storing ----------------------------------------------------------------------------------------------------


Progress = Callable[[int, int], None]


async def import_mem0(
    memories: MemoryService,
    user_id: str,
    source: Iterable[Mapping[str, Any]],
    *,
    batch_size: int = BATCH,
    progress: Progress | None = None,
) -> Summary:
    """Import Mem0 memories into the account ``user_id``: each batch all or none; ids it has already are skipped."""
    principal = Principal(user_id=user_id, scopes=frozenset({READ, WRITE}), key_id=None, via="import")
    rows = list(source)
    summary = Summary()
    seen: set[str] = set()
    for start in range(0, len(rows), batch_size):
        batch: list[MemoryRecord] = []
        for offset, raw in enumerate(rows[start : start + batch_size]):
            which = str(raw.get("id") or f"#{start + offset + 1}")
            try:
                record = to_record(raw, user_id, memories.limits.max_memory_chars)
            except Refused as exc:
                summary.refused.append((which, str(exc)))
                continue
            if record.id in seen:
                summary.skipped += 1  # the same memory twice in one source
                continue
            seen.add(record.id)
            batch.append(record)
        async with memories.db.session() as session:
            owners = await repository.existing_ids(session, [r.id for r in batch])
        for record in [r for r in batch if owners.get(r.id, user_id) != user_id]:
            summary.refused.append((record.id, "another account holds a memory with this id"))
        batch = [r for r in batch if owners.get(r.id, user_id) == user_id]
        try:
            stored, present = await memories.import_records(principal, batch) if batch else ([], [])
        except AppError as exc:  # all or none: the whole batch is refused, with the reason
            summary.refused.extend((r.id, exc.message) for r in batch)
        else:
            summary.imported += len(stored)
            summary.skipped += len(present)
        if progress is not None:
            progress(min(start + batch_size, len(rows)), len(rows))
    return summary


def progress_bar(stream: TextIO) -> Progress | None:
    """A bar on a terminal; nothing when the output goes elsewhere."""
    if not stream.isatty():
        return None

    def show(done: int, total: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        stream.write(f"\rimporting [{'#' * filled}{' ' * (width - filled)}] {done}/{total}")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return show


# --- the command ------------------------------------------------------------------------------------------------


def register(commands: Any) -> None:
    """Add ``engram import --from mem0|mem0-platform`` to the ``engram`` parser."""
    parser = commands.add_parser(
        "import", help="move memories in: a Mem0 get_all/export file or OpenMemory zip, or a Mem0 Platform project"
    )
    add_arguments(parser)
    parser.set_defaults(run=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE", help="with --from mem0: JSON, JSONL or OpenMemory zip")
    parser.add_argument("--from", dest="source", choices=SOURCES, required=True, help="where the memories come from")
    parser.add_argument("--user", required=True, metavar="USER_ID", help="the Engram account to import into")
    parser.add_argument("--api-key", help="with --from mem0-platform: the Mem0 API key")
    parser.add_argument("--host", help="with --from mem0-platform: the platform's URL (default Mem0's)")
    parser.add_argument("--batch-size", type=int, default=BATCH, help="memories stored all or none together")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """The command: read the source, import, print the summary (reasons for each refusal)."""
    if args.source == "mem0":
        if not args.file:
            raise ValidationFailed("--from mem0 needs FILE")
        source: Iterable[Mapping[str, Any]] = read_file(Path(args.file))
    else:
        if not args.api_key:
            raise ValidationFailed("--from mem0-platform needs --api-key")
        source = list(read_platform(args.api_key, args.host))
    if not 1 <= args.batch_size <= 1000:
        raise ValidationFailed("--batch-size must be between 1 and 1000")
    summary = asyncio.run(_import(settings, args.user, source, args.batch_size))
    for line in summary.lines():
        print(line)
    return 0 if not summary.refused else 1


async def _import(settings: Settings, user_id: str, source: Iterable[Mapping[str, Any]], batch_size: int) -> Summary:
    from app.accounts import repository as accounts
    from app.assembly import build_container, close_container

    container = await build_container(settings)
    try:
        async with container.db.session() as session:
            if await accounts.get_user(session, user_id) is None:
                raise ValidationFailed(f"no Engram user {user_id}")
        return await import_mem0(
            container.memories, user_id, source, batch_size=batch_size, progress=progress_bar(sys.stderr)
        )
    finally:
        await close_container(container)
