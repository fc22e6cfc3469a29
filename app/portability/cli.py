"""``engram export``, ``engram import`` and ``engram users delete``: an account's data out, in, and erased.

Parsing imports only the standard library (simple commands start fast, tests/test_cli.py); each command imports what
it needs when it runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from app.errors import AppError, NotFound, ValidationFailed

if TYPE_CHECKING:
    from app.settings import Settings

# The formats ``engram import --from`` reads: each names the function that imports a file of it.
ImportRunner = Callable[[argparse.Namespace, "Settings"], int]


def describe_export(export: argparse.ArgumentParser) -> None:
    """The arguments of ``engram export`` (app.cli lists the commands, with their help)."""
    export.add_argument("--user", required=True, metavar="USER_ID", help="whose data")
    export.add_argument("--session", help="only this session's memories, documents, messages and tasks")
    export.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    export.add_argument(
        "--vectors", action="store_true", help="add each memory's dense vector (needs the index: stop the server)"
    )
    export.set_defaults(run=_export)


def describe_import(importing: argparse.ArgumentParser) -> None:
    """The arguments of ``engram import``."""
    importing.add_argument(
        "file", nargs="?", metavar="FILE", help="the file to read ('-' for stdin); none with --from mem0-platform"
    )
    importing.add_argument("--user", required=True, metavar="USER_ID", help="the existing user to import into")
    importing.add_argument(
        "--from",
        dest="source",
        default="engram",
        choices=list(IMPORTERS),
        help="engram: what `engram export` writes; mem0: a Mem0 get_all/export file or OpenMemory zip; "
        "mem0-platform: a Mem0 Platform project",
    )
    # Mem0's own options (app.mem0compat.importer reads them).
    importing.add_argument("--api-key", help="with --from mem0-platform: the Mem0 API key")
    importing.add_argument("--host", help="with --from mem0-platform: the platform's URL (default Mem0's)")
    importing.add_argument(
        "--batch-size", type=int, default=100, help="with --from mem0 or mem0-platform: memories stored all or none"
    )
    importing.set_defaults(run=_import)


def describe_users_delete(delete: argparse.ArgumentParser) -> None:
    """The arguments of ``engram users delete``."""
    delete.add_argument("user_id", metavar="USER_ID", help="the user to delete")
    delete.add_argument("--yes", action="store_true", help="yes, erase this account (it cannot be undone)")
    delete.set_defaults(run=_users_delete)


def _export(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from app.identity import validate_name

    if args.session is not None:
        validate_name(args.session, "session")
    if not args.output:
        return asyncio.run(_export_to(args, settings, sys.stdout))
    with Path(args.output).open("w", encoding="utf-8") as out:
        return asyncio.run(_export_to(args, settings, out))


async def _export_to(args: argparse.Namespace, settings: Settings, out: IO[str]) -> int:
    from app.accounts.service import require_user
    from app.db import Database
    from app.memories.embedder import OnnxMiniLMEmbedder
    from app.portability.export import export_lines

    if args.vectors:
        container = await _open_container(settings)
        try:
            async with container.db.session() as session:
                await require_user(session, args.user)
            from app.portability import service

            async for line in service.export(container, args.user, session=args.session, vectors=True):
                out.write(line + "\n")
        finally:
            await _close_container(container)
        return 0
    # Without vectors the database is enough: no model, no index, and a running server is no obstacle.
    db = Database(settings.resolved_database_url)
    try:
        async with db.session() as session:
            await require_user(session, args.user)
        lines = export_lines(
            db, args.user, model=OnnxMiniLMEmbedder.model_id, dims=OnnxMiniLMEmbedder.dims, session=args.session
        )
        async for line in lines:
            out.write(line + "\n")
    finally:
        await db.dispose()
    return 0


def _import(args: argparse.Namespace, settings: Settings) -> int:
    return IMPORTERS[args.source](args, settings)


def _import_engram(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from app.portability.importer import parse

    if not args.file:
        raise ValidationFailed("engram import needs FILE (the export to read, or '-' for stdin)")
    if args.file == "-":
        parsed = parse(sys.stdin)
    else:
        path = Path(args.file)
        if not path.is_file():
            raise ValidationFailed(f"{args.file}: no such file")
        with path.open(encoding="utf-8", errors="strict") as handle:
            try:
                parsed = parse(handle)
            except UnicodeDecodeError as exc:
                raise ValidationFailed(f"{args.file} is not UTF-8 ({exc.reason})") from None
    summary = asyncio.run(_import_parsed(args.user, parsed, settings))
    print(json.dumps(summary), flush=True)
    # As `--from mem0` does: a script that imports must not read a partial import as done.
    return 1 if summary["refused"] else 0


async def _import_parsed(user_id: str, parsed: Any, settings: Settings) -> dict[str, Any]:
    from app.accounts.service import require_user
    from app.portability import service

    container = await _open_container(settings)
    try:
        async with container.db.session() as session:
            await require_user(session, user_id)
        bar = ProgressBar(sys.stderr)
        summary = await service.import_into(container, user_id, parsed, bar.update)
        bar.close()
    finally:
        await _close_container(container)
    return summary.as_json()


def _import_mem0(args: argparse.Namespace, settings: Settings) -> int:
    from app.mem0compat.importer import run

    return run(args, settings)


# Where each format of ``engram import --from NAME`` is read (imported only when that format is asked for).
IMPORTERS: dict[str, ImportRunner] = {"engram": _import_engram, "mem0": _import_mem0, "mem0-platform": _import_mem0}


def _users_delete(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    if not args.yes:
        from app.accounts import repository
        from app.cli_database import run_with_db

        async def warn(db: Any) -> int:
            async with db.session() as session:
                if await repository.get_user(session, args.user_id) is None:
                    raise NotFound(f"no user {args.user_id}")
            print(
                f"engram users delete: this erases {args.user_id} and everything of theirs for good; "
                "run it again with --yes to do it",
                file=sys.stderr,
            )
            return 2

        return run_with_db(settings, warn)

    from app.projects.control import ask

    # A running server of this data dir erases it with its own index and coordination.
    answer = ask(settings.data_dir, {"op": "delete_account", "user": args.user_id}, timeout=300)
    if answer is not None:
        if not answer.get("ok"):
            error = answer.get("error") or {}
            raise AppError(str(error.get("message") or "the running server refused"))
        print(json.dumps(answer["erased"]))
        return 0

    async def work() -> dict[str, object]:
        from app.memories.engine import IndexInUse
        from app.portability import service

        try:
            container = await _open_container(settings)
        except IndexInUse:
            return (await _delete_beside_a_server(settings, args.user_id)).as_json()
        try:
            erased = await service.delete(container, args.user_id)
        finally:
            await _close_container(container)
        return erased.as_json()

    print(json.dumps(asyncio.run(work())))
    return 0


async def _delete_beside_a_server(settings: Settings, user_id: str) -> Any:
    """Another process holds the embedded index and answers no control socket: erase the database (and Redis's
    coordination); that index drops the account's points at its next start (repair removes points no row backs)."""
    from app.cli_database import command_database
    from app.coordination import create_coordination
    from app.portability.erase import delete_account

    async with command_database(settings) as (db, revocations):
        coordination = create_coordination(settings.redis_url)
        try:
            erased = await delete_account(db, None, coordination, user_id, revocations.announce)
        finally:
            await coordination.close()
    print(
        "warning: a running server holds the index; it drops this account's vectors at its next start "
        "(or stop it and run `engram reindex`)",
        file=sys.stderr,
    )
    return erased


async def _open_container(settings: Settings) -> Any:
    from app.assembly import build_container
    from app.memories.engine import IndexInUse

    try:
        return await build_container(settings)
    except IndexInUse as exc:
        raise IndexInUse(
            f"{exc.message}, probably by a running server; stop the server first, or use its REST API "
            "(GET /v1/export?vectors=true, POST /v1/import), or a Qdrant server (ENGRAM_QDRANT_URL)"
        ) from exc


async def _close_container(container: Any) -> None:
    from app.assembly import close_container

    await close_container(container)


class ProgressBar:
    """A one-line bar on a terminal (stderr); nothing when stderr is not one."""

    WIDTH = 30

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.shown = stream.isatty()

    def update(self, done: int, total: int) -> None:
        if not self.shown or total <= 0:
            return
        filled = self.WIDTH * done // total
        self.stream.write(f"\rimporting [{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total}")
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
