"""The ``engram`` command: main, and the list of commands. Each capability describes and runs its own: users and keys
(app.accounts.cli), oauth clients (app.oauth.cli), sync (app.sync.cli: clients, link, status, once, unlink),
projects and index (app.projects.cli), export, import and users delete (app.portability.cli); serve (app.serve),
migrate and reindex are here.

Simple commands must start fast (tests/test_cli.py guards it): this module and the parser import only the standard
library and small modules of ours. Each command imports what it needs (the database, the model, mem0, the stores,
the web app) when it runs.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

os.environ.setdefault("MEM0_TELEMETRY", "False")

from app.cli_parser import Parser, Version, describe_all, described_later, sub_commands
from app.cli_problems import database_place, database_problem, missing_database
from app.errors import AppError

if TYPE_CHECKING:
    from app.settings import Settings


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from app.serve import serve

    return serve(settings, host=args.host, port=args.port)


def _migrate(_: argparse.Namespace, settings: Settings) -> int:
    from app.migrate import current_revision, head_revision, upgrade_to_head

    settings.ensure_data_dir()
    url = settings.resolved_database_url
    where = database_place(settings)
    before = current_revision(url)
    head = head_revision(url)
    if before == head:
        print(f"{where} is already at the newest revision, {head}", file=sys.stderr)
        return 0
    upgrade_to_head(url)
    start = "an empty database" if before is None else f"revision {before}"
    print(f"migrated {where} from {start} to {head}, the newest revision", file=sys.stderr)
    return 0


def _reindex(_: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from app.assembly import build_container, close_container
    from app.memories.engine import IndexInUse

    async def work() -> int:
        try:
            container = await build_container(settings)
        except IndexInUse as exc:
            # Refused before anything was read or written: the running server's index is untouched.
            raise IndexInUse(
                f"{exc.message}, probably by a running server; "
                "stop the server first, or run reindex against a Qdrant server (ENGRAM_QDRANT_URL)"
            ) from exc
        try:
            total = await container.memories.reindex()
        finally:
            await close_container(container)
        print(f"reindexed {total} memories into {container.engine.backend}")
        return 0

    return asyncio.run(work())


def build_parser(*, lazily: bool = False) -> argparse.ArgumentParser:
    """The ``engram`` parser. ``lazily``: each command's arguments are added when the command line names it (how
    main parses); else every command's at once (to read the whole parser)."""
    parser = Parser(
        prog="engram",
        description="Engram: hosted memory for AI coding agents.",
        epilog="Data: ENGRAM_DATA_DIR, else data_dir in ./engram.toml or ~/.config/engram/engram.toml, "
        "else ~/.local/share/engram.",
    )
    parser.add_argument("--version", action=Version, help="print the version and exit")
    # Every command opens the database unless it says otherwise (a check first, so a missing one is one clear line),
    # and collects garbage unless it says it is brief (see main).
    parser.set_defaults(needs_database=True, brief=False)
    commands = sub_commands(
        parser, dest="command", required=True, metavar="COMMAND", help="what to do (`engram COMMAND --help` tells more)"
    )

    serve = commands.add_parser("serve", help="run the HTTP server")
    serve.add_argument("--host", help="the address to listen on (default: ENGRAM_HOST, else 127.0.0.1)")
    serve.add_argument("--port", type=int, help="the port to listen on (default: ENGRAM_PORT, else 8000)")
    serve.set_defaults(run=_serve, needs_database=False)

    migrate = commands.add_parser("migrate", help="create the database, or bring it to the newest revision")
    migrate.set_defaults(run=_migrate, needs_database=False)
    commands.add_parser("reindex", help="rebuild the vector index from the database").set_defaults(run=_reindex)
    commands.add_parser("users", help="manage users", describe=described_later("app.accounts.cli", "describe_users"))
    commands.add_parser("keys", help="manage API keys", describe=described_later("app.accounts.cli", "describe_keys"))
    commands.add_parser("oauth", help="manage OAuth clients", describe=described_later("app.oauth.cli", "describe"))
    commands.add_parser("sync", help="edge sync", describe=described_later("app.sync.cli", "describe"))
    commands.add_parser(
        "projects", help="folders indexed into a session", describe=described_later("app.projects.cli", "describe")
    )
    commands.add_parser(
        "index",
        help="reconcile a registered project now (NAME), or index a folder into a remote Engram (PATH --url ...)",
        describe=described_later("app.projects.cli", "describe_index"),
    )
    commands.add_parser(
        "export",
        help="write a user's data as engram-export JSONL (to stdout by default)",
        describe=described_later("app.portability.cli", "describe_export"),
    )
    commands.add_parser(
        "import",
        help="import an export into an existing user; prints a JSON summary {imported, skipped, refused} last",
        describe=described_later("app.portability.cli", "describe_import"),
    )
    return parser if lazily else describe_all(parser)


def _quiet_logging(settings: Settings) -> None:
    """Commands print their own result; libraries' warnings and above still reach stderr, formatted as the server's."""
    from app.observability.logs import configure_logging

    configure_logging(settings.log_format, "warning" if settings.log_level.lower() == "info" else settings.log_level)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command, as the process's entry point: the process ends after it (a brief command leaves the garbage
    collector off)."""
    # Start-up makes some 100,000 objects that live until the process ends (SQLAlchemy's import alone): the
    # collector's passes over them free nothing, and cost a simple command a sixth of its CPU, a last full pass at exit
    # included. So it is off until the command is known, and stays off for a brief one (a few queries, then exit, which
    # skips that last pass); any other command gets it back at once.
    collecting = gc.isenabled()
    gc.disable()
    from app.sync.cli import glue_option_values

    args = build_parser(lazily=True).parse_args(glue_option_values(sys.argv[1:] if argv is None else argv))
    if collecting and not args.brief:
        gc.enable()
    from app.settings import get_settings

    try:
        settings = get_settings()
    except ValueError as exc:
        print(f"error: invalid settings: {exc}", file=sys.stderr)
        return 2
    if args.run is not _serve:  # serve sets up its own (request logs at info)
        _quiet_logging(settings)
    try:
        missing = missing_database(settings) if args.needs_database else None
        if missing is not None:
            raise AppError(missing)
        code: int = args.run(args, settings)
    except AppError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except Exception as exc:
        problem = database_problem(exc, settings)
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
