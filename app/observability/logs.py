"""Process-wide logging: one line per record on stderr, JSON or text, with the request id, scrubbed.

``auto`` (the default) is text on a terminal, for a person running the server, and JSON anywhere else (a container, a
service manager, a pipe), where a log collector reads it."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from app.observability.redaction import RedactionFilter
from app.observability.request_id import current_request_id

FORMATS = ("auto", "json", "text")
_TRACE = 5  # uvicorn's level below debug

# Attributes every LogRecord has; anything else on a record came in through ``extra=`` and is a field of the line.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "request_id", "color_message"}


class RequestIdFilter(logging.Filter):
    """Stamps each record with the id of the request it was logged in (None outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", "request_id"?, "exc"?, ...extra}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            line["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = record.stack_info
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """For local development: ``time level logger [request id] message``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s %(rid)s%(message)s")

    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        record.rid = f"[{request_id}] " if request_id else ""
        return super().format(record)


def build_handler(log_format: str, stream: TextIO | None = None) -> logging.Handler:
    """A stderr handler with the request id and redaction filters and the chosen formatter."""
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {log_format!r}")
    out = stream or sys.stderr
    if log_format == "auto":
        log_format = "text" if _is_terminal(out) else "json"
    handler = logging.StreamHandler(out)
    handler.addFilter(RequestIdFilter())
    handler.addFilter(RedactionFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    return handler


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream: not a person's terminal
        return False


# What ``configure_logging`` last set up in this process: the processes it starts (the embedded index's) log the same.
_configured: tuple[str, str] | None = None


def configured() -> tuple[str, str] | None:
    """The format and level this process logs with, once ``configure_logging`` ran (None before)."""
    return _configured


def configure_logging(log_format: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Route every logger (uvicorn's included) through one handler on the root logger."""
    global _configured
    _configured = (log_format, level)
    handler = build_handler(log_format, stream)
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(_TRACE if level.lower() == "trace" else level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    logging.captureWarnings(True)
    # We ship without spaCy on purpose (mem0 would download its model at run time); mem0 then lemmatizes nothing and
    # says so at every start, which is noise, not news.
    logging.getLogger("mem0.utils.spacy_models").setLevel(logging.ERROR)
