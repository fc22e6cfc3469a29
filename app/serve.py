"""``engram serve``: the app under uvicorn, as in production, on a socket of its own or on one other processes share
(ENGRAM_REUSE_PORT), bound before the app is built. The test harness serves with the same keep-alive.

Imported only to serve: it imports the app, uvicorn and the logging set-up when it runs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket

    from app.settings import Settings

KEEP_ALIVE_SECONDS = 75


def serve(settings: Settings, *, host: str | None, port: int | None) -> int:
    """Serve until stopped; ``host`` and ``port``, when given, override the settings'. The exit code: 0, 2 for a
    database behind the newest revision, 3 for an app whose start-up failed or an address it cannot listen on."""
    import contextlib
    import logging

    import uvicorn

    from app.gc_tuning import tune_for_serving
    from app.main import create_app
    from app.migrate import behind_head
    from app.observability.logs import configure_logging

    settings.ensure_data_dir()
    problem = behind_head(settings.resolved_database_url)
    if problem is not None:
        print(f"engram serve: {problem}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    flags = {name: value for name, value in (("host", host), ("port", port)) if value is not None}
    # Same as ENGRAM_HOST / ENGRAM_PORT: the advertised URL follows them unless ENGRAM_PUBLIC_BASE_URL is set.
    settings = settings.replace(**flags)
    # Bound before the app is built (which loads the model and opens the index): a port another process holds is
    # said at once, in words, not as an error in the log after the whole start-up.
    try:
        listening = _listening_socket(settings.host, settings.port, reuse_port=settings.reuse_port)
    except OSError as exc:
        print(
            f"engram serve: cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}"
            " (another engram serve? pick another port: ENGRAM_PORT, --port, or make run PORT=8001)",
            file=sys.stderr,
        )
        return 3
    app = create_app(settings)
    app.on_startup.append(tune_for_serving)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        # Our handler formats uvicorn's error log too; the access log is ours (app.observability.middleware).
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
        # The app decides whose forwarded headers to believe (app.client_address, ENGRAM_TRUSTED_PROXIES).
        proxy_headers=False,
        # Longer than any client's own idle timeout (httpx 5 s, Node 4-5 s, proxies 60 s): the client closes an idle
        # connection first, never the server in the instant a request is sent on it (a lost request, unretried).
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    server = uvicorn.Server(config)
    # Uvicorn names the address only when it binds the socket itself.
    logging.getLogger("engram.serve").info("listening on http://%s:%s (Ctrl+C stops)", settings.host, settings.port)
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: Ctrl-C after a graceful shutdown is no error
        server.run(sockets=[listening])
    return 0 if server.started else 3  # as uvicorn.run: the app's start-up failed


def _listening_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    """The server's listening socket; with ``reuse_port`` one other processes may bind too (SO_REUSEPORT): the kernel
    spreads connections over them."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
