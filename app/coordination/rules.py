"""Input rules shared by both backends: limits, path normalisation and the checks that raise ``ValidationFailed``."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from pydantic import Field

from app.coordination.models import SessionKey
from app.errors import ValidationFailed
from app.text import check_text

MAX_PATHS = 100
MAX_PATH_CHARS = 1024
MAX_NAME_CHARS = 64
MAX_OPERATION_CHARS = 32
MAX_SUMMARY_CHARS = 4000
MIN_TTL_SECONDS = 60
MAX_TTL_SECONDS = 24 * 60 * 60
MAX_PAGE = 1000
# The change feed keeps about this many entries per session (Redis trims approximately).
FEED_MAX_ENTRIES = 10_000
DEFAULT_PRESENCE_TTL_SECONDS = 24 * 60 * 60
# Fencing counters and the change feed outlive any claim by far; they go once a session is idle this long.
DEFAULT_RETENTION_SECONDS = 30 * 24 * 60 * 60


# A file path: no control characters, and something besides spaces, dots and slashes (else it names no file). The
# schemas state it (so a client and a fuzzer know it) and normalise_path enforces it.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
OPERATION_PATTERN = r"^\s*[^\s\x00-\x1f\x7f-\x9f]([^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f])?\s*$"
PATH_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f./\\][^\x00-\x1f\x7f-\x9f]*$"


# For a file path's type: the schema states the rule, normalise_path enforces it with a message that says what is wrong.
PATH_SCHEMA = Field(json_schema_extra={"pattern": PATH_PATTERN})


def _printable(value: str) -> bool:
    return value.isprintable()


def check_key(key: SessionKey) -> SessionKey:
    """The tenant and session must be non-empty, short and printable."""
    for part, value in (("user_id", key.user_id), ("session", key.session)):
        if not value or len(value) > MAX_NAME_CHARS or not _printable(value):
            raise ValidationFailed(f"{part} must be 1-{MAX_NAME_CHARS} printable characters")
    return key


def check_agent(agent: str, part: str = "agent") -> str:
    """An agent name: 1-64 printable characters."""
    if not isinstance(agent, str) or not agent or len(agent) > MAX_NAME_CHARS or not _printable(agent):
        raise ValidationFailed(f"{part} must be 1-{MAX_NAME_CHARS} printable characters")
    return agent


def check_operation(operation: str) -> str:
    """A short free label such as "write" or "read"; it does not change how claims conflict."""
    value = operation.strip() if isinstance(operation, str) else ""
    if not value or len(value) > MAX_OPERATION_CHARS or _CONTROL.search(value):
        raise ValidationFailed(f"operation must be 1-{MAX_OPERATION_CHARS} characters, no control characters")
    return value


def ttl_millis(ttl_seconds: int, ttl_ms: int | None) -> int:
    """The claim TTL in milliseconds; ``ttl_ms`` bypasses the one-minute floor (tests, internal callers)."""
    if ttl_ms is not None:
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 1 <= ttl_ms <= MAX_TTL_SECONDS * 1000:
            raise ValidationFailed(f"ttl_ms must be an integer from 1 to {MAX_TTL_SECONDS * 1000}")
        return ttl_ms
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int):
        raise ValidationFailed("ttl_seconds must be an integer")
    if not MIN_TTL_SECONDS <= ttl_seconds <= MAX_TTL_SECONDS:
        raise ValidationFailed(
            f"ttl_seconds must be from {MIN_TTL_SECONDS} to {MAX_TTL_SECONDS} (1 minute to 24 hours), got {ttl_seconds}"
        )
    return ttl_seconds * 1000


def normalise_path(path: str) -> str:
    """One spelling per file: forward slashes, no '.', '..' or '//' segments where they can be folded away."""
    if not isinstance(path, str):
        raise ValidationFailed("each path must be a string")
    value = path.strip().replace("\\", "/")
    if not value:
        raise ValidationFailed("a path is empty")
    if len(value) > MAX_PATH_CHARS:
        raise ValidationFailed(f"path {value[:60]!r}... is longer than {MAX_PATH_CHARS} characters")
    if _CONTROL.search(value):
        raise ValidationFailed(f"path {value!r} contains control characters")
    # POSIX keeps a leading '//' as special; a file path here never means that.
    value = posixpath.normpath(value)
    if value.startswith("//"):
        value = "/" + value.lstrip("/")
    if value in (".", "/"):
        raise ValidationFailed(f"path {path!r} does not name a file")
    return value


def normalise_paths(paths: Sequence[str], *, allow_empty: bool = False) -> list[str]:
    """Normalised, de-duplicated paths in the order given; 1-100 of them (0 allowed where ``allow_empty``)."""
    if isinstance(paths, str):
        raise ValidationFailed("paths must be a list of strings, not one string")
    result = list(dict.fromkeys(normalise_path(p) for p in paths))
    if not result and not allow_empty:
        raise ValidationFailed("no paths given")
    if len(result) > MAX_PATHS:
        raise ValidationFailed(f"at most {MAX_PATHS} paths per call, got {len(result)}")
    return result


def check_summary(summary: str) -> str:
    """What changed, in words: 1-4000 characters."""
    value = summary.strip() if isinstance(summary, str) else ""
    if not value:
        raise ValidationFailed("summary is empty")
    check_text(value, "summary")
    if len(value) > MAX_SUMMARY_CHARS:
        raise ValidationFailed(f"summary is longer than {MAX_SUMMARY_CHARS} characters")
    return value


def check_limit(limit: int) -> int:
    """A page size from 1 to 1000."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ValidationFailed(f"limit must be an integer from 1 to {MAX_PAGE}")
    return limit
