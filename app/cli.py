"""The ``engram`` command: serve, migrate, users, keys, oauth clients, sync (clients, link, status, once, unlink),
reindex, projects, index, export, import.

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
    import socket

    from app.settings import Settings

KEEP_ALIVE_SECONDS = 75


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    import contextlib

    import uvicorn

    from app.gc_tuning import tune_for_serving
    from app.main import create_app
    from app.migrate import behind_head
    from app.observability.logs import configure_logging

    settings.ensure_data_dir()
    problem = behind_head(settings.resolved_database_url)
    if problem is not None:
        print(f"engram serve: {problem}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    flags = {name: value for name, value in (("host", args.host), ("port", args.port)) if value is not None}
    # Same as ENGRAM_HOST / ENGRAM_PORT: the advertised URL follows them unless ENGRAM_PUBLIC_BASE_URL is set.
    settings = settings.replace(**flags)
    app = create_app(settings)
    app.on_startup.append(tune_for_serving)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        # Our handler formats uvicorn's error log too; the access log is ours (app.observability.middleware).
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
        # The app decides whose forwarded headers to believe (app.client_address, ENGRAM_TRUSTED_PROXIES).
        proxy_headers=False,
        # Longer than any client's own idle timeout (httpx 5 s, Node 4-5 s, proxies 60 s): the client closes an idle
        # connection first, never the server in the instant a request is sent on it (a lost request, unretried).
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    server = uvicorn.Server(config)
    sockets = [_reusable_socket(settings.host, settings.port)] if settings.reuse_port else None
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: Ctrl-C after a graceful shutdown is no error
        server.run(sockets=sockets)
    return 0 if server.started else 3  # as uvicorn.run: the app's start-up failed


def _reusable_socket(host: str, port: int) -> socket.socket:
    """A listening socket other processes may bind too (SO_REUSEPORT): the kernel spreads connections over them."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


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

    from app.main import build_container, close_container
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
    commands.add_parser("sync", help="edge sync", describe=described_later("app.sync.commands", "describe"))
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
    from app.sync.commands import glue_option_values

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
