"""Composition root: builds every long-lived client once, wires the routes, and closes everything on shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

import anyio
from litestar import Litestar
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme

from app.accounts.auth import Authenticator
from app.container import Container, provide_container, provide_principal
from app.coordination import create_coordination
from app.db import Database
from app.health import healthz, readyz
from app.housekeeping import sweep_forever
from app.http_errors import EXCEPTION_HANDLERS
from app.mcp import McpEndpoint
from app.mcp.endpoint import MOUNT as MCP_MOUNT
from app.memories.embedder import Embedder, OnnxMiniLMEmbedder
from app.memories.engine import MemoryEngine
from app.memories.routes import MemoryController
from app.memories.service import Limits, MemoryService
from app.oauth.routes import oauth_lifespan, oauth_router
from app.oauth.verifier import OAuthTokenVerifier
from app.observability.metrics import Metrics
from app.observability.middleware import install as install_observability
from app.observability.routes import metrics as metrics_route
from app.quotas.limiter import create_limiter
from app.quotas.plans import parse_plans
from app.quotas.service import Quotas
from app.sessions.routes import SessionController
from app.sessions.service import SessionService
from app.settings import Settings, get_settings
from app.web.errors import html_for_browsers
from app.web.router import static_files, template_config, web_lifespan, web_router
from app.web.session import send_pending_cookies

log = logging.getLogger(__name__)


async def build_container(
    settings: Settings, embedder: Embedder | None = None, metrics: Metrics | None = None
) -> Container:
    metrics = metrics or Metrics()
    data_dir = settings.ensure_data_dir()
    os.environ.setdefault("MEM0_DIR", str((data_dir / "mem0").resolve()))
    if embedder is None:
        embedder = await anyio.to_thread.run_sync(lambda: OnnxMiniLMEmbedder(threads=settings.embed_threads))
    engine = await anyio.to_thread.run_sync(
        lambda: MemoryEngine.open(
            data_dir=data_dir,
            embedder=embedder,
            qdrant_url=settings.qdrant_url,
            qdrant_api_key=settings.qdrant_api_key,
            qdrant_local_path=settings.qdrant_local_path,
            collection=settings.qdrant_collection,
            llm_base_url=settings.llm_base_url,
            llm_api_key=settings.llm_api_key,
            llm_model=settings.llm_model,
        )
    )
    db = Database(settings.resolved_database_url)
    coordination = create_coordination(settings.redis_url)
    limits = Limits(max_memory_chars=settings.max_memory_chars, max_batch_size=settings.max_batch_size)
    quotas = Quotas(
        db,
        create_limiter(settings.redis_url),
        parse_plans(settings.plans, settings.default_plan),
        settings.default_plan,
    )
    return Container(
        settings=settings,
        db=db,
        engine=engine,
        memories=MemoryService(db, engine, limits, quotas, metrics),
        authenticator=Authenticator(
            db, settings.resolved_secret_key(), oauth=OAuthTokenVerifier(db, settings.resolved_public_base_url)
        ),
        coordination=coordination,
        sessions=SessionService(coordination, metrics),
        quotas=quotas,
        metrics=metrics,
    )


async def close_container(container: Container) -> None:
    await container.coordination.close()
    await container.quotas.close()
    await container.db.dispose()
    await anyio.to_thread.run_sync(container.engine.close)


async def _repair_index(container: Container) -> None:
    """Catch the index up with the database after an unclean stop; the server serves meanwhile."""
    try:
        added, removed = await container.memories.repair()
        if added or removed:
            log.warning("index repaired: %d memories re-indexed, %d orphans removed", added, removed)
    except Exception:
        log.exception("index repair failed; run `engram reindex`")


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
        repair = asyncio.create_task(_repair_index(container))
        sweep = asyncio.create_task(sweep_forever(container.db))
        try:
            async with mcp.running():
                yield
        finally:
            repair.cancel()
            sweep.cancel()
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
            MemoryController,
            SessionController,
            web_router,
            static_files,
            mcp.route,
            oauth_router,
        ],
        dependencies=dependencies,
        exception_handlers=html_for_browsers(EXCEPTION_HANDLERS),
        template_config=template_config,
        before_send=[send_pending_cookies],
        lifespan=[lifespan, web_lifespan, oauth_lifespan],
        request_max_body_size=settings.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title="Engram",
            version="0.1.0",
            description="Hosted memory for AI coding agents.",
            path="/docs",
            render_plugins=[SwaggerRenderPlugin()],
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
    install_observability(app, metrics, {MCP_MOUNT: MCP_MOUNT + "/{client_name}/{user_id}"})
    return app
