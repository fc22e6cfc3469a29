"""The long-lived parts of a running server, built once by app.assembly (for a server, by its composition root)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler

from app.accounts.auth import Authenticator, Recheck
from app.accounts.principal import Principal
from app.accounts.revocations import Revocations
from app.admission.gate import Admission
from app.admission.http import admit
from app.coordination import Coordination
from app.db import Database
from app.memories.engine import MemoryEngine
from app.memories.service import MemoryService
from app.observability.metrics import Metrics
from app.observability.request_id import note_user
from app.projects.documents import DocumentService
from app.projects.service import ProjectService
from app.quotas.service import Quotas
from app.redis_breaker import RedisBreaker
from app.sessions.open_streams import OpenStreams
from app.sessions.service import SessionService
from app.settings import Settings
from app.sync.runtime import SyncRuntime
from app.teams import Teams


@dataclass
class Container:
    settings: Settings
    db: Database
    engine: MemoryEngine
    memories: MemoryService
    authenticator: Authenticator
    coordination: Coordination
    sessions: SessionService
    quotas: Quotas
    documents: DocumentService
    projects: ProjectService
    teams: Teams
    metrics: Metrics = field(default_factory=Metrics)
    # The shared judgement of whether Redis answers (None without Redis).
    redis: RedisBreaker | None = None
    # Tells open streams at once that a credential of their user was revoked.
    revocations: Revocations = field(default_factory=Revocations)
    extras: dict[str, Any] = field(default_factory=dict)
    # Which requests run now, wait their turn, or are refused (app.admission).
    admission: Admission = field(default_factory=Admission)
    # Edge sync: the change log every memory write appends to, the /sync/v1 edge and the log follower.
    sync: SyncRuntime | None = None
    # How many event streams each user holds open here (app.sessions.open_streams).
    streams: OpenStreams = field(default_factory=lambda: OpenStreams(32))

    def recheck(self, principal: Principal) -> Recheck:
        """How a stream that outlives its request keeps asking whether ``principal``'s credential still holds."""
        return Recheck(self.authenticator, principal, self.settings.stream_recheck_seconds)


# Where a request's principal is kept once authenticated, so the guard and the dependency authenticate once.
_PRINCIPAL = "engram.principal"


def container_of(request: Request[Any, Any, Any]) -> Container:
    container: Container = request.app.state.container
    return container


async def provide_container(request: Request[Any, Any, Any]) -> Container:
    return container_of(request)


async def provide_principal(request: Request[Any, Any, Any]) -> Principal:
    """The authenticated caller; 401 with a Bearer challenge when the credential is missing or bad."""
    cached = request.scope.get("state", {}).get(_PRINCIPAL)
    if isinstance(cached, Principal):
        return cached
    container = container_of(request)
    # OAuth tokens are bound to a resource; every REST route is the one resource {base}/v1.
    api = container.settings.resolved_public_base_url + "/v1"
    principal = await container.authenticator.authenticate(request.headers, resource=api)
    note_user(principal.user_id)
    plan = await container.quotas.check_request(principal)
    await admit(request, container.admission, principal, plan, body_seconds=container.settings.request_body_seconds)
    request.scope.setdefault("state", {})[_PRINCIPAL] = principal
    return principal


async def authenticated(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """A guard: guards run before parameters are parsed, so a caller without a credential hears 401, not 422."""
    await provide_principal(cast("Request[Any, Any, Any]", connection))
