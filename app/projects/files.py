"""What a document may be: a relative path inside its project, UTF-8 text without NUL, within the size limit.

Pure rules shared by the server (REST, MCP, local folders) and the remote client, so both refuse the same files with
the same reasons.
"""

from __future__ import annotations

import hashlib
import re

MAX_PATH_CHARS = 512
DEFAULT_MAX_BYTES = 1_048_576
# The files a project indexes unless told otherwise (``app.projects.walker`` applies them).
DEFAULT_PATTERNS = ("**/*.md", "**/*.mdx", "**/*.yaml", "**/*.yml", "**/*.toml", "**/*.json")
DEFAULT_EXCLUDES = (".git/**", "node_modules/**", "vendor/**", "dist/**", "build/**", ".venv/**")

# Why a file was skipped or refused: the ``reason`` of an index report entry.
BINARY = "binary"
TOO_LARGE = "too_large"
INVALID_UTF8 = "invalid_utf8"
OUTSIDE_PROJECT = "outside_project"
INVALID_PATH = "invalid_path"
SYMLINK_LOOP = "symlink_loop"
UNREADABLE = "unreadable"

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# clean_path's rule as a schema pattern: relative (no leading slash or drive), never '..', no control characters, and
# naming something (a character besides spaces, dots and slashes).
DOCUMENT_PATH_PATTERN = (
    r"^(?![/\\]|[A-Za-z]:)(?!(.*[/\\])?\.\.([/\\]|$))"
    r"[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f./\\][^\x00-\x1f\x7f]*$"
)


class Refused(ValueError):
    """A file that is not indexed, and why (``reason`` is one of the constants above)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def clean_path(raw: object) -> str:
    """The path relative to the project root, with ``/`` separators; never absolute, never climbing out."""
    if not isinstance(raw, str) or not raw.strip():
        raise Refused(INVALID_PATH, "a path is required")
    if _CONTROL.search(raw):
        raise Refused(INVALID_PATH, "a path must not contain control characters")
    path = raw.replace("\\", "/")
    if path.startswith("/") or _DRIVE.match(path):
        raise Refused(OUTSIDE_PROJECT, f"{raw!r} is absolute; give the path relative to the project root")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise Refused(OUTSIDE_PROJECT, f"{raw!r} climbs out of the project ('..')")
    if not parts:
        raise Refused(INVALID_PATH, f"{raw!r} names no file")
    cleaned = "/".join(parts)
    if len(cleaned) > MAX_PATH_CHARS:
        raise Refused(INVALID_PATH, f"a path has at most {MAX_PATH_CHARS} characters")
    return cleaned


def content_hash(data: bytes) -> str:
    """SHA-256 of the file's bytes, hex: how a client tells whether the server already holds this version."""
    return hashlib.sha256(data).hexdigest()


def decode(data: bytes, max_bytes: int) -> str:
    """A file's bytes as text, or Refused: too large, binary (a NUL byte) or not UTF-8."""
    if len(data) > max_bytes:
        raise Refused(TOO_LARGE, f"{len(data)} bytes; the limit is {max_bytes}")
    if b"\x00" in data:
        raise Refused(BINARY, "binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(INVALID_UTF8, f"not UTF-8 text (byte {exc.start})") from None
    return text  # a BOM stays, so that hashing the text's UTF-8 gives the file's own hash


def encode(text: str, max_bytes: int) -> bytes:
    """A document given as text (REST, MCP): its UTF-8 bytes, or Refused on the same grounds as a file."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(INVALID_UTF8, "not valid Unicode text (a lone surrogate)") from None
    if len(data) > max_bytes:
        raise Refused(TOO_LARGE, f"{len(data)} bytes; the limit is {max_bytes}")
    if "\x00" in text:
        raise Refused(BINARY, "binary content (contains NUL characters)")
    return data
