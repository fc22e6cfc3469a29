"""Registered projects: a folder on this machine indexed into a session of its user, reconciled on demand.

A reconcile walks the folder, reads only files whose size or modification time differ from what was indexed, and
hands the rest to DocumentService: unchanged content writes nothing, changed files replace their chunks, files gone
from the folder (or no longer indexable) lose theirs. Work goes in groups, each all-or-nothing, so one refused
group (a quota, say) is reported and the others still land.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path

import anyio.to_thread

from app.accounts.principal import WRITE, Principal, scopes_for
from app.db import Database, utcnow
from app.errors import AppError
from app.identity import Identity
from app.projects import files, repository
from app.projects.chunking import CHUNKING
from app.projects.documents import DocumentService, Prepared
from app.projects.models import Document, Project
from app.projects.registry import ProjectOut, find, listing, register
from app.projects.schemas import IndexReport, Skipped
from app.projects.walker import Found, Rules, Skip, inspect, walk

FOLDER = "folder"
# One all-or-nothing write per this many files or bytes of text, whichever comes first.
GROUP_FILES = 64
GROUP_BYTES = 512 * 1024


def rules_for(project: Project) -> Rules:
    return Rules(Path(project.path), project.patterns, project.excludes)


class ProjectService:
    """Register, list and reconcile the projects of this machine. Created once."""

    def __init__(self, db: Database, documents: DocumentService) -> None:
        self.db = db
        self.documents = documents
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()

    async def add(
        self, user_id: str, name: str, path: str, patterns: Sequence[str] = (), excludes: Sequence[str] = ()
    ) -> ProjectOut:
        """Register a folder for a user, indexed into the session ``name``; nothing is indexed yet."""
        return await register(self.db, user_id, name, path, patterns, excludes)

    async def list(self) -> list[ProjectOut]:
        """Every registered project on this machine, with what is indexed of it."""
        return await listing(self.db)

    async def projects(self) -> Sequence[Project]:
        async with self.db.session() as session:
            return await repository.all_projects(session)

    async def find(self, name: str, user_id: str | None = None) -> Project:
        """The project of that name (of that user, when several users have one)."""
        return await find(self.db, name, user_id)

    async def reconcile(self, project: Project) -> IndexReport:
        """Bring the session in step with the folder: add, replace and remove exactly what changed."""
        started = time.perf_counter()
        async with self._lock(project):
            report = await self._reconcile(project)
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    async def update_paths(self, project: Project, paths: Iterable[str], rules: Rules | None = None) -> IndexReport:
        """Re-index just these files of the folder (the watcher): changed ones replaced, vanished ones removed."""
        started = time.perf_counter()
        rules = rules or rules_for(project)
        report = IndexReport(session=project.name, project=project.name)
        async with self._lock(project):
            stored = await self.documents.snapshot(project.user_id, project.name)
            found: list[Found] = []
            gone: list[str] = []
            for path in sorted(set(paths)):
                seen = await anyio.to_thread.run_sync(inspect, rules, path)
                if isinstance(seen, Found):
                    found.append(seen)
                    continue
                if isinstance(seen, Skip):
                    report.skipped.append(Skipped(path=seen.path, reason=seen.reason, message=seen.message))
                doc = stored.get(path)
                if doc is not None and doc.origin == FOLDER:
                    gone.append(path)
            report.merge(await self._write(project, found, gone))
            await self._touch(project)
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _lock(self, project: Project) -> asyncio.Lock:
        key = (project.user_id, project.name)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def _reconcile(self, project: Project) -> IndexReport:
        rules = rules_for(project)
        walked = await anyio.to_thread.run_sync(walk, rules)
        stored = await self.documents.snapshot(project.user_id, project.name)
        report = IndexReport(session=project.name, project=project.name)
        report.skipped.extend(Skipped(path=s.path, reason=s.reason, message=s.message) for s in walked.skipped)
        if any(s.path == "." for s in walked.skipped):
            return report  # the folder itself is unreadable: remove nothing on that account
        candidates: list[Found] = []
        for found in walked.found:
            doc = stored.get(found.path)
            if doc is not None and _unchanged(doc, found):
                report.unchanged += 1
            else:
                candidates.append(found)
        present = {found.path for found in walked.found}
        gone = [path for path, doc in stored.items() if doc.origin == FOLDER and path not in present]
        report.merge(await self._write(project, candidates, gone))
        await self._touch(project)
        return report

    async def _write(self, project: Project, candidates: Sequence[Found], gone: Sequence[str]) -> IndexReport:
        """Read the candidates, then write them in groups; a file now refused loses what it had indexed."""
        report = IndexReport(session=project.name, project=project.name)
        max_bytes = self.documents.max_document_bytes
        ready, refused = await anyio.to_thread.run_sync(_read_all, candidates, max_bytes)
        report.skipped.extend(refused)
        stored = await self.documents.snapshot(project.user_id, project.name)
        removals = list(gone) + [r.path for r in refused if r.path in stored and stored[r.path].origin == FOLDER]
        principal = Principal(project.user_id, scopes_for(WRITE), key_id=None, via="project")
        identity = Identity(project.user_id, project.name, None)
        groups: list[tuple[list[Prepared], list[str]]] = [([], removals)] if removals else []
        group: list[Prepared] = []
        size = 0
        for file in ready:
            if group and (len(group) >= GROUP_FILES or size + file.size > GROUP_BYTES):
                groups.append((group, []))
                group, size = [], 0
            group.append(file)
            size += file.size
        if group:
            groups.append((group, []))
        for put, remove in groups:
            try:
                done = await self.documents.apply(
                    principal, identity, put=put, remove=remove, origin=FOLDER, skip_refused=True
                )
            except AppError as exc:
                for path in [file.path for file in put] + list(remove):
                    report.skipped.append(Skipped(path=path, reason=exc.code, message=exc.message))
                continue
            report.merge(done)
        return report

    async def _touch(self, project: Project) -> None:
        async with self.db.session() as session:
            await repository.touch_project(session, project.user_id, project.name, utcnow())


def _unchanged(doc: Document, found: Found) -> bool:
    """Indexed from this very file (same size and time), cut by the current chunking rules."""
    return (doc.size, doc.modified_at, doc.chunking) == (found.size, found.modified_at, CHUNKING)


def _read_all(candidates: Sequence[Found], max_bytes: int) -> tuple[list[Prepared], list[Skipped]]:
    ready: list[Prepared] = []
    refused: list[Skipped] = []
    for found in candidates:
        try:
            text = found.read(max_bytes)
        except files.Refused as refusal:
            refused.append(Skipped(path=found.path, reason=refusal.reason, message=refusal.message))
            continue
        data = text.encode("utf-8")
        ready.append(Prepared(found.path, text, files.content_hash(data), len(data), found.modified_at))
    return ready, refused
