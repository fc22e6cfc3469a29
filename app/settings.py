"""The one place that reads the environment (prefix ``ENGRAM_``)."""

from __future__ import annotations

import secrets
from functools import lru_cache
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob Engram has. Tests build ``Settings(...)`` explicitly; the server uses ``get_settings()``."""

    model_config = SettingsConfigDict(env_prefix="ENGRAM_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = Path("./data")

    # Unset: SQLite under data_dir. Production: postgresql+asyncpg://...
    database_url: str | None = None
    # Unset: Qdrant's own engine in-process (qdrant-edge) under data_dir.
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    # Only for tests and small installs: qdrant-client's local mode at this path instead of a server.
    qdrant_local_path: Path | None = None
    qdrant_collection: str = "engram_memories"
    # Unset: coordination runs in-process (single instance only).
    redis_url: str | None = None

    # An OpenAI-compatible LLM enables mem0's fact extraction (infer).
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_model: str = "gpt-4o-mini"

    # What clients are told to connect to (install commands, OAuth metadata). Unset: http://{host}:{port}.
    public_base_url: str | None = None

    # Keys are stored as HMAC-SHA256(secret_key, key). Unset: generated once and kept in data_dir.
    secret_key: str | None = None

    max_body_bytes: int = 1_048_576
    max_memory_chars: int = 16_000
    max_batch_size: int = 100

    # Live streams (SSE, MCP push) outlive the request that opened them: how often they re-check its credential.
    stream_recheck_seconds: float = 15.0

    # Quotas: a plan per user (users.plan); signups get default_plan. Override with JSON, e.g.
    # ENGRAM_PLANS='{"free": {"requests_per_minute": 600, "key_requests_per_minute": 300, "max_memories": 10000}}'.
    plans: dict[str, dict[str, int]] = Field(
        default_factory=lambda: {
            "free": {"requests_per_minute": 600, "key_requests_per_minute": 300, "max_memories": 10_000},
            "pro": {"requests_per_minute": 6000, "key_requests_per_minute": 3000, "max_memories": 1_000_000},
        }
    )
    default_plan: str = "free"
    # Per client address, for the endpoints anyone can call: accounts and OAuth clients created per hour, and
    # failed token requests per 5 minutes (a failed login counts separately: 5 per email, 20 per address).
    signups_per_hour: int = Field(default=10, ge=1)
    client_registrations_per_hour: int = Field(default=30, ge=1)
    token_failures_per_5_minutes: int = Field(default=30, ge=1)
    log_format: str = "json"
    # Set: GET /metrics requires `Authorization: Bearer <metrics_token>`.
    metrics_token: str | None = None

    # ONNX Runtime spins its intra-op threads; one keeps a core free for the event loop.
    embed_threads: int = 1
    log_level: str = "info"

    @model_validator(mode="after")
    def _normalise(self) -> Settings:
        if self.public_base_url is not None:
            self.public_base_url = self.public_base_url.rstrip("/")
        return self

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'engram.db').resolve()}"

    @property
    def llm_enabled(self) -> bool:
        return bool(self.llm_base_url)

    @property
    def resolved_public_base_url(self) -> str:
        # Derived on every read, so a copy with another host or port (``engram serve --port``) advertises that one.
        return self.public_base_url or f"http://{self.host}:{self.port}"

    def ensure_data_dir(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return self.data_dir

    def resolved_secret_key(self) -> bytes:
        """The HMAC key for API keys: from the environment, else created once under data_dir."""
        if self.secret_key:
            return self.secret_key.encode()
        path = self.ensure_data_dir() / "secret.key"
        if not path.exists():
            path.write_text(secrets.token_urlsafe(48))
            path.chmod(0o600)
        return path.read_text().strip().encode()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


__all__ = ["Field", "Settings", "get_settings"]
