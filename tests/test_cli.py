"""The engram command, run as a user would run it: the installed entry point, from a folder outside the checkout,
with HOME in a temporary folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

ENGRAM = str(Path(sys.executable).with_name("engram"))


def _run(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``engram *args``, from ``cwd`` (default: the temporary HOME, outside the checkout and its engram.toml)."""
    where = cwd or env["HOME"]
    return subprocess.run([ENGRAM, *args], env=env, cwd=where, capture_output=True, text=True, timeout=120)


@contextmanager
def _serving(env: dict[str, str], port: int, *args: str) -> Iterator[Path]:
    """``engram serve *args`` until the block ends; yields the file its log (stderr) goes to, readable after."""
    fd, name = tempfile.mkstemp(prefix="serve-", suffix=".log", dir=env["ENGRAM_DATA_DIR"])
    log = Path(name)
    with os.fdopen(fd, "wb") as sink:
        proc = subprocess.Popen(
            [ENGRAM, "serve", *args], env=env, cwd=env["HOME"], stdout=subprocess.DEVNULL, stderr=sink
        )
    try:
        deadline = time.monotonic() + 180  # a loaded 2-core machine starts a server slowly
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not come up: {log.read_text(errors='replace')[-4000:]}")
            time.sleep(0.1)
        yield log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _env(tmp_path: Path, database_url: str | None = None, *, data_dir: bool = True) -> dict[str, str]:
    """The environment of a user: ENGRAM_DATA_DIR=tmp_path (unless ``data_dir`` is False), and a HOME of its own
    beside it (tmp_path-home), which is where commands run unless told otherwise."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "XDG_"))}
    home = tmp_path.with_name(tmp_path.name + "-home")
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    if data_dir:
        env["ENGRAM_DATA_DIR"] = str(tmp_path)
    env["MEM0_TELEMETRY"] = "False"
    if database_url:
        env["ENGRAM_DATABASE_URL"] = database_url
    return env


def _json_lines(stdout: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert all(isinstance(row, dict) for row in rows), stdout
    return rows


def _exercise(env: dict[str, str]) -> None:
    assert _run(env, "migrate").returncode == 0
    created = _run(env, "users", "create", "Ada@Example.test")
    assert created.returncode == 0, created.stderr
    user_id = created.stdout.strip()
    assert created.stdout == user_id + "\n"
    assert user_id.startswith("u_") and "__" not in user_id

    duplicate = _run(env, "users", "create", "ada@example.test")
    assert duplicate.returncode == 1 and "already exists" in duplicate.stderr

    key_run = _run(env, "keys", "create", user_id, "--name", "laptop", "--scope", "read")
    assert key_run.returncode == 0, key_run.stderr
    key = key_run.stdout.strip()
    assert key_run.stdout == key + "\n" and key.startswith("egk_")

    listing = _run(env, "keys", "list", user_id)
    assert listing.returncode == 0
    (laptop,) = [row for row in _json_lines(listing.stdout) if row["name"] == "laptop"]
    assert (laptop["scope"], laptop["status"], laptop["last_used_at"]) == ("read", "active", None)
    assert key not in listing.stdout and key.startswith(laptop["prefix"].rstrip("…"))
    key_id = laptop["id"]

    revoked = _run(env, "keys", "revoke", key_id)
    assert revoked.returncode == 0
    (laptop,) = [row for row in _json_lines(_run(env, "keys", "list", user_id).stdout) if row["name"] == "laptop"]
    assert laptop["status"] == "revoked" and laptop["revoked_at"] is not None

    bound = _run(env, "keys", "create", user_id, "--name", "coder", "--session", "alpha", "--agent", "coder")
    assert bound.returncode == 0, bound.stderr
    (coder,) = [row for row in _json_lines(_run(env, "keys", "list", user_id).stdout) if row["name"] == "coder"]
    assert (coder["session"], coder["agent"], laptop["session"], laptop["agent"]) == ("alpha", "coder", None, None)
    # Both or neither, each named as in a session URL.
    half = _run(env, "keys", "create", user_id, "--session", "alpha")
    assert half.returncode == 1 and "needs both session and agent; agent is missing" in half.stderr
    bad = _run(env, "keys", "create", user_id, "--session", "alpha", "--agent", "a__b")
    assert bad.returncode == 1 and "agent name 'a__b' must not contain '__'" in bad.stderr

    assert _run(env, "keys", "create", "u_nobody").returncode == 1
    assert _run(env, "keys", "revoke", "key_nobody").returncode == 1
    assert _run(env, "keys", "create", user_id, "--scope", "admin").returncode == 2


def test_cli_manages_users_and_keys_on_sqlite(tmp_path: Path) -> None:
    _exercise(_env(tmp_path))
    assert (tmp_path / "engram.db").exists()


@pytest.mark.postgres
def test_cli_manages_users_and_keys_on_postgres(tmp_path: Path, pg_database_url: str) -> None:
    _exercise(_env(tmp_path, pg_database_url))


def _migrated_with_a_key(tmp_path: Path, email: str) -> tuple[dict[str, str], int, str]:
    """An embedded deployment in ``tmp_path`` (migrated, serving on a free port once started) and a user's key."""
    from tests.harness import free_port

    env = _env(tmp_path)
    port = free_port()
    env["ENGRAM_PORT"] = str(port)
    assert _run(env, "migrate").returncode == 0
    user_id = _run(env, "users", "create", email).stdout.strip()
    return env, port, _run(env, "keys", "create", user_id).stdout.strip()


def test_reindex_rebuilds_the_index_from_the_database(tmp_path: Path) -> None:
    env, port, key = _migrated_with_a_key(tmp_path, "re@example.test")

    from tests.api.test_crash import _start

    server = _start(env, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as http:
            ids = [
                http.post("/v1/memories", json={"content": f"reindex fact number {i}"}).json()["id"] for i in range(5)
            ]
    finally:
        server.terminate()
        server.wait(timeout=30)

    result = _run(env, "reindex")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "reindexed 5 memories into qdrant-edge\n"
    assert result.stderr == ""

    server = _start(env, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as http:
            found = http.post("/v1/memories/search", json={"query": "reindex fact number 3", "limit": 5}).json()
        assert found["results"][0]["id"] == ids[3]
        assert {r["id"] for r in found["results"]} == set(ids)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_serve_port_flag_moves_every_advertised_url(tmp_path: Path) -> None:
    from tests.harness import free_port

    env = _env(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    assert _run(env, "migrate").returncode == 0
    with _serving(env, port, "--host", "127.0.0.1", "--port", str(port)), httpx.Client(base_url=base) as http:
        challenge = http.get("/v1/memories")
        assert challenge.status_code == 401
        assert (
            f'resource_metadata="{base}/.well-known/oauth-protected-resource/v1"'
            in challenge.headers["www-authenticate"]
        )
        assert http.get("/.well-known/oauth-protected-resource/v1").json()["resource"] == f"{base}/v1"
        assert http.get("/.well-known/oauth-authorization-server").json()["issuer"] == base


def test_serve_on_a_port_another_process_holds_says_so_before_starting(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert _run(env, "migrate").returncode == 0
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        refused = _run(env, "serve", "--host", "127.0.0.1", "--port", str(port))
    assert refused.returncode == 3, refused.stderr
    assert f"engram serve: cannot listen on 127.0.0.1:{port}: Address already in use" in refused.stderr
    assert "make run PORT=" in refused.stderr
    assert "Application startup" not in refused.stderr  # refused before the app was built


def test_a_configured_public_url_wins_over_the_port_flag(tmp_path: Path) -> None:
    from tests.harness import free_port

    env = _env(tmp_path)
    env["ENGRAM_PUBLIC_BASE_URL"] = "https://engram.example.test/"
    port = free_port()
    assert _run(env, "migrate").returncode == 0
    with _serving(env, port, "--port", str(port)), httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
        assert http.get("/.well-known/oauth-authorization-server").json()["issuer"] == "https://engram.example.test"


def test_reindex_refuses_while_a_server_holds_the_index(tmp_path: Path) -> None:
    env, port, key = _migrated_with_a_key(tmp_path, "busy@example.test")
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {key}"}

    def add(http: httpx.Client, n: int) -> str:
        response = http.post("/v1/memories", json={"content": f"busy index probe {n} kiwi{n}"})
        assert response.status_code == 201, response.text
        memory_id: str = response.json()["id"]
        return memory_id

    with _serving(env, port) as log, httpx.Client(base_url=base, headers=headers) as http:
        ids = [add(http, n) for n in range(3)]
        refused = _run(env, "reindex")
        assert refused.returncode == 1
        assert refused.stdout == ""
        assert f"the vector index at {tmp_path / 'qdrant-edge' / 'engram_memories'} is in use" in refused.stderr
        assert "stop the server first, or run reindex against a Qdrant server" in refused.stderr
        ids += [add(http, n) for n in range(3, 6)]
        assert http.get("/readyz").json()["checks"]["vector_index"]["status"] == "ok"
    # Stopping flushes the index one last time, and a failed flush is logged: the server's files were left intact.
    assert "flush of" not in log.read_text()

    with _serving(env, port) as log, httpx.Client(base_url=base, headers=headers) as http:
        for memory_id in ids:
            assert http.get(f"/v1/memories/{memory_id}").status_code == 200
        found = http.post("/v1/memories/search", json={"query": "busy index probe 4 kiwi4", "limit": 6}).json()
        assert found["results"][0]["id"] == ids[4]
        assert {r["id"] for r in found["results"]} == set(ids)
    assert "flush of" not in log.read_text()


def test_serve_on_a_database_never_migrated_says_to_migrate_first(tmp_path: Path) -> None:
    env = _env(tmp_path)
    done = _run(env, "serve")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "engram serve: the database has no tables yet: run `engram migrate` first (`make run` does both)"
    )
    assert _run(env, "migrate").returncode == 0


# --- where the data is, and what the command says when it cannot open it -------------------------------------------


def _head() -> str:
    from app.migrate import head_revision

    return head_revision("sqlite+aiosqlite://")


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """A failure told in one line on stderr, nothing on stdout, no traceback."""
    assert done.returncode != 0 and done.stdout == "", (done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr.strip()


def test_without_configuration_the_data_is_per_user_and_a_missing_database_is_one_line(tmp_path: Path) -> None:
    env = _env(tmp_path, data_dir=False)
    default = Path(env["HOME"]) / ".local" / "share" / "engram"

    missing = _one_line(_run(env, "users", "list"))
    assert missing == (
        f"error: no database in {default} (the data directory, from the per-user default): run `engram migrate` to "
        "make one there, or choose another data directory with ENGRAM_DATA_DIR=DIR or data_dir in engram.toml"
    )
    assert not default.exists()  # nothing made by a command that only reads

    first = _run(env, "migrate")
    assert first.returncode == 0 and first.stdout == ""
    assert first.stderr == (
        f"migrated the database in {default} (the data directory, from the per-user default) "
        f"from an empty database to {_head()}, the newest revision\n"
    )
    again = _run(env, "migrate")
    assert again.stderr.endswith(f"is already at the newest revision, {_head()}\n")

    user = _run(env, "users", "create", "far@example.test").stdout.strip()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = _run(env, "users", "list", cwd=elsewhere)
    assert [(row["id"], row["email"]) for row in _json_lines(listed.stdout)] == [(user, "far@example.test")]
    assert (default / "engram.db").is_file()


def test_a_config_file_chooses_the_data_and_the_environment_wins(tmp_path: Path) -> None:
    env = _env(tmp_path, data_dir=False)
    config = Path(env["HOME"]) / ".config" / "engram"
    config.mkdir(parents=True)
    (config / "engram.toml").write_text(f'data_dir = "{tmp_path / "from-home-config"}"\n')
    here = tmp_path / "project"
    here.mkdir()

    assert _run(env, "migrate", cwd=here).returncode == 0
    assert (tmp_path / "from-home-config" / "engram.db").is_file()

    # The working directory's engram.toml comes first; a relative data_dir is the file's own folder's.
    (here / "engram.toml").write_text('data_dir = "local-data"\nlog_format = "text"\n')
    assert _run(env, "migrate", cwd=here).returncode == 0
    assert (here / "local-data" / "engram.db").is_file()
    assert _run(env, "users", "create", "here@example.test", cwd=here).returncode == 0
    assert [row["email"] for row in _json_lines(_run(env, "users", "list", cwd=here).stdout)] == ["here@example.test"]
    from_home = _run(env, "users", "list", cwd=tmp_path)  # no engram.toml there: ~/.config/engram's
    assert from_home.returncode == 0 and from_home.stdout == ""

    env["ENGRAM_DATA_DIR"] = str(tmp_path / "from-env")
    told = _one_line(_run(env, "users", "list", cwd=here))
    assert f"no database in {tmp_path / 'from-env'} (the data directory, from ENGRAM_DATA_DIR)" in told

    (here / "engram.toml").write_text('data_dri = "typo"\n')
    bad = _one_line(_run(env, "users", "list", cwd=here))
    assert bad == f"error: invalid settings: {here / 'engram.toml'}: unknown setting 'data_dri' (names as ENGRAM_ " + (
        "variables, in lower case)"
    )

    # A bad value is named with where it came from; every one is told at once.
    (here / "engram.toml").write_text('port = "eighty"\n')
    env["ENGRAM_SYNC_BATCH_SIZE"] = "0"
    bad = _one_line(_run(env, "users", "list", cwd=here))
    assert bad == (
        f"error: invalid settings: port (in {here / 'engram.toml'}): Input should be a valid integer, unable to parse "
        "string as an integer; sync_batch_size (ENGRAM_SYNC_BATCH_SIZE): Input should be greater than or equal to 1"
    )


def test_a_database_that_cannot_be_opened_is_one_line_naming_it(tmp_path: Path) -> None:
    from tests.harness import free_port

    env = _env(tmp_path)
    (tmp_path / "engram.db").mkdir()  # there, but not a database file
    told = _one_line(_run(env, "keys", "list", "u_someone"))
    assert told == (
        f"error: cannot use the database in {tmp_path} (the data directory, from ENGRAM_DATA_DIR): unable to open "
        "database file; choose another data directory with ENGRAM_DATA_DIR=DIR or data_dir in engram.toml"
    )

    env["ENGRAM_DATABASE_URL"] = f"postgresql+asyncpg://postgres:hunter2@127.0.0.1:{free_port()}/engram"
    unreachable = _one_line(_run(env, "users", "list"))
    assert unreachable.startswith("error: cannot use the database at postgresql+asyncpg://postgres:***@127.0.0.1:")
    assert unreachable.endswith("; set ENGRAM_DATABASE_URL (or database_url in engram.toml) to another")
    assert "hunter2" not in unreachable


@pytest.mark.postgres
def test_a_postgres_database_never_migrated_says_to_migrate(tmp_path: Path, pg_server: str) -> None:
    import uuid

    from tests.conftest import _admin_execute

    name = f"engram_blank_{uuid.uuid4().hex[:12]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    try:
        env = _env(tmp_path, f"postgresql+asyncpg://{pg_server}/{name}")
        told = _one_line(_run(env, "users", "list"))
        assert told == (
            f"error: the database at postgresql+asyncpg://{pg_server}/{name} has no tables yet: run `engram migrate` "
            "first, or set ENGRAM_DATABASE_URL (or database_url in engram.toml) to another"
        )
        migrated = _run(env, "migrate")
        assert migrated.stderr == (
            f"migrated the database at postgresql+asyncpg://{pg_server}/{name} from an empty database to {_head()}, "
            "the newest revision\n"
        )
        assert _run(env, "users", "list").returncode == 0
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- the shape of every command: version, help, list output -------------------------------------------------------


def _commands(parser: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command of the parser (the leaves), with its words: ("keys", "list"), ..."""
    import argparse

    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        yield path, parser
    for group in groups:
        for name, sub in group.choices.items():
            yield from _commands(sub, (*path, name))


def test_version_is_the_installed_one(tmp_path: Path) -> None:
    from importlib.metadata import version

    done = _run(_env(tmp_path), "--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"engram {version('engram')}\n", "")


def test_every_option_has_help_that_says_its_default(tmp_path: Path) -> None:
    from app.cli import build_parser

    commands = dict(_commands(build_parser()))
    assert {("users", "list"), ("projects", "remove"), ("keys", "list")} <= set(commands)
    for words, parser in commands.items():
        help_text = " ".join(parser.format_help().split())
        for action in parser._actions:
            if not action.option_strings or action.dest == "help":
                continue
            assert action.help, f"engram {' '.join(words)} {action.option_strings[0]} has no help"
            if action.default not in (None, False, [], "==SUPPRESS=="):
                assert f"(default: {action.default})" in help_text, (words, action.option_strings)

    shown = _run(_env(tmp_path), "keys", "create", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    assert "--scope {read,write} what the key may do (default: write)" in text
    assert "--name NAME what the key is for, shown in lists (default: default)" in text


def _parsers(parser: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every parser, the groups of sub-commands included, with its words: (), ("keys",), ("keys", "list"), ..."""
    import argparse

    yield path, parser
    for group in [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]:
        for name, sub in group.choices.items():
            yield from _parsers(sub, (*path, name))


def test_every_argument_and_command_has_help(tmp_path: Path) -> None:
    import argparse

    from app.cli import build_parser

    parsers = dict(_parsers(build_parser()))
    assert {(), ("users",), ("users", "create"), ("sync", "clients", "create")} <= set(parsers)
    for words, parser in parsers.items():
        for action in parser._actions:
            if action.dest == "help":
                continue
            name = "/".join(action.option_strings) or action.metavar or action.dest
            assert action.help, f"engram {' '.join(words)}: {name} has no help"
            if isinstance(action, argparse._SubParsersAction):
                # argparse lists a sub-command under its group only when it was given help
                helped = {choice.dest for choice in action._choices_actions if choice.help}
                unhelped = sorted(set(action.choices) - helped)
                assert not unhelped, f"engram {' '.join(words)}: {unhelped} have no help"

    shown = _run(_env(tmp_path), "users", "create", "--help")
    assert shown.returncode == 0
    assert "email the new user's email address" in " ".join(shown.stdout.split())


def test_every_list_command_prints_json_lines_or_a_table(tmp_path: Path) -> None:
    from app.cli import build_parser

    listing = [words for words, parser in _commands(build_parser()) if words[-1] == "list"]
    assert set(listing) == {("users", "list"), ("keys", "list"), ("oauth", "clients", "list"), ("projects", "list")}
    for words, parser in _commands(build_parser()):
        if words[-1] == "list":
            (option,) = [a for a in parser._actions if "--format" in a.option_strings]
            assert (tuple(option.choices), option.default) == (("json", "table"), "json"), words

    env = _env(tmp_path)
    assert _run(env, "migrate").returncode == 0
    user = _run(env, "users", "create", "lister@example.test").stdout.strip()
    assert _run(env, "keys", "create", user, "--name", "my laptop").returncode == 0
    folder = tmp_path / "docs"
    folder.mkdir()
    assert _run(env, "projects", "add", "docs", str(folder), "--user", user).returncode == 0
    args = {("users", "list"): [], ("keys", "list"): [user], ("oauth", "clients", "list"): [user]}
    for words in listing:
        as_json = _run(env, *words, *args.get(words, []))
        assert as_json.returncode == 0, as_json.stderr
        rows = _json_lines(as_json.stdout)
        as_table = _run(env, *words, *args.get(words, []), "--format", "table")
        assert as_table.returncode == 0, as_table.stderr
        header, *lines = as_table.stdout.splitlines()
        assert header == header.upper() and header.split()[0] in {"ID", "CLIENT_ID", "NAME"}, header
        assert len(lines) == len(rows), as_table.stdout
    table = _run(env, "keys", "list", user, "--format", "table").stdout.splitlines()
    header = ["ID", "NAME", "SCOPE", "PREFIX", "STATUS", "SESSION", "AGENT", "CREATED_AT", "LAST_USED_AT"]
    assert table[0].split() == header
    assert "my laptop" in table[1] and table[1].rstrip().endswith("-")  # never used
    assert table[1].index("my laptop") == table[0].index("NAME")  # aligned


# --- simple commands stay light ---------------------------------------------------------------------------------

# The modules that describe a command group's arguments (app.sync.cli is always loaded: main reads the argv
# with it).
DESCRIBED_BY = {
    "users": "app.accounts.cli",
    "keys": "app.accounts.cli",
    "oauth": "app.oauth.cli",
    "projects": "app.projects.cli",
}
HEAVY = ("onnxruntime", "mem0", "qdrant_client", "qdrant_edge", "litestar", "uvicorn", "redis", "mcp", "numpy")


def _imported(env: dict[str, str], *args: str) -> set[str]:
    """The modules loaded when the real entry point has run ``engram *args``: ``sys.modules`` as the process exits
    (``python -X importtime`` would miss a module loaded with importlib.import_module)."""
    code = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: sys.stderr.write('modules: ' + ' '.join(sys.modules) + '\\n'))\n"
        f"sys.argv = [{ENGRAM!r}, *sys.argv[1:]]\n"
        f"runpy.run_path({ENGRAM!r}, run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=env["HOME"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (modules,) = [line for line in done.stderr.splitlines() if line.startswith("modules: ")]
    return set(modules.split()[1:])


def test_simple_commands_import_none_of_the_heavy_parts(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert _run(env, "migrate").returncode == 0
    user = _run(env, "users", "create", "light@example.test").stdout.strip()
    simple = (
        ["--help"],
        ["--version"],
        ["users", "list"],
        ["users", "create", "light2@example.test"],
        ["keys", "list", user],
        ["oauth", "clients", "list", user],
        ["projects", "list"],
        ["sync", "status"],
    )
    for args in simple:
        loaded = _imported(env, *args)
        heavy = sorted(name for name in loaded if name.split(".")[0] in HEAVY)
        assert heavy == [], f"engram {' '.join(args)} imported {heavy[:5]}"
        # Nor the parts of the API and of the network: the settings are read without pydantic, only the commands
        # that talk to a server load httpx, and OAuth clients are listed without the OAuth server (authlib).
        packages = {name.split(".")[0] for name in loaded}
        unwanted = sorted({"pydantic", "httpx", "authlib"} & packages)
        assert unwanted == [], f"engram {' '.join(args)} imported {unwanted}"
        assert "tomllib" not in packages, args  # there is no config file to read
        # Each command group is described by its own module, imported only when the command line names the group.
        others = {*DESCRIBED_BY.values(), "app.portability.cli"} - {DESCRIBED_BY.get(args[0])}
        assert not others & loaded, (args, sorted(others & loaded))
        if args[0].startswith("--"):  # answered by the parser: not even the database or the settings
            assert not {"sqlalchemy", "asyncio"} & packages, args


def _collections_during(env: dict[str, str], *args: str) -> tuple[int, bool]:
    """How many garbage collections ``main(args)`` ran, and whether the collector is on after it."""
    code = (
        "import gc, sys; from app.cli import main; runs = []; "
        "gc.callbacks.append(lambda phase, _: runs.append(phase)); "
        "main(sys.argv[1:]); print(runs.count('start'), gc.isenabled())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=env["HOME"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    count, enabled = done.stdout.splitlines()[-1].split()
    return int(count), enabled == "True"


def test_a_brief_command_runs_without_the_garbage_collector_and_others_with_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    collections, collecting = _collections_during(env, "migrate")
    assert collections > 0 and collecting  # alembic and SQLAlchemy make garbage enough
    assert _collections_during(env, "users", "list") == (0, False)
    assert _collections_during(env, "sync", "status") == (0, False)


# --- projects remove, and index's advice -------------------------------------------------------------------------


def test_projects_remove_forgets_the_folder(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert _run(env, "migrate").returncode == 0
    user = _run(env, "users", "create", "remover@example.test").stdout.strip()
    folder = tmp_path / "shop"
    folder.mkdir()
    assert _run(env, "projects", "add", "shop", str(folder), "--user", user).returncode == 0
    assert _run(env, "projects", "add", "blog", str(folder), "--user", user).returncode == 0

    removed = _run(env, "projects", "remove", "shop")
    assert removed.returncode == 0, removed.stderr
    (row,) = _json_lines(removed.stdout)
    assert (row["name"], row["path"], row["user"]) == ("shop", str(folder), user)
    assert [row["name"] for row in _json_lines(_run(env, "projects", "list").stdout)] == ["blog"]

    again = _one_line(_run(env, "projects", "remove", "shop"))
    assert again == "error: no project named shop"
    assert _one_line(_run(env, "projects", "remove", "blog", "--user", "u_other")) == (
        "error: no project named blog for user u_other"
    )


def test_index_of_a_folder_without_url_says_how(tmp_path: Path) -> None:
    env = _env(tmp_path)
    folder = tmp_path / "repo"
    folder.mkdir()
    for target in (str(folder), "./repo"):
        told = _one_line(_run(env, "index", target, cwd=tmp_path))
        assert told == (
            f"error: {target} is a folder, not a registered project: register it with `engram projects add NAME "
            f"{target} --user USER_ID` and run `engram index NAME`, or index it into a remote Engram with "
            "`--url URL --key KEY --session NAME`"
        )
