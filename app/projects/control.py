"""The local control channel: how ``engram index NAME`` asks a running ``engram serve`` to do the work.

A Unix socket inside the data dir, in a folder only this OS user may enter (0700) and itself 0600: whoever can
connect could already read the data dir's database and key secret, so the socket grants nothing new. It is never
on the network. One JSON request per connection, one JSON answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import stat
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_MESSAGE = 1 << 20
# Unix socket paths are limited to 107 bytes; a deep data dir gets its socket under the temp dir instead.
MAX_SOCKET_PATH = 100

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def socket_path(data_dir: Path) -> Path:
    """Where the server listens for this data dir (the command line computes the same path)."""
    data_dir = data_dir.resolve()
    local = data_dir / "run" / "control.sock"
    if len(str(local)) <= MAX_SOCKET_PATH:
        return local
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"engram-{os.getuid()}" / f"{digest}.sock"


def _private_dir(folder: Path) -> bool:
    """Create the socket's folder (0700) or check an existing one is ours and private."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid():
        log.warning("control socket folder %s belongs to another user; the control channel is off", folder)
        return False
    if stat.S_IMODE(info.st_mode) != 0o700:
        folder.chmod(0o700)
    return True


def _answering(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


class ControlServer:
    """Serves requests on the data dir's socket until closed."""

    def __init__(self, data_dir: Path, handler: Handler) -> None:
        self.path = socket_path(data_dir)
        self.handler = handler
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> bool:
        """Listen; False (and a warning) when another live server already owns the socket or it cannot be made."""
        try:
            if not _private_dir(self.path.parent):
                return False
            if self.path.exists() or self.path.is_symlink():
                if _answering(self.path):
                    log.warning("another server answers on %s; this one has no control channel", self.path)
                    return False
                self.path.unlink()  # left behind by a server that did not stop cleanly
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), limit=MAX_MESSAGE)
            self.path.chmod(0o600)
        except OSError:
            log.warning("could not open the control socket %s", self.path, exc_info=True)
            return False
        return True

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        with contextlib.suppress(Exception):
            await self._server.wait_closed()
        with contextlib.suppress(OSError):
            self.path.unlink()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("not an object")
            except ValueError:
                answer: dict[str, Any] = {"ok": False, "error": {"code": "bad_request", "message": "not a request"}}
            else:
                answer = await self.handler(request)
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # the client went away or sent too much: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def ask(data_dir: Path, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any] | None:
    """Send one request to the server of this data dir; None when no server listens there."""
    path = socket_path(data_dir)
    if not path.exists():
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.settimeout(5)
            conn.connect(str(path))
        except OSError:
            return None
        conn.settimeout(timeout)
        conn.sendall(json.dumps(request).encode() + b"\n")
        received = bytearray()
        while not received.endswith(b"\n"):
            data = conn.recv(65536)
            if not data:
                break
            received += data
    if not received:
        raise ConnectionError("the running server closed the control channel without answering")
    answer: dict[str, Any] = json.loads(received)
    return answer
