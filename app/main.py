"""Composition root: builds every long-lived client once, wires the routes, and closes everything on shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from litestar import Litestar
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme

from app.admission.http import ReleaseSlots
from app.assembly import build_container, close_container
from app.client_address import TrustedProxies, parse_networks
from app.container import Container, provide_container, provide_principal
from app.head_requests import HeadAsGet
from app.health import healthz, readyz
from app.housekeeping import sweep_forever
from app.http_errors import EXCEPTION_HANDLERS
from app.json_request import JsonRequest
from app.mcp import McpEndpoint
from app.mcp.endpoint import MOUNT as MCP_MOUNT
from app.mem0compat.paths import Mem0Paths
from app.mem0compat.routes import mem0_router
from app.memories import lexical
from app.memories.embedder import Embedder
from app.memories.routes import MemoryController
from app.oauth.routes import oauth_lifespan, oauth_router
from app.observability.metrics import Metrics
from app.observability.middleware import install as install_observability
from app.observability.routes import metrics as metrics_route
from app.openapi.params import refuse_null_words
from app.openapi.swagger import docs_router, openapi_alias, render_plugins
from app.options_allow import bind_options_to_their_routes
from app.portability.routes import PortabilityController
from app.projects.routes import DocumentController
from app.projects.runtime import projects_lifespan
from app.sessions.routes import SessionController
from app.settings import Settings, get_settings
from app.sync.routes import SyncController
from app.sync.stopping import on_stop_signal
from app.task_stopping import cancel_and_wait
from app.teams.routes import TeamController
from app.web.errors import html_for_browsers
from app.web.router import static_files, template_config, web_lifespan, web_router
from app.web.session import send_pending_cookies

log = logging.getLogger(__name__)


async def _repair_index(container: Container) -> None:
    """Catch the index up with the database after an unclean stop, and rewrite the lexical vectors an older
    ``lexical.SCHEME`` wrote; the server serves meanwhile."""
    if container.engine.rebuilt:
        log.warning("the index predates hybrid search: rebuilding it from the database in the background")
    try:
        added, removed = await container.memories.repair()
        if added or removed:
            log.warning("index repaired: %d memories re-indexed, %d orphans removed", added, removed)
    except Exception:
        log.exception("index repair failed; run `engram reindex`")
    # Apart from repair: either failing must not keep the other from running.
    try:
        relexed = await container.engine.relex()
        if relexed:
            log.warning("lexical vectors of %d memories rewritten (scheme %s)", relexed, lexical.SCHEME)
    except Exception:
        log.exception("rewriting the index's lexical vectors failed: the next start tries again (or `engram reindex`)")


def create_app(settings: Settings | None = None, *, embedder: Embedder | None = None) -> Litestar:
    """The Litestar app. Tests call this with explicit Settings; `engram serve` with the environment's."""
    settings = settings or get_settings()
    mcp = McpEndpoint(settings)
    metrics = Metrics()
    metrics.count_sessions_with(lambda: len(mcp.live))

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        container = await build_container(settings, embedder, metrics)
        app.state.container = container
        if container.redis is not None:
            metrics.redis_up.set(1)
            container.redis.start()
        container.revocations.start()
        assert container.sync is not None
        await container.sync.follower.start()  # before repair: what is written meanwhile is followed
        repair = asyncio.create_task(_repair_index(container))
        sweep = asyncio.create_task(sweep_forever(container.db))
        follow = asyncio.create_task(container.sync.follower.run())
        links = asyncio.create_task(container.sync.worker.run())
        try:
            async with mcp.running(container):
                with on_stop_signal(container.sync.stop_long_polls):
                    yield
        finally:
            # Each ends before the container closes: one cancelled in the middle of a query still has its session to
            # roll back and close, and the loop's own end would cancel that cleanup again (the pool then logged an
            # error with a traceback at every other stop).
            await asyncio.gather(*(cancel_and_wait(task) for task in (repair, sweep, follow, links)))
            await close_container(container)

    dependencies: dict[str, Any] = {
        "container": Provide(provide_container),
        "principal": Provide(provide_principal),
    }
    app = Litestar(
        route_handlers=[
            healthz,
            readyz,
            metrics_route,
            openapi_alias,
            MemoryController,
            SessionController,
            SyncController,
            TeamController,
            DocumentController,
            PortabilityController,
            web_router,
            static_files,
            mcp.route,
            oauth_router,
            mem0_router,
        ],
        dependencies=dependencies,
        exception_handlers=html_for_browsers(EXCEPTION_HANDLERS),
        template_config=template_config,
        before_send=[send_pending_cookies],
        before_request=refuse_null_words,
        lifespan=[lifespan, web_lifespan, oauth_lifespan, projects_lifespan],
        request_max_body_size=settings.max_body_bytes,
        request_class=JsonRequest,
        openapi_config=OpenAPIConfig(
            title="Engram",
            version="0.1.0",
            description="Hosted memory for AI coding agents.",
            path="/docs",
            render_plugins=render_plugins(),
            openapi_router=docs_router("/docs"),
            components=Components(
                security_schemes={
                    "bearer": SecurityScheme(
                        type="http",
                        scheme="bearer",
                        description="An API key (egk_...) or an OAuth access token for {base}/v1",
                    ),
                    "apiKey": SecurityScheme(
                        type="apiKey", name="X-API-Key", security_scheme_in="header", description="An API key"
                    ),
                }
            ),
        ),
        # Logging is the process's (app.observability.logs, set up by `engram serve`), not each app's.
        logging_config=None,
        debug=False,
    )
    bind_options_to_their_routes(app)
    app.asgi_handler = ReleaseSlots(Mem0Paths(HeadAsGet(app.asgi_handler, leave_alone=MCP_MOUNT)))
    install_observability(app, metrics, {MCP_MOUNT: MCP_MOUNT + "/{client_name}/{user_id}"})
    # Outermost: every layer below (logs, limits, handlers) sees the client the trusted proxy named.
    app.asgi_handler = TrustedProxies(
        app.asgi_handler, parse_networks(settings.trusted_proxies), settings.client_ip_header
    )
    return app
