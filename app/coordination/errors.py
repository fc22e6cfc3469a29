"""Errors of the coordination layer."""

from __future__ import annotations

from typing import Any

from app.errors import ServiceUnavailable


class CoordinationUnavailable(ServiceUnavailable):
    """The coordination store (Redis) cannot be reached; the call did nothing the caller can rely on."""

    def __init__(self, reason: str, **extra: Any) -> None:
        super().__init__(f"coordination unavailable: {reason}", **extra)
