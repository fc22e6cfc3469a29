"""How long a node waits on its edge: every request is bounded, so an edge that hangs (stopped, partitioned, stuck)
shows ``offline`` within ``sync_request_timeout_seconds`` plus a long poll's wait, never a request that waits on.

Each phase of a request (connecting, each write of its body, each read of the answer) may take at most the client's
timeout (``client``), and the request as a whole has a deadline: until the answer starts, what the edge may take to
answer (the timeout, or a long poll's wait plus half of it) and the time to send the body at a slow uplink's pace;
then the time to read the answer's body at that pace. A large body on a slow line still goes; a silent edge does not
hold anything for longer than its phase allows.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from app.settings import Settings

# The slowest line a body is still expected to cross (512 kbit/s): a body's deadline grows with its size at this pace.
MIN_BYTES_PER_SECOND = 64 * 1024
# An answer without a Content-Length is read within the time a body this large takes.
UNSIZED_BODY_BYTES = 1024 * 1024


def client(settings: Settings) -> httpx.AsyncClient:
    """The HTTP client of sync requests: each phase of a request within ``sync_request_timeout_seconds``."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(settings.sync_request_timeout_seconds),
        limits=httpx.Limits(max_keepalive_connections=20),
    )


def long_poll_seconds(http: httpx.AsyncClient, wait: float) -> float:
    """How long a pull that may wait ``wait`` s at the edge has for its answer: the wait, and a margin of half a
    request's timeout to build and send the page once the wait is over; never less than any request has."""
    return max(_phase(http), wait + _phase(http) / 2)


def _length(header: str | None) -> int:
    try:
        return max(0, int(header)) if header else UNSIZED_BODY_BYTES
    except ValueError:
        return UNSIZED_BODY_BYTES


def _phase(http: httpx.AsyncClient) -> float:
    return http.timeout.read or 30.0


async def request(
    http: httpx.AsyncClient, method: str, url: str, *, answer_within: float | None = None, **kwargs: Any
) -> httpx.Response:
    """``http.request`` with every part bounded (see the module); a deadline passed raises ``httpx.TimeoutException``
    naming it, as the client's own timeouts do (callers take both for an unreachable edge)."""
    phase = _phase(http)
    answer = phase if answer_within is None else answer_within
    auth = kwargs.pop("auth", httpx.USE_CLIENT_DEFAULT)  # send's, not the request's
    built = http.build_request(method, url, timeout=httpx.Timeout(phase, read=max(answer, phase)), **kwargs)
    size = int(built.headers.get("content-length") or 0)
    until_answer = answer + size / MIN_BYTES_PER_SECOND
    try:
        async with asyncio.timeout(until_answer):
            response = await http.send(built, auth=auth, stream=True)
    except TimeoutError:
        raise httpx.ReadTimeout(f"no answer within {until_answer:g} s", request=built) from None
    except httpx.TimeoutException as exc:
        raise _named(exc, built, phase, max(answer, phase)) from None
    try:
        length = _length(response.headers.get("content-length"))
        reading = phase + length / MIN_BYTES_PER_SECOND
        try:
            async with asyncio.timeout(reading):
                await response.aread()
        except TimeoutError:
            raise httpx.ReadTimeout(f"the answer's body took more than {reading:g} s", request=built) from None
        except httpx.TimeoutException as exc:
            raise _named(exc, built, phase, max(answer, phase)) from None
    finally:
        await response.aclose()
    return response


def _named(exc: httpx.TimeoutException, request: httpx.Request, phase: float, read: float) -> httpx.TimeoutException:
    """httpx's own timeout, saying which bound it was (its message is only "timed out")."""
    if isinstance(exc, httpx.ConnectTimeout):
        what = f"no connection within {phase:g} s"
    elif isinstance(exc, httpx.WriteTimeout):
        what = f"the body was not taken within {phase:g} s"
    elif isinstance(exc, httpx.PoolTimeout):
        what = f"no free connection within {phase:g} s"
    else:
        what = f"no answer within {read:g} s"
    return type(exc)(what, request=request)
