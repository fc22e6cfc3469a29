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
from litestar.openapi.spec import Components, SecurityScheme

from app.accounts.auth import Authenticator
from app.accounts.revocations import Revocations
from app.accounts.secret import resolve_secret_key
from app.accounts.verified_keys import VerifiedKeys
from app.admission.batching import BatchingEmbedder
from app.admission.gate import Admission, AdmissionConfig
from app.admission.http import ReleaseSlots
from app.client_address import TrustedProxies, parse_networks
from app.container import Container, provide_container, provide_principal
from app.coordination import create_coordination
from app.coordination.lives import DatabaseLives
from app.db import Database
from app.head_requests import HeadAsGet
from app.health import healthz, readyz
from app.housekeeping import sweep_forever
from app.http_errors import EXCEPTION_HANDLERS
from app.json_request import JsonRequest
from app.mcp import McpEndpoint
from app.mcp.endpoint import MOUNT as MCP_MOUNT
from app.mem0compat.paths import Mem0Paths
from app.mem0compat.routes import mem0_router
from app.memories.embedder import Embedder, OnnxMiniLMEmbedder
from app.memories.engine import MemoryEngine
from app.memories.routes import MemoryController
from app.memories.service import Limits, MemoryService
from app.oauth.routes import oauth_lifespan, oauth_router
from app.oauth.verifier import OAuthTokenVerifier
from app.observability.metrics import Metrics
from app.observability.middleware import install as install_observability
from app.observability.routes import metrics as metrics_route
from app.openapi.params import refuse_null_words
from app.openapi.swagger import docs_router, render_plugins
from app.options_allow import bind_options_to_their_routes
from app.portability.routes import PortabilityController
from app.projects.documents import DocumentService
from app.projects.routes import DocumentController
from app.projects.runtime import projects_lifespan
from app.projects.service import ProjectService
from app.quotas.limiter import create_limiter
from app.quotas.plans import parse_plans
from app.quotas.service import Quotas
from app.redis_breaker import RedisBreaker
from app.sessions.open_streams import OpenStreams
from app.sessions.routes import SessionController
from app.sessions.service import SessionService
from app.settings import Settings, get_settings
from app.sync.routes import SyncController
from app.sync.runtime import open_sync
from app.sync.stopping import on_stop_signal
from app.task_stopping import cancel_and_wait
from app.teams import Teams
from app.teams.routes import TeamController
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
    embedder = BatchingEmbedder(
        embedder, max_batch=settings.embed_max_batch, runners=settings.embed_runners, probe=metrics
    )
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
            query_cache_size=settings.query_cache_size,
            index_process=settings.index_process,
        )
    )
    db = Database(
        settings.resolved_database_url,
        connections=settings.admission_max_limit,
        busy_timeout=settings.database_busy_timeout_seconds,
        probe=metrics,
    )
    secret = await resolve_secret_key(db, settings.secret_key, data_dir)
    revocations = Revocations(settings.redis_url, db, poll_seconds=settings.revocation_poll_seconds)
    db.after_commit.append(revocations.after_commit)
    verified = VerifiedKeys(max_age=settings.verified_key_seconds) if settings.verified_key_seconds else None
    if verified is not None:
        revocations.listen(verified.forget)
    breaker = (
        RedisBreaker(settings.redis_url, on_change=lambda down: metrics.redis_up.set(0 if down else 1))
        if (settings.redis_url)
        else None
    )
    coordination = create_coordination(
        settings.redis_url, breaker=breaker, command_timeout=settings.redis_timeout_seconds, lives=DatabaseLives(db)
    )
    limits = Limits(
        max_memory_chars=settings.max_memory_chars,
        max_batch_size=settings.max_batch_size,
        search_threshold=settings.search_threshold,
    )
    teams = Teams.build(db, coordination)
    quotas = Quotas(
        db,
        create_limiter(
            settings.redis_url,
            breaker=breaker,
            budget=settings.redis_limit_timeout_seconds,
            on_fallback=metrics.redis_fallbacks.labels("quotas").inc,
        ),
        parse_plans(settings.plans, settings.default_plan),
        settings.default_plan,
    )
    sync = await open_sync(settings, db, engine, dims=embedder.dims, quotas=quotas, registry=metrics.registry)
    memories = MemoryService(db, engine, limits, quotas, metrics, roles=teams.agents.role_of, changes=sync.changes)
    documents = DocumentService(
        db, memories, max_memory_chars=settings.max_memory_chars, max_document_bytes=settings.max_document_bytes
    )
    return Container(
        settings=settings,
        db=db,
        engine=engine,
        memories=memories,
        authenticator=Authenticator(
            db, secret, oauth=OAuthTokenVerifier(db, settings.resolved_public_base_url), verified=verified
        ),
        coordination=coordination,
        sessions=SessionService(coordination, metrics, teams.agents),
        quotas=quotas,
        teams=teams,
        documents=documents,
        projects=ProjectService(db, documents),
        metrics=metrics,
        redis=breaker,
        revocations=revocations,
        sync=sync,
        admission=Admission(admission_config(settings), probe=metrics),
        streams=OpenStreams(settings.sse_streams_per_user),
    )


def admission_config(settings: Settings) -> AdmissionConfig:
    return AdmissionConfig(
        queue_timeout=settings.admission_queue_timeout_seconds,
        target=settings.admission_target_delay_seconds,
        overloaded_wait=settings.admission_overloaded_wait_seconds,
        min_share=settings.admission_min_share,
        initial_limit=settings.admission_initial_limit,
        min_limit=settings.admission_min_limit,
        max_limit=settings.admission_max_limit,
        tolerance=settings.admission_latency_tolerance,
    )


async def close_container(container: Container) -> None:
    await container.coordination.close()
    await container.quotas.close()
    if container.redis is not None:
        await container.redis.close()
    await container.revocations.close()
    await container.db.dispose()
    await anyio.to_thread.run_sync(container.engine.close)


async def _repair_index(container: Container) -> None:
    """Catch the index up with the database after an unclean stop; the server serves meanwhile."""
    if container.engine.rebuilt:
        log.warning("the index predates hybrid search: rebuilding it from the database in the background")
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
