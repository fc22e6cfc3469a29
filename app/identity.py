"""Parse and format user ids, plain (``u_7f3k``) or virtual (``USER__session__SESSION__AGENT``). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.errors import InvalidIdentity

SEPARATOR = "__"
SESSION_MARKER = "session"
MAX_NAME = 64
MAX_USER_ID = 64

_USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")
# The same rule as validate_name as one regular expression (with length 1-64), for schemas: letters, digits, '.', '-'
# and '_', never two '_' in a row. Written without lookahead so that schema-driven generators can use it.
NAME_PATTERN = r"^_?(?:[A-Za-z0-9.-]+_)*[A-Za-z0-9.-]*$"
# NAME_PATTERN in words, for errors.
NAME_RULE = "may only contain letters, digits, '.', '-' and '_', never '__'"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is asking: a user, and optionally the session and agent they act as."""

    user_id: str
    session: str | None = None
    agent: str | None = None

    @property
    def is_session(self) -> bool:
        return self.session is not None

    def format(self) -> str:
        if self.session is None:
            return self.user_id
        return SEPARATOR.join((self.user_id, SESSION_MARKER, self.session, self.agent or ""))


def validate_user_id(user_id: str) -> str:
    """A plain user id: letters, digits, '.', '-', '_', never '__', 1-64 characters."""
    if not user_id:
        raise InvalidIdentity("user part is empty")
    if len(user_id) > MAX_USER_ID:
        raise InvalidIdentity(f"user part is longer than {MAX_USER_ID} characters")
    if SEPARATOR in user_id:
        raise InvalidIdentity("user part must not contain '__'")
    if not _USER_RE.fullmatch(user_id):
        raise InvalidIdentity(
            f"user part {user_id!r} may only contain letters, digits, '.', '-' and '_' and must start with a "
            "letter or digit"
        )
    return user_id


def validate_name(value: str, part: str) -> str:
    """A session or agent name: letters, digits, '.', '-', '_', never '__', 1-64 characters."""
    if not value:
        raise InvalidIdentity(f"{part} name is empty")
    if len(value) > MAX_NAME:
        raise InvalidIdentity(f"{part} name is longer than {MAX_NAME} characters")
    if SEPARATOR in value:
        raise InvalidIdentity(f"{part} name {value!r} must not contain '__'")
    if not _NAME_RE.fullmatch(value):
        raise InvalidIdentity(f"{part} name {value!r} may only contain letters, digits, '.', '-' and '_'")
    return value


def parse_identity(raw: str) -> Identity:
    """Parse ``USER`` or ``USER__session__SESSION__AGENT``; the error names the part that is wrong."""
    if SEPARATOR not in raw:
        return Identity(validate_user_id(raw))
    user, sep, rest = raw.partition(SEPARATOR + SESSION_MARKER + SEPARATOR)
    if not sep:
        head, _, marker = raw.partition(SEPARATOR)
        marker = marker.split(SEPARATOR, 1)[0]
        validate_user_id(head)
        raise InvalidIdentity(
            f"expected 'session' after the user part, got {marker!r}; the form is USER__session__SESSION__AGENT"
        )
    validate_user_id(user)
    # Names cannot contain '__', so the session/agent split is unambiguous: exactly one separator must remain.
    parts = rest.split(SEPARATOR)
    if len(parts) < 2:
        missing = "session and agent parts are" if not parts[0] else "agent part is"
        raise InvalidIdentity(f"{missing} missing; the form is USER__session__SESSION__AGENT")
    if len(parts) > 2:
        raise InvalidIdentity(
            f"agent name {SEPARATOR.join(parts[1:])!r} must not contain '__'" if parts[0] else "session name is empty"
        )
    session, agent = parts
    return Identity(user, validate_name(session, "session"), validate_name(agent, "agent"))


def format_identity(user_id: str, session: str | None = None, agent: str | None = None) -> str:
    """The inverse of ``parse_identity``; validates every part."""
    validate_user_id(user_id)
    if session is None and agent is None:
        return user_id
    if session is None or agent is None:
        raise InvalidIdentity("a virtual id needs both a session name and an agent name")
    return Identity(user_id, validate_name(session, "session"), validate_name(agent, "agent")).format()
