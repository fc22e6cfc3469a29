"""Waiting for a request's body, for REST (``app.admission.http``) and MCP (``app.mcp.envelope``) alike: bounded in
time, and said in our errors: 408 for a body that does not arrive in time, 499 for a client that leaves halfway."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import anyio
from litestar.exceptions import InternalServerException

from app.errors import ClientGone, RequestTimeout

T = TypeVar("T")

LEFT_HALFWAY = "the client closed the connection before its request body arrived"


async def arrived(body: Awaitable[T], seconds: float) -> T:
    """``body`` (the whole body, or its next chunk) within ``seconds``."""
    try:
        with anyio.fail_after(seconds):
            return await body
    except TimeoutError:
        raise RequestTimeout(f"the request body did not arrive within {seconds:g} s; send it again") from None
    except InternalServerException as exc:  # Litestar's word for a client that left halfway through its body
        if "disconnected" in str(exc.detail):
            raise ClientGone(LEFT_HALFWAY) from None
        raise
