"""What an error looks like in the OpenAPI schema, and the one helper routes use to declare theirs.

Every ``/v1`` route declares the errors it can answer, in one line::

    @get("/things/{thing_id:str}", responses=error_responses(404))

``error_responses`` always documents 400, 401, 422 and 429 (any authenticated route can answer them); name the others
the route can give: 403 (a write with a read-only credential), 404, 409, 413 (a body or a memory too large) and 503.
The schema test (tests/api/test_openapi.py) and the schemathesis run fail on any status a route answers but does not
declare, so a missing one is found rather than guessed.
"""

from __future__ import annotations

from litestar.openapi import ResponseSpec
from pydantic import BaseModel, ConfigDict, Field

# Statuses every authenticated /v1 operation can answer, whatever it does.
ALWAYS = (400, 401, 422, 429)

DESCRIPTIONS = {
    400: "A malformed request, e.g. a session or agent name with characters outside [A-Za-z0-9._-] or with '__' "
    "(`invalid_user_id`), or a body that is not JSON (`bad_request`).",
    401: "No credential, or one that is wrong, expired or revoked (`unauthorized`); `WWW-Authenticate` says how to "
    "authenticate.",
    403: "The credential may only read; this needs a key or token with the write scope (`forbidden`).",
    404: "Nothing with this id for this user (`not_found`); another tenant's id answers exactly like a missing one.",
    408: "The request body did not arrive within the server's time for it (`request_timeout`); send it again.",
    409: "The request conflicts with the current state (`conflict`).",
    413: "The body is over the server's limit (`payload_too_large`), or a memory is longer than the memory limit "
    "(`memory_too_large`).",
    422: "The request is well-formed but a value is wrong (`invalid_request`); the message names the field.",
    429: "Over a rate limit (`rate_limited`) or the plan's memory quota (`quota_exceeded`); `Retry-After` says when "
    "to try again.",
    503: "A dependency is down (`unavailable`): the memory index, or coordination (Redis); retry later.",
}

# Headers that come with some error statuses (added to the document by app.openapi.document).
HEADERS = {
    401: {
        "WWW-Authenticate": {
            "description": "The authentication scheme and, for OAuth, where the resource metadata is.",
            "schema": {"type": "string"},
        }
    },
    429: {
        "Retry-After": {
            "description": "Seconds to wait before trying again.",
            "schema": {"type": "string", "pattern": "^[0-9]+$"},
        }
    },
}


class ErrorDetail(BaseModel):
    """The error itself; some errors carry more fields (e.g. ``field``, ``details``) beside code and message."""

    model_config = ConfigDict(extra="allow")

    code: str = Field(description="Stable, for programs: e.g. invalid_request, unauthorized, forbidden, not_found.")
    message: str = Field(description="For people: what was wrong, and how to put it right.")


class ErrorBody(BaseModel):
    """How every error of the API is answered: ``{"error": {"code", "message"}}``."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail


def error_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """The ``responses=`` of a route: 400, 401, 422 and 429, plus ``statuses``, each as an ``ErrorBody``."""
    unknown = set(statuses) - DESCRIPTIONS.keys()
    if unknown:
        raise ValueError(f"no description for status {sorted(unknown)}; add it to DESCRIPTIONS")
    return {
        status: ResponseSpec(data_container=ErrorBody, description=DESCRIPTIONS[status], generate_examples=False)
        for status in sorted({*ALWAYS, *statuses})
    }
