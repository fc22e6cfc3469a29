"""The one place that reads the environment (prefix ``ENGRAM_``) and the config file (``engram.toml``).

Where the data lives, first found wins: ``ENGRAM_DATA_DIR``; ``data_dir`` in ``engram.toml`` (the working directory's,
else ``~/.config/engram/engram.toml``); else the per-user ``~/.local/share/engram``. The checkout's own
``engram.toml`` says ``data_dir = "data"``, so ``make run`` and the commands run there keep ``./data``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from app.setting_values import bounded, bounds_of, checked, structured

CONFIG_FILE = "engram.toml"


def config_file_candidates() -> list[Path]:
    """Where a config file is looked for, in order: the working directory, then the user's config folder."""
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [Path.cwd() / CONFIG_FILE, config_home / "engram" / CONFIG_FILE]


def find_config_file() -> Path | None:
    return next((path for path in config_file_candidates() if path.is_file()), None)


def user_data_dir() -> Path:
    """The per-user default data directory, for installs that neither configure one nor run in a checkout."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "engram"


def read_config_file(path: Path, known: set[str]) -> dict[str, Any]:
    """The settings a config file sets: the same names as the variables, without ``ENGRAM_`` and in lower case.

    An unknown name fails, naming the file and the name (a typo would otherwise be ignored). A relative
    ``data_dir`` is taken from the file's own folder, wherever the command runs."""
    import tomllib  # here: most commands run where there is no config file, and its import cost 2.5 ms of CPU

    try:
        with path.open("rb") as file:
            values = tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{path}: unknown setting {unknown[0]!r} (names as ENGRAM_ variables, in lower case)")
    if isinstance(values.get("data_dir"), str):
        values["data_dir"] = path.parent / Path(values["data_dir"]).expanduser()
    return values


ENV_PREFIX = "ENGRAM_"


def read_environment(types: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> dict[str, tuple[str, Any]]:
    """The settings the environment sets, each with the variable that set it: ``ENGRAM_NAME`` (any case) for each
    field ``name`` of ``types``; structured values as JSON. Other variables are ignored."""
    values: dict[str, tuple[str, Any]] = {}
    for key, raw in environ.items():
        if not key.upper().startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX) :].lower()
        annotation = types.get(name)
        if annotation is None:
            continue
        if structured(annotation):
            try:
                values[name] = (key, json.loads(raw))
            except ValueError as exc:
                raise ValueError(f"{key}: not valid JSON ({exc})") from None
        else:
            values[name] = (key, raw)
    return values


@dataclass(init=False)
class Settings:
    """Every knob Engram has. Tests build ``Settings(...)`` explicitly; the server uses ``get_settings()``.

    What is given to the constructor wins, then the environment, then ``engram.toml``, then the defaults. Each value
    is coerced to its field's type and checked against its bounds (app.setting_values); a problem names where the
    value came from. (A dataclass read here, not pydantic: its import alone cost every ``engram`` command 70 ms.)"""

    def __init__(self, **given: Any) -> None:
        unknown = sorted(set(given) - set(_fields()))
        if unknown:
            raise TypeError(f"Settings() got an unknown setting {unknown[0]!r}")
        # Each value with what a message about it names: the field, and where the value came from unless given here.
        found: dict[str, tuple[str, Any]] = {}
        path = find_config_file()
        if path is not None:
            found |= {
                name: (f"{name} (in {path})", value) for name, value in read_config_file(path, set(_fields())).items()
            }
        found |= {name: (f"{name} ({key})", value) for name, (key, value) in read_environment(_field_types()).items()}
        found |= {name: (name, value) for name, value in given.items()}
        self._take({name: found.get(name) or (name, _default(spec)) for name, spec in _fields().items()})

    host: str = "127.0.0.1"
    port: int = 8000
    # Several `engram serve` processes on one machine may listen on the same port (SO_REUSEPORT, Linux): the kernel
    # spreads new connections over them. Each still needs its own data_dir; they share the database and Redis.
    reuse_port: bool = False
    data_dir: Path = field(default_factory=user_data_dir)

    # Unset: SQLite under data_dir. Production: postgresql+asyncpg://...
    database_url: str | None = None
    # Unset: Qdrant's own engine in-process (qdrant-edge) under data_dir.
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    # Only for tests and small installs: qdrant-client's local mode at this path instead of a server.
    qdrant_local_path: Path | None = None
    qdrant_collection: str = "engram_memories"
    # The embedded index (qdrant-edge) in a process of its own: its queries hold the GIL, and there they hold the
    # child's, not the server's (app.memories.vector_stores.edge_process). Off: in the server's process.
    index_process: bool = True
    # Unset: coordination runs in-process (single instance only).
    redis_url: str | None = None
    # A coordination call gives up after this, retries included; rate limits (on every request) after the second.
    # The first call to find Redis hung opens a breaker: later calls fail (or count in-process) at once until it
    # answers again.
    redis_timeout_seconds: float = bounded(2.0, gt=0)
    redis_limit_timeout_seconds: float = bounded(0.25, gt=0)

    # An OpenAI-compatible LLM enables mem0's fact extraction (infer).
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_model: str = "gpt-4o-mini"

    # Peers whose X-Forwarded-For (or client_ip_header) names the client: addresses or networks, comma-separated.
    # Behind Fly's proxy: its range, with client_ip_header Fly-Client-IP (see fly.toml). Anyone else's headers are
    # ignored, so per-address limits cannot be dodged by sending them.
    trusted_proxies: str = "127.0.0.1,::1"
    client_ip_header: str | None = None

    # What clients are told to connect to (install commands, OAuth metadata). Unset: http://{host}:{port}.
    public_base_url: str | None = None

    # Keys are stored as HMAC-SHA256(secret_key, key). Unset: generated once and kept in the database, so every
    # instance of one database agrees (app.accounts.secret).
    secret_key: str | None = None

    max_body_bytes: int = 1_048_576
    # POST /v1/import takes an export this large at most (413 beyond); the CLI's `engram import` has no limit.
    import_max_bytes: int = bounded(67_108_864, ge=1)
    max_memory_chars: int = 16_000
    max_batch_size: int = 100
    # Searches drop results scoring below this unless the request sets its own threshold (0 keeps everything).
    search_threshold: float = bounded(0.05, ge=0.0, le=1.0)
    # Indexed documents (projects): larger files are skipped with a reason, not indexed.
    max_document_bytes: int = bounded(1_048_576, ge=1)
    # `engram serve` reconciles every registered project at start-up and then follows its file events.
    watch_projects: bool = True
    watch_settle_seconds: float = bounded(0.25, ge=0.0, le=5.0)

    # MCP sessions a user may hold open at once (the least recently used goes first beyond it), and how long one
    # lives without a request or an open stream. Each costs memory until it ends.
    mcp_sessions_per_user: int = bounded(32, ge=1)
    mcp_session_idle_seconds: float = bounded(600.0, gt=0)
    # Event streams (SSE: a session's REST stream, the dashboard's) a user may hold open at once; one more is a 429.
    sse_streams_per_user: int = bounded(32, ge=1)

    # Live streams (SSE, MCP push) outlive the request that opened them: how often they re-check its credential.
    stream_recheck_seconds: float = 15.0
    # How often each server reads the database for revocations made in other processes (the CLI of an embedded
    # install, an instance Redis did not reach): one indexed read per interval, whatever the number of streams.
    revocation_poll_seconds: float = bounded(0.5, gt=0)
    # An API key verified lately is answered from memory for this long at most (app.accounts.verified_keys); its
    # revocation drops it at once when announced. 0: every request reads the database.
    verified_key_seconds: float = bounded(5.0, ge=0, le=3600)

    # Quotas: a plan per user (users.plan); signups get default_plan. Override with JSON, e.g.
    # ENGRAM_PLANS='{"free": {"requests_per_minute": 600, "key_requests_per_minute": 300, "max_memories": 10000}}'.
    plans: dict[str, dict[str, int]] = field(
        default_factory=lambda: {
            "free": {"requests_per_minute": 600, "key_requests_per_minute": 300, "max_memories": 10_000},
            "pro": {
                "requests_per_minute": 6000,
                "key_requests_per_minute": 3000,
                "max_memories": 1_000_000,
                "weight": 4,
            },
        }
    )
    default_plan: str = "free"
    # Per client address, for the endpoints anyone can call: accounts and OAuth clients created per hour, and
    # failed token requests per 5 minutes (a failed login counts separately: 5 per email, 20 per address).
    signups_per_hour: int = bounded(10, ge=1)
    client_registrations_per_hour: int = bounded(30, ge=1)
    token_failures_per_5_minutes: int = bounded(30, ge=1)
    # OAuth device flow (edge sync): device codes asked for per address per hour, and wrong user codes typed on
    # /device per 15 minutes, counted per user and per address (RFC 8628 section 5.1: codes must not be guessable).
    device_authorizations_per_hour: int = bounded(60, ge=1)
    device_code_failures_per_15_minutes: int = bounded(10, ge=1)
    # auto: text on a terminal (a person running `engram serve`), JSON elsewhere (containers, pipes, log collectors).
    log_format: Literal["auto", "json", "text"] = "auto"
    # Set: GET /metrics requires `Authorization: Bearer <metrics_token>`.
    metrics_token: str | None = None

    # Edge sync (app.sync). Versions stamped further ahead of this clock are refused; a node's batches and pages
    # hold this many changes; a node retries an unreachable edge at most this far apart, long-polls this long, and
    # notices links made or removed by `engram sync` this often. sync_node_name: how the edge lists this machine.
    sync_max_clock_skew_seconds: float = bounded(300.0, gt=0)
    # The protocol's largest batch: a backlog drains about a tenth faster than in batches of 500 (bench/sync.py).
    sync_batch_size: int = bounded(1000, ge=1, le=1000)
    # A push body over this goes in parts: the edge takes at most 16 MiB; lower it for a proxy in front of the edge
    # that takes less (nginx's default is 1 MiB). A batch of long texts in a non-Latin script can pass 16 MiB.
    sync_push_max_bytes: int = bounded(16 * 1024 * 1024, ge=16 * 1024, le=16 * 1024 * 1024)
    # On an edge: the changes pushed lately, kept as pulls send them, for the nodes that pull close behind (0: none).
    sync_pull_cache_bytes: int = bounded(32 * 1024 * 1024, ge=0)
    sync_retry_max_seconds: float = bounded(1.0, gt=0)
    # A long poll waits this long at the edge (its answer has half a request's timeout on top): with the timeout
    # below, a hung edge shows offline within 14 s, where the design asks for 15 s.
    sync_pull_wait_seconds: float = bounded(9.0, ge=0, le=60)
    # The most a node waits on its edge for each part of a request (connecting, taking each part of a body, an
    # answer); app.sync.timeouts bounds each request as a whole.
    sync_request_timeout_seconds: float = bounded(10.0, gt=0, le=300)
    sync_links_poll_seconds: float = bounded(1.0, gt=0)
    sync_node_name: str | None = None
    # Losing versions kept per memory as CONFLICT events in its history, the newest; older ones are deleted.
    sync_max_conflicts_per_memory: int = bounded(20, ge=0, le=1000)
    # How often an embedded index applies what other instances sharing the database wrote (issue 9b).
    index_follow_seconds: float = bounded(0.25, gt=0)

    # Threads one embedding may use when it runs alone (a lone search gets both cores); under concurrency each
    # embedding takes one, so the event loop and the other requests are not starved.
    embed_threads: int = bounded(2, ge=1)
    # Texts of concurrent requests embedded in one model run at most (app.admission.batching).
    embed_max_batch: int = bounded(32, ge=1, le=256)
    # Model runs at once (one per core): each takes one thread, unless it runs alone.
    embed_runners: int = bounded(2, ge=1, le=64)
    # Admission control (app.admission). Requests in service at once are learned from their latency between these
    # bounds; one that finds no slot waits at most admission_queue_timeout_seconds, or
    # admission_overloaded_wait_seconds while waits have stood above admission_target_delay_seconds for 100 ms
    # (CoDel), then gets 503. A tenant holding more than its plan-weighted share of a busy server gets 429; one with
    # admission_min_share requests or fewer never does.
    # A request takes its slot only once its body has arrived, so a client slow to send one (or that never finishes)
    # holds no slot of the server's; a body that takes longer than this is a 408.
    request_body_seconds: float = bounded(30.0, gt=0, le=3600)
    admission_initial_limit: int = bounded(8, ge=1)
    admission_min_limit: int = bounded(2, ge=1)
    admission_max_limit: int = bounded(32, ge=1)
    admission_queue_timeout_seconds: float = bounded(0.5, gt=0, le=30)
    admission_overloaded_wait_seconds: float = bounded(0.1, gt=0, le=30)
    admission_target_delay_seconds: float = bounded(0.02, gt=0, le=5)
    admission_min_share: int = bounded(8, ge=1)
    # The limit shrinks once a window's median request takes this many times the fastest recent one of its kind:
    # lower keeps requests quicker and refuses more under overload, higher admits more and lets them slow each other.
    # The fastest is a request alone, whose embedding had every core: at 1.5, two requests sharing two cores already
    # shrank the limit, which then sat at its minimum and the embedder never batched (README, Under load).
    admission_latency_tolerance: float = bounded(2.0, ge=1.1, le=10)
    # How long a statement waits for SQLite's write lock (the busy timeout) before its request hears 503 with
    # Retry-After: writes hold the lock for milliseconds (app.group_commit), so a longer wait is a stuck or
    # overloaded database, and a client told so at once can retry elsewhere. Background work retries on its own.
    database_busy_timeout_seconds: float = bounded(5.0, gt=0, le=60)
    # Search queries whose vectors are kept (per tenant; about 3 KB each): a repeated search skips the model.
    query_cache_size: int = bounded(1024, ge=0)
    log_level: str = "info"

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes``, checked as the constructor checks its values (the sources are not read again)."""
        unknown = sorted(set(changes) - set(_fields()))
        if unknown:
            raise TypeError(f"Settings.replace() got an unknown setting {unknown[0]!r}")
        changed = copy.copy(self)
        changed._take({name: (name, value) for name, value in changes.items()})
        return changed

    def _take(self, values: Mapping[str, tuple[str, Any]]) -> None:
        """Set each named field from (source, value), coerced to its type and checked; every problem is reported at
        once, each named by its source. Then the rules between settings."""
        types = _field_types()
        problems = []
        for name, (source, value) in values.items():
            try:
                setattr(self, name, checked(value, types[name], bounds_of(_fields()[name])))
            except ValueError as exc:
                problems.append(f"{source}: {exc}")
        if problems:
            raise ValueError("; ".join(problems))
        from app.client_address import parse_networks

        parse_networks(self.trusted_proxies)  # a bad entry fails at start-up, naming it
        if not self.admission_min_limit <= self.admission_initial_limit <= self.admission_max_limit:
            raise ValueError("admission limits must satisfy min_limit <= initial_limit <= max_limit")
        if self.public_base_url is not None:
            self.public_base_url = self.public_base_url.rstrip("/")

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

    def data_dir_origin(self) -> str:
        """Where ``data_dir`` came from, for messages that must say how to choose another."""
        if os.environ.get("ENGRAM_DATA_DIR"):
            return "ENGRAM_DATA_DIR"
        path = find_config_file()
        if path is not None and "data_dir" in read_config_file(path, set(_field_types())):
            return f"data_dir in {path}"
        if self.data_dir == user_data_dir():
            return "the per-user default"
        return "the settings given"

    def ensure_data_dir(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return self.data_dir


@lru_cache(maxsize=1)
def _fields() -> dict[str, dataclasses.Field[Any]]:
    return {spec.name: spec for spec in dataclasses.fields(Settings)}


@lru_cache(maxsize=1)
def _field_types() -> dict[str, Any]:
    """Each field's type, evaluated (this module's annotations are strings)."""
    return {name: hint for name, hint in typing.get_type_hints(Settings).items() if name in _fields()}


def _default(spec: dataclasses.Field[Any]) -> Any:
    return spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


__all__ = ["Settings", "get_settings"]
