"""``/sync/v1``: push, pull (long-poll) and who the token is, for OAuth access tokens with scope ``sync``."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.connection import ASGIConnection
from litestar.enums import MediaType
from litestar.handlers import BaseRouteHandler
from litestar.openapi import ResponseSpec
from litestar.params import Parameter
from pydantic import BaseModel

from app.accounts.auth import presented_credential
from app.accounts.principal import Principal
from app.admission.http import STREAM, admit
from app.container import Container, container_of
from app.errors import AccountDeleted, Forbidden, ServiceUnavailable, Unauthorized
from app.oauth import resources, scopes
from app.observability.request_id import note_user
from app.openapi import error_responses
from app.portability.erase import is_erased
from app.sync.edge import MAX_PULL_LIMIT, MAX_WAIT_SECONDS, EdgeSync
from app.sync.protocol import MAX_PUSH_BYTES, PullOut, PushIn, PushOut, encode_json

SYNC_PATH = resources.SYNC_PATH
_PRINCIPAL = "engram.sync_principal"


def _edge(container: Container) -> EdgeSync:
    if container.sync is None or container.sync.edge is None:
        raise ServiceUnavailable("edge sync is not running on this server")
    return container.sync.edge


def _challenge(container: Container, error: str, description: str) -> dict[str, str]:
    oauth = container.authenticator.oauth
    resource = resources.sync_resource(container.settings.resolved_public_base_url)
    return oauth.challenge(resource, error, description) if oauth is not None else {}


async def sync_principal(request: Request[Any, Any, Any]) -> Principal:
    """The user a sync token acts for: an OAuth access token for ``{base}/sync/v1`` with scope ``sync``."""
    cached = request.scope.get("state", {}).get(_PRINCIPAL)
    if isinstance(cached, Principal):
        return cached
    container = container_of(request)
    resource = resources.sync_resource(container.settings.resolved_public_base_url)
    try:
        principal = await container.authenticator.authenticate(request.headers, resource=resource)
    except Unauthorized:
        credential = presented_credential(request.headers)
        if credential and await is_erased(container.db, credential):
            raise AccountDeleted("the account this machine synced with was deleted on this server") from None
        raise
    challenge = container.authenticator.oauth.challenge(resource) if container.authenticator.oauth else {}
    if principal.via != "oauth":
        raise Unauthorized("sync needs an OAuth access token (scope sync), not an API key", headers=challenge)
    if scopes.SYNC not in principal.scopes:
        raise Forbidden("this access token lacks the sync scope", headers=challenge)
    note_user(principal.user_id)
    plan = await container.quotas.check_request(principal)
    # A push takes a slot like any REST write (503/429 with Retry-After when full); the pull is a long poll, which
    # never counts as in flight.
    await admit(request, container.admission, principal, plan, body_seconds=container.settings.request_body_seconds)
    request.scope.setdefault("state", {})[_PRINCIPAL] = principal
    return principal


async def _authenticated(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    await sync_principal(connection)  # type: ignore[arg-type]


class Identity(BaseModel):
    user_id: str
    node_id: str
    model_id: str


class SyncController(Controller):
    path = SYNC_PATH
    tags = ["sync"]
    guards = [_authenticated]

    @post(
        "/push",
        request_max_body_size=MAX_PUSH_BYTES,
        status_code=200,
        summary="Apply a batch of changes",
        responses=error_responses(403, 413, 503),
    )
    async def push(self, request: Request[Any, Any, Any], container: Container, data: PushIn) -> PushOut:
        """One transaction per batch; sending a batch again changes nothing (changes are versions)."""
        return await _edge(container).push(await sync_principal(request), data)

    @get(
        "/pull",
        opt=STREAM,
        summary="The changes other origins made, in order, and the next cursor",
        responses={
            **error_responses(403, 409, 503),
            200: ResponseSpec(PullOut, generate_examples=False, description="A page of changes and the next cursor"),
        },
    )
    async def pull(
        self,
        request: Request[Any, Any, Any],
        container: Container,
        cursor: str | None = Parameter(default=None, max_length=200),
        limit: int = Parameter(default=500, ge=1, le=MAX_PULL_LIMIT),
        wait: float = Parameter(default=0.0, ge=0, le=MAX_WAIT_SECONDS),
        node: str | None = Parameter(default=None, max_length=40, pattern=r"^[A-Za-z0-9_.:-]{1,40}$"),
        name: str | None = Parameter(default=None, max_length=200),
    ) -> Response[bytes]:
        """``wait`` seconds of long-poll when nothing is new; ``node`` leaves out that node's own changes."""
        principal = await sync_principal(request)

        async def still_allowed() -> bool:
            return await container.authenticator.still_valid(principal)

        # A long poll outlives its authentication: a revocation announced meanwhile is checked at once.
        with container.revocations.watch(principal.user_id) as announced:
            try:
                page = await _edge(container).pull(
                    principal, cursor=cursor, limit=limit, wait=wait, node=node, name=name,
                    still_allowed=still_allowed, announced=announced,
                )  # fmt: skip
            except Unauthorized as exc:
                raise Unauthorized(exc.message, headers=_challenge(container, "invalid_token", exc.message)) from None
        # Sent as built (plain dicts): making a PullOut of a page cost more than reading it.
        return Response(encode_json(page), media_type=MediaType.JSON)

    @get(
        "/me",
        summary="Who this token syncs as, and this edge's node and embedding model",
        responses=error_responses(403, 503),
    )
    async def me(self, request: Request[Any, Any, Any], container: Container) -> Identity:
        principal = await sync_principal(request)
        edge = _edge(container)
        assert container.sync is not None
        return Identity(user_id=principal.user_id, node_id=container.sync.node_id, model_id=edge.engine.model_id)
