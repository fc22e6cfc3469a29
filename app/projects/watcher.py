"""Keep every registered project indexed while the server runs: reconcile at start-up, then follow file events.

watchdog's observer thread only notes which paths moved; one task on the event loop does the indexing, after a
short pause that lets a burst of events (an editor's save, a git checkout) settle. A file event re-indexes just
that file; a folder event or a changed .gitignore reconciles the whole project, which reads only what changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

from app.projects.models import Project
from app.projects.service import ProjectService, rules_for
from app.projects.walker import Rules

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (user id, project name)


@dataclass
class _Pending:
    paths: set[str] = field(default_factory=set)
    everything: bool = False


@dataclass
class _Watched:
    project: Project
    rules: Rules
    root: str
    watch: ObservedWatch | None = None


class _Events(FileSystemEventHandler):
    """Runs on watchdog's thread: hands each event to the loop, nothing more."""

    def __init__(self, watcher: ProjectWatcher, key: Key) -> None:
        self.watcher = watcher
        self.key = key

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        self.watcher.loop.call_soon_threadsafe(self.watcher.note, self.key, event)


class ProjectWatcher:
    """Owns the observer and the indexing task; ``refresh`` picks up projects registered or removed since."""

    def __init__(self, projects: ProjectService, *, settle_seconds: float = 0.25, poll_seconds: float = 10.0) -> None:
        self.projects = projects
        self.settle_seconds = settle_seconds
        self.poll_seconds = poll_seconds
        self.loop = asyncio.get_running_loop()
        self._observer: BaseObserver | None = None
        self._watched: dict[Key, _Watched] = {}
        self._pending: dict[Key, _Pending] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # The timed refresh reads the projects again only once something was committed.
        self._commits = projects.db.commits.watch()

    async def start(self) -> None:
        """Start watching; every project is reconciled first (what changed while the server was down)."""
        self._observer = Observer()
        self._observer.daemon = True
        self._observer.start()
        await self.refresh()
        self._task = asyncio.create_task(self._run(), name="engram-project-watcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._observer is not None:
            observer = self._observer
            self._observer = None
            observer.stop()
            await asyncio.to_thread(observer.join, 10)

    async def refresh(self) -> None:
        """Watch projects registered since the last look (reconciling each), forget removed ones."""
        projects = {(p.user_id, p.name): p for p in await self.projects.projects()}
        for key in set(self._watched) - set(projects):
            self._unwatch(key)
        for key, project in projects.items():
            known = self._watched.get(key)
            if known is not None and known.project.path == project.path:
                known.project = project
                continue
            if known is not None:
                self._unwatch(key)
            self._watch(key, project)
            self._pending.setdefault(key, _Pending()).everything = True
        if self._pending:
            self._wake.set()

    def note(self, key: Key, event: FileSystemEvent) -> None:
        """On the loop: remember what an event touched."""
        watched = self._watched.get(key)
        if watched is None:
            return
        pending = self._pending.setdefault(key, _Pending())
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            path = os.fsdecode(raw) if raw else ""
            if not path:
                continue
            relative = os.path.relpath(path, watched.root).replace(os.sep, "/")
            if relative == "." or relative.startswith("../"):
                continue
            if any(watched.rules.skips_dir(part) for part in _parents(relative)):
                continue  # inside .git, node_modules or an ignored folder: never a document
            if event.is_directory:
                # A folder "modified" only says its listing changed; the file events say what.
                if event.event_type != "modified":
                    pending.everything = True
            elif relative.rsplit("/", 1)[-1] == ".gitignore":
                pending.everything = True
            else:
                pending.paths.add(relative)
        if pending.everything or pending.paths:
            self._wake.set()

    def _watch(self, key: Key, project: Project) -> None:
        rules = rules_for(project)
        watched = _Watched(project, rules, str(Path(project.path)))
        self._watched[key] = watched
        if self._observer is None:
            return
        try:
            watched.watch = self._observer.schedule(_Events(self, key), project.path, recursive=True)
        except OSError:
            # Gone, unreadable, or out of inotify watches: reconciles still run at start-up and on request.
            log.warning("cannot watch project %s at %s", project.name, project.path, exc_info=True)

    def _unwatch(self, key: Key) -> None:
        watched = self._watched.pop(key, None)
        self._pending.pop(key, None)
        if watched is not None and watched.watch is not None and self._observer is not None:
            with contextlib.suppress(KeyError, OSError):
                self._observer.unschedule(watched.watch)

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.poll_seconds)
            if not self._wake.is_set():
                await self._refresh_quietly()
                continue
            # Let a burst of events settle into one piece of work.
            await asyncio.sleep(self.settle_seconds)
            self._wake.clear()
            pending, self._pending = self._pending, {}
            for key, work in pending.items():
                await self._index(key, work)

    async def _refresh_quietly(self) -> None:
        try:
            if self._commits.moved():
                await self.refresh()
                self._commits.seen()
        except Exception:
            log.exception("could not reload the registered projects")

    async def _index(self, key: Key, work: _Pending) -> None:
        watched = self._watched.get(key)
        if watched is None:
            return
        try:
            if work.everything:
                watched.rules.forget_gitignores()
                report = await self.projects.reconcile(watched.project)
            else:
                report = await self.projects.update_paths(watched.project, work.paths, watched.rules)
        except Exception:
            log.exception("indexing project %s failed", watched.project.name)
            return
        _log_report(watched.project, report.model_dump(exclude={"files"}))


def _parents(relative: str) -> list[str]:
    parts = relative.split("/")
    return ["/".join(parts[: depth + 1]) for depth in range(len(parts) - 1)]


def _log_report(project: Project, report: dict[str, Any]) -> None:
    if report["added"] or report["changed"] or report["removed"] or report["skipped"]:
        log.info(
            "project %s indexed: %d added, %d changed, %d removed, %d skipped",
            project.name,
            report["added"],
            report["changed"],
            report["removed"],
            len(report["skipped"]),
        )
