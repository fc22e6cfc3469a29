"""Scrub secrets from log text: API keys, OAuth tokens, credential headers and password-like fields. Pure."""

from __future__ import annotations

import logging
import re

REDACTED = "[REDACTED]"

# API keys (egk_), OAuth access and refresh tokens (ego_, egr_). Longer than any prefix-only mention, so the
# prefixes themselves stay readable in messages that talk about them.
_TOKENS = re.compile(r"\beg[kor]_[A-Za-z0-9_\-]{8,}")
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s'\",;]+")
# A credential header in any rendering: `Authorization: x`, `'authorization': 'x'`, `(b'cookie', b'x')`.
_HEADERS = re.compile(
    r"(?i)\b(authorization|proxy-authorization|cookie|set-cookie|x-api-key)(['\"]?\s*[:=,]\s*b?['\"]?)([^'\"\r\n]+)"
)
# `password=x`, `"client_secret": "x"`, `refresh_token=x&...`: the value up to a delimiter.
_FIELDS = re.compile(
    r"(?i)\b([\w-]*(?:password|passwd|secret|token|api[_-]?key|code_verifier))(['\"]?\s*[:=]\s*b?['\"]?)"
    r"([^&'\"\s,;}\]]+)"
)


def redact(text: str) -> str:
    """``text`` with every secret it carries replaced by ``[REDACTED]``."""
    if not text:
        return text
    text = _TOKENS.sub(lambda m: m.group(0)[:4] + REDACTED, text)
    text = _HEADERS.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _FIELDS.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)


class RedactionFilter(logging.Filter):
    """Renders a record's message and exception text once, scrubbed; formatters then see only the clean text."""

    _plain = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not lose the record, nor leak its arguments unscrubbed
            message = f"{record.msg} {record.args!r}"
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._plain.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
