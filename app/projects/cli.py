"""``engram projects add|list|remove`` and ``engram index``: registered folders, and indexing local or remote."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from app.cli_output import add_format_option, print_rows
from app.cli_parser import sub_commands
from app.errors import AppError, ValidationFailed

if TYPE_CHECKING:
    from app.settings import Settings

T = TypeVar("T")

# After a file event, wait this long for the burst to settle before sending (remote --watch).
SETTLE_SECONDS = 0.3


def describe(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``engram projects`` (app.cli lists the command)."""
    projects = sub_commands(parser, dest="action", required=True, help="what to do with projects")
    add = projects.add_parser("add", help="register a folder, indexed into the session NAME of a user")
    add.add_argument("name", metavar="NAME", help="the project's name, and the session its files are indexed into")
    add.add_argument("path", metavar="PATH", help="the folder")
    _globs(add)
    add.add_argument("--user", required=True, metavar="USER_ID", help="the user whose session it is indexed into")
    add.set_defaults(run=_add)
    listing = projects.add_parser("list", help="registered projects: name, path, user, files, chunks, last_indexed")
    add_format_option(listing)
    listing.set_defaults(run=_list, brief=True)
    remove = projects.add_parser(
        "remove",
        help="forget a project: its folder is no longer watched or indexed; what it indexed stays in the session",
    )
    remove.add_argument("name", metavar="NAME", help="the project to forget")
    remove.add_argument(
        "--user", metavar="USER_ID", help="the project's user, needed only when several users have one named so"
    )
    remove.set_defaults(run=_remove)


def describe_index(index: argparse.ArgumentParser) -> None:
    """The arguments of ``engram index``."""
    index.add_argument(
        "target", metavar="NAME|PATH", help="a registered project's name, or (with --url) a folder to send"
    )
    index.add_argument(
        "--user", metavar="USER_ID", help="the project's user, needed only when several users have one named so"
    )
    index.add_argument("--url", help="a remote Engram to index the folder PATH into (default: a registered project)")
    index.add_argument("--key", help="an API key of that Engram (write scope)")
    index.add_argument("--session", help="the session to index into (remote)")
    index.add_argument("--watch", action="store_true", help="keep sending changes until stopped (remote)")
    _globs(index)
    # The local path checks the database itself: with --url no local database is needed at all.
    index.set_defaults(run=_index, needs_database=False)


def _globs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pattern", action="extend", nargs="+", default=[], metavar="GLOB", help="files to index (default: docs)"
    )
    parser.add_argument("--exclude", action="extend", nargs="+", default=[], metavar="GLOB", help="more to leave out")


def _run(work: Coroutine[Any, Any, T]) -> T:
    import asyncio  # here, not above: describing the commands (for --help too) needs no event loop

    return asyncio.run(work)


def _print(report: dict[str, Any]) -> None:
    print(json.dumps(report, ensure_ascii=False), flush=True)


def _add(args: argparse.Namespace, settings: Settings) -> int:
    from app.db import Database
    from app.projects.control import ask
    from app.projects.registry import register

    async def work() -> dict[str, Any]:
        db = Database(settings.resolved_database_url)
        try:
            project = await register(db, args.user, args.name, args.path, args.pattern, args.exclude)
        finally:
            await db.dispose()
        return project.as_json()

    project = _run(work())
    try:
        ask(settings.data_dir, {"op": "reload"}, timeout=30)  # a running server starts watching it now
    except (OSError, ValueError):
        print("warning: the running server did not take the new project; it will at its next reload", file=sys.stderr)
    _print(project)
    return 0


def _list(args: argparse.Namespace, settings: Settings) -> int:
    from app.db import Database
    from app.projects.registry import listing

    async def work() -> list[dict[str, Any]]:
        db = Database(settings.resolved_database_url)
        try:
            return [p.as_json(rules=False) for p in await listing(db)]
        finally:
            await db.dispose()

    columns = ("name", "path", "user", "files", "chunks", "last_indexed")
    print_rows(_run(work()), args.format, columns)
    return 0


def _remove(args: argparse.Namespace, settings: Settings) -> int:
    from app.db import Database
    from app.projects.control import ask
    from app.projects.registry import unregister

    async def work() -> dict[str, Any]:
        db = Database(settings.resolved_database_url)
        try:
            project = await unregister(db, args.name, args.user)
        finally:
            await db.dispose()
        return project.as_json(rules=False)

    project = _run(work())
    try:
        ask(settings.data_dir, {"op": "reload"}, timeout=30)  # a running server stops watching it now
    except (OSError, ValueError):
        print("warning: the running server still watches the folder until its next reload", file=sys.stderr)
    _print(project)
    if project["files"]:
        print(
            f"its {project['files']} indexed files ({project['chunks']} memories) stay in session {project['name']}; "
            f"DELETE /v1/sessions/{project['name']}/documents?path=... removes them",
            file=sys.stderr,
        )
    return 0


def _index(args: argparse.Namespace, settings: Settings) -> int:
    if args.url:
        return _index_remote(args)
    for flag in ("key", "session", "pattern", "exclude"):
        if getattr(args, flag):
            raise ValidationFailed(f"--{flag} goes with --url; a registered project keeps its own settings")
    if args.watch:
        raise ValidationFailed("--watch goes with --url; `engram serve` watches registered projects itself")
    if _looks_like_a_folder(args.target):
        raise ValidationFailed(
            f"{args.target} is a folder, not a registered project: register it with `engram projects add NAME "
            f"{args.target} --user USER_ID` and run `engram index NAME`, or index it into a remote Engram with "
            "`--url URL --key KEY --session NAME`"
        )
    from app.cli_problems import missing_database

    missing = missing_database(settings)
    if missing is not None:
        raise AppError(missing)
    _print(_index_local(args.target, args.user, settings))
    return 0


def _looks_like_a_folder(target: str) -> bool:
    """A project name never holds a slash or starts with a dot or ~ (app.identity); a path often does."""
    return "/" in target or target.startswith((".", "~")) or Path(target).is_dir()


def _index_local(name: str, user_id: str | None, settings: Settings) -> dict[str, Any]:
    """Ask the running server to reconcile; without one, open the data dir and do it here."""
    from app.projects.control import ask

    answer = ask(settings.data_dir, {"op": "index", "project": name, "user": user_id}, timeout=None)
    if answer is not None:
        if not answer.get("ok"):
            error = answer.get("error") or {}
            raise AppError(str(error.get("message") or "the running server refused"))
        report: dict[str, Any] = answer["report"]
        report.pop("files", None)
        return report

    from app.assembly import build_container, close_container
    from app.db import Database
    from app.memories.engine import IndexInUse
    from app.projects.registry import find

    async def known() -> None:
        db = Database(settings.resolved_database_url)
        try:
            await find(db, name, user_id)
        finally:
            await db.dispose()

    _run(known())  # an unknown or ambiguous name is answered before the engine starts

    async def work() -> dict[str, Any]:
        try:
            container = await build_container(settings)
        except IndexInUse as exc:
            raise IndexInUse(
                f"{exc.message}, by a server that does not answer on its control socket; index through it or stop it"
            ) from exc
        try:
            project = await container.projects.find(name, user_id)
            done = await container.projects.reconcile(project)
        finally:
            await close_container(container)
        return done.model_dump(mode="json", exclude={"files"})

    return _run(work())


def _index_remote(args: argparse.Namespace) -> int:
    from app.projects.remote import RemoteError, Target, client, rules_for_folder, sync

    if not args.key or not args.session:
        raise ValidationFailed("--url needs --key and --session")
    if args.user:
        raise ValidationFailed("--user is for registered projects; a remote index acts as the key's user")
    root = Path(args.target).expanduser()
    if not root.is_dir():
        raise ValidationFailed(f"{args.target} is not a folder")
    rules = rules_for_folder(root.resolve(), args.pattern, args.exclude)
    target = Target(args.url, args.key, args.session)
    with client(target) as http:

        def once() -> dict[str, Any]:
            try:
                return sync(rules, target, http).model_dump(mode="json", exclude={"files"})
            except RemoteError as exc:
                raise AppError(str(exc)) from None

        if args.watch:
            _watch(rules, once)
        else:
            _print(once())
    return 0


def _watch(rules: Any, run: Any) -> None:
    """Run ``run`` now, then after every burst of file events under the folder, until SIGINT or SIGTERM.

    The folder is watched before the first run, so a change made while it runs is sent by the next one."""
    import signal
    import threading
    import time

    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    changed = threading.Event()
    stopping = threading.Event()

    class Events(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            if event.event_type not in ("opened", "closed_no_write") and "/.git/" not in str(event.src_path) + "/":
                changed.set()

    def stop(*_: Any) -> None:
        stopping.set()
        changed.set()

    previous = signal.signal(signal.SIGTERM, stop)
    observer = Observer()
    observer.daemon = True
    observer.schedule(Events(), str(rules.root), recursive=True)
    observer.start()
    try:
        _print(run())  # the first pass: its failure (a bad key, say) ends the command
        while not stopping.is_set():
            if not changed.wait(timeout=1.0):
                continue
            time.sleep(SETTLE_SECONDS)
            changed.clear()
            if stopping.is_set():
                break
            rules.forget_gitignores()
            try:
                report = run()
            except AppError as exc:  # the server away for a while: say so and keep watching
                print(f"error: {exc.message}", file=sys.stderr, flush=True)
                continue
            if report["added"] or report["changed"] or report["removed"] or report["skipped"]:
                _print(report)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        observer.stop()
        observer.join(timeout=10)
