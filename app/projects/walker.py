"""Which files of a folder are a project's documents: glob patterns, excludes and the folder's .gitignore files.

Shared by the server (registered projects, the watcher) and the remote client (``engram index PATH --url``).
Symbolic links are followed while they stay inside the folder; a link leading out of it or round in a loop is
skipped with its reason, as are files the rules in ``files`` refuse.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pathspec import GitIgnoreSpec, PathSpec

from app.projects import files

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Never documents, at any depth: other repositories' internals and installed packages.
ALWAYS_SKIPPED_DIRS = frozenset({".git", "node_modules"})


@dataclass(frozen=True, slots=True)
class Found:
    path: str  # relative to the root, with / separators
    absolute: Path
    size: int
    mtime_ns: int

    @property
    def modified_at(self) -> datetime:
        """The modification time to the microsecond (what the database keeps), computed without float rounding."""
        return EPOCH + timedelta(microseconds=self.mtime_ns // 1000)

    def read(self, max_bytes: int) -> str:
        """The file's text, or ``files.Refused`` (too large, binary, not UTF-8, unreadable)."""
        if self.size > max_bytes:
            raise files.Refused(files.TOO_LARGE, f"{self.size} bytes; the limit is {max_bytes}")
        try:
            data = self.absolute.read_bytes()
        except OSError as exc:
            raise files.Refused(files.UNREADABLE, f"cannot read: {exc.strerror or exc}") from None
        return files.decode(data, max_bytes)


@dataclass(frozen=True, slots=True)
class Skip:
    path: str
    reason: str
    message: str


@dataclass
class Walk:
    found: list[Found] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)


class Rules:
    """A project's patterns and excludes, plus every .gitignore under its root, as gitignore-style matchers."""

    def __init__(self, root: Path, patterns: Sequence[str], excludes: Sequence[str]) -> None:
        self.root = root
        self.include = PathSpec.from_lines("gitignore", patterns)
        self.exclude = GitIgnoreSpec.from_lines(excludes)
        self._gitignores: dict[str, GitIgnoreSpec | None] = {}

    def _gitignore(self, directory: str) -> GitIgnoreSpec | None:
        if directory not in self._gitignores:
            path = self.root / directory / ".gitignore" if directory else self.root / ".gitignore"
            try:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                lines = []
            self._gitignores[directory] = GitIgnoreSpec.from_lines(lines) if lines else None
        return self._gitignores[directory]

    def forget_gitignores(self) -> None:
        """Re-read .gitignore files on next use (one of them changed)."""
        self._gitignores.clear()

    def _ignored(self, path: str) -> bool:
        """``path`` relative to the root (a directory ends with /): excluded, or ignored by a .gitignore above it."""
        if self.exclude.match_file(path):
            return True
        parts = path.rstrip("/").split("/")
        for depth in range(len(parts)):
            spec = self._gitignore("/".join(parts[:depth]))
            if spec is not None and spec.match_file(path.split("/", depth)[-1] if depth else path):
                return True
        return False

    def skips_dir(self, path: str) -> bool:
        """Whether nothing under this directory can be a document (git does not look inside ignored directories)."""
        return path.rsplit("/", 1)[-1] in ALWAYS_SKIPPED_DIRS or self._ignored(path + "/")

    def wants(self, path: str, *, parents_checked: bool = False) -> bool:
        """Whether the file at ``path`` (relative, / separators) is a document of the project."""
        if not self.include.match_file(path) or self._ignored(path):
            return False
        if parents_checked:
            return True
        parts = path.split("/")
        return not any(self.skips_dir("/".join(parts[: depth + 1])) for depth in range(len(parts) - 1))


def walk(rules: Rules) -> Walk:
    """Every document of the folder, with its size and modification time; nothing is read here."""
    result = Walk()
    root = rules.root
    try:
        real_root = root.resolve(strict=True)
        if not real_root.is_dir():
            raise NotADirectoryError(str(root))
    except OSError as exc:
        result.skipped.append(Skip(".", files.UNREADABLE, f"the project folder cannot be read: {exc}"))
        return result
    for entry in _entries(rules, real_root, "", {_identity(real_root)}, result):
        result.found.append(entry)
    result.found.sort(key=lambda f: f.path)
    return result


def inspect(rules: Rules, path: str) -> Found | Skip | None:
    """One file by its relative path (the watcher): Found, Skip with a reason, or None (gone, or not a document)."""
    if not rules.wants(path):
        return None
    real_root = rules.root.resolve()
    absolute = rules.root / path
    try:
        real = absolute.resolve(strict=True)
    except FileNotFoundError:
        return None
    except (RuntimeError, OSError) as exc:
        if isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP:
            return Skip(path, files.SYMLINK_LOOP, "a symbolic link loop")
        return Skip(path, files.UNREADABLE, f"cannot read: {exc}")
    if not real.is_relative_to(real_root):
        return Skip(path, files.OUTSIDE_PROJECT, "a symbolic link to a file outside the project")
    try:
        stat = real.stat()
    except OSError:
        return None
    if not os.path.isfile(real):
        return None
    return Found(path, real, stat.st_size, stat.st_mtime_ns)


def _identity(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_dev, stat.st_ino


def _entries(
    rules: Rules, real_root: Path, prefix: str, ancestors: set[tuple[int, int]], walk: Walk
) -> Iterator[Found]:
    directory = real_root / prefix if prefix else real_root
    try:
        with os.scandir(directory) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError as exc:
        walk.skipped.append(Skip(prefix or ".", files.UNREADABLE, f"cannot list: {exc.strerror or exc}"))
        return
    for entry in entries:
        path = f"{prefix}/{entry.name}" if prefix else entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=True)
        except OSError:
            is_dir = False
        if entry.is_symlink():
            try:
                real = Path(entry.path).resolve(strict=True)
            except (RuntimeError, OSError) as exc:
                if _wanted(rules, path, is_dir):
                    loop = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP
                    reason = files.SYMLINK_LOOP if loop else files.UNREADABLE
                    walk.skipped.append(Skip(path, reason, "a symbolic link loop" if loop else "a broken link"))
                continue
            if not real.is_relative_to(real_root):
                if _wanted(rules, path, real.is_dir()):
                    walk.skipped.append(Skip(path, files.OUTSIDE_PROJECT, "a symbolic link leading out of the project"))
                continue
            is_dir = real.is_dir()
        if is_dir:
            if rules.skips_dir(path):
                continue
            try:
                identity = _identity(Path(entry.path))
            except OSError:
                continue
            if identity in ancestors:
                walk.skipped.append(Skip(path, files.SYMLINK_LOOP, "a symbolic link back to a folder above it"))
                continue
            yield from _entries(rules, real_root, path, ancestors | {identity}, walk)
            continue
        if not rules.wants(path, parents_checked=True):
            continue
        try:
            stat = entry.stat(follow_symlinks=True)
        except OSError as exc:
            walk.skipped.append(Skip(path, files.UNREADABLE, f"cannot read: {exc.strerror or exc}"))
            continue
        if not os.path.isfile(entry.path):
            continue
        yield Found(path, Path(entry.path), stat.st_size, stat.st_mtime_ns)


def _wanted(rules: Rules, path: str, is_dir: bool) -> bool:
    """Whether a link that cannot be followed would have mattered: a document, or a folder that may hold some."""
    return not rules.skips_dir(path) if is_dir else rules.wants(path)
