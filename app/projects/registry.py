"""The registry of project folders: register, list, find and remove them. Light to import (the command line uses it)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError

from app.accounts import service as accounts
from app.db import Database, utcnow
from app.errors import Conflict, NotFound, ValidationFailed
from app.identity import validate_name
from app.projects import repository
from app.projects.files import DEFAULT_EXCLUDES, DEFAULT_PATTERNS
from app.projects.models import Project

MAX_PATTERNS = 100


@dataclass(frozen=True, slots=True)
class ProjectOut:
    """A registered project, with how much of it is indexed."""

    name: str
    path: str
    user: str
    files: int
    chunks: int
    last_indexed: datetime | None
    patterns: list[str]
    excludes: list[str]

    def as_json(self, *, rules: bool = True) -> dict[str, Any]:
        """As ``engram projects`` prints it; ``rules``: with the patterns and excludes."""
        out = {field.name: getattr(self, field.name) for field in fields(self)}
        if self.last_indexed is not None:  # RFC 3339 with Z, as the output has always had it
            out["last_indexed"] = self.last_indexed.isoformat().replace("+00:00", "Z")
        if not rules:
            del out["patterns"], out["excludes"]
        return out


async def register(
    db: Database, user_id: str, name: str, path: str, patterns: Sequence[str] = (), excludes: Sequence[str] = ()
) -> ProjectOut:
    """Register a folder for a user, indexed into the session ``name``; nothing is indexed yet."""
    validate_name(name, "project")
    folder = await asyncio.to_thread(_folder, path)
    chosen = _globs(patterns, "pattern") or list(DEFAULT_PATTERNS)
    excluded = list(dict.fromkeys([*DEFAULT_EXCLUDES, *_globs(excludes, "exclude")]))
    try:
        async with db.session() as session:
            await accounts.require_user(session, user_id)
            if await repository.project(session, user_id, name) is not None:
                raise Conflict(f"user {user_id} already has a project named {name}")
            project = Project(
                id="prj_" + secrets.token_hex(8),
                user_id=user_id,
                name=name,
                path=folder,
                patterns=chosen,
                excludes=excluded,
                created_at=utcnow(),
            )
            session.add(project)
    except IntegrityError:
        raise Conflict(f"user {user_id} already has a project named {name}") from None
    return await _out(db, project)


async def listing(db: Database) -> list[ProjectOut]:
    """Every registered project on this machine, with how many files and chunks are indexed and when."""
    async with db.session() as session:
        projects = await repository.all_projects(session)
    return [await _out(db, project) for project in projects]


async def find(db: Database, name: str, user_id: str | None = None) -> Project:
    """The project of that name (of that user, when several users have one)."""
    async with db.session() as session:
        if user_id is not None:
            found = await repository.project(session, user_id, name)
            candidates = [found] if found is not None else []
        else:
            candidates = list(await repository.projects_named(session, name))
    if not candidates:
        raise NotFound(f"no project named {name}" + (f" for user {user_id}" if user_id else ""))
    if len(candidates) > 1:
        raise ValidationFailed(f"several users have a project named {name}: name the user with --user")
    return candidates[0]


async def unregister(db: Database, name: str, user_id: str | None = None) -> ProjectOut:
    """Forget a project: its folder is no longer watched or indexed. What it indexed stays in the session (it is
    the user's, like any memory); registering the folder again finds those files unchanged."""
    project = await find(db, name, user_id)
    out = await _out(db, project)
    async with db.session() as session:
        found = await repository.project(session, project.user_id, project.name)
        if found is not None:
            await session.delete(found)
    return out


async def _out(db: Database, project: Project) -> ProjectOut:
    async with db.session() as session:
        count, chunks = await repository.totals(session, project.user_id, project.name)
    return ProjectOut(
        name=project.name,
        path=project.path,
        user=project.user_id,
        files=count,
        chunks=chunks,
        last_indexed=project.last_indexed_at,
        patterns=list(project.patterns),
        excludes=list(project.excludes),
    )


def _folder(path: str) -> str:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ValidationFailed(f"{path} is not a folder", field="path")
    return str(folder.resolve())


def _globs(values: Sequence[str], what: str) -> list[str]:
    cleaned = [value.strip() for value in values if value.strip()]
    if len(cleaned) > MAX_PATTERNS:
        raise ValidationFailed(f"at most {MAX_PATTERNS} --{what} globs", field=what)
    for value in cleaned:
        if "\x00" in value or "\n" in value:
            raise ValidationFailed(f"--{what} {value!r} is not a glob", field=what)
    return list(dict.fromkeys(cleaned))
