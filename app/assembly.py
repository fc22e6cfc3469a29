"""Builds the server's long-lived parts (the Container) from Settings, and closes them.

Every entry point shares this: the server (app.main wraps the web app around it), and the commands that work on the
data directly (export, import, users delete, reindex, projects index, sync once). It imports neither the web app
nor MCP, so those commands start without loading them.
"""

from __future__ import annotations

import os

import anyio

from app.accounts.auth import Authenticator
from app.accounts.revocations import Revocations
from app.accounts.secret import resolve_secret_key
from app.accounts.verified_keys import VerifiedKeys
from app.admission.batching import BatchingEmbedder
from app.admission.gate import Admission, AdmissionConfig
from app.container import Container
from app.coordination import create_coordination
from app.coordination.lives import DatabaseLives
from app.db import Database
from app.memories.embedder import Embedder, OnnxMiniLMEmbedder
from app.memories.engine import MemoryEngine
from app.memories.service import Limits, MemoryService
from app.oauth.verifier import OAuthTokenVerifier
from app.observability.metrics import Metrics
from app.projects.documents import DocumentService
from app.projects.service import ProjectService
from app.quotas.limiter import create_limiter
from app.quotas.plans import parse_plans
from app.quotas.service import Quotas
from app.redis_breaker import RedisBreaker
from app.sessions.open_streams import OpenStreams
from app.sessions.service import SessionService
from app.settings import Settings
from app.sync.runtime import open_sync
from app.teams import Teams


async def build_container(
    settings: Settings, embedder: Embedder | None = None, metrics: Metrics | None = None
) -> Container:
    metrics = metrics or Metrics()
    data_dir = settings.ensure_data_dir()
    os.environ.setdefault("MEM0_DIR", str((data_dir / "mem0").resolve()))
    admission = Admission(admission_config(settings), probe=metrics)
    if embedder is None:
        embedder = await anyio.to_thread.run_sync(lambda: server_embedder(settings, admission))
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
        admission=admission,
        streams=OpenStreams(settings.sse_streams_per_user),
    )


def server_embedder(settings: Settings, admission: Admission) -> OnnxMiniLMEmbedder:
    """The model, giving a request every core for its embedding only while it is alone in service (``admission``)."""
    return OnnxMiniLMEmbedder(threads=settings.embed_threads, alone=lambda: admission.in_flight <= 1)


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
