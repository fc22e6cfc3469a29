"""API key material: generation, parsing and keyed hashing. Pure functions, no I/O."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
from dataclasses import dataclass

KEY_PREFIX = "egk_"
LOOKUP_LEN = 12
SECRET_LEN = 40
_ALPHABET = string.ascii_letters + string.digits
KEY_LEN = len(KEY_PREFIX) + LOOKUP_LEN + SECRET_LEN


@dataclass(frozen=True, slots=True)
class NewKey:
    plaintext: str
    lookup: str


def _random(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def generate_key() -> NewKey:
    """``egk_`` + a 12-character public lookup part + 40 random characters (about 238 bits)."""
    lookup = _random(LOOKUP_LEN)
    return NewKey(plaintext=f"{KEY_PREFIX}{lookup}{_random(SECRET_LEN)}", lookup=lookup)


def parse_lookup(presented: str) -> str | None:
    """The lookup part of a well-formed key, or None when the string cannot be one of our keys."""
    if len(presented) != KEY_LEN or not presented.startswith(KEY_PREFIX):
        return None
    body = presented[len(KEY_PREFIX) :]
    if any(ch not in _ALPHABET for ch in body):
        return None
    return body[:LOOKUP_LEN]


def hash_key(secret: bytes, presented: str) -> str:
    return hmac.new(secret, presented.encode(), hashlib.sha256).hexdigest()


def matches(secret: bytes, presented: str, stored_hash: str) -> bool:
    """Constant-time comparison of the presented key's keyed hash with the stored one."""
    return hmac.compare_digest(hash_key(secret, presented), stored_hash)


def display_prefix(lookup: str) -> str:
    return f"{KEY_PREFIX}{lookup[:6]}…"


def new_user_id() -> str:
    return "u_" + "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(10))


def new_key_id() -> str:
    return "key_" + secrets.token_hex(8)
