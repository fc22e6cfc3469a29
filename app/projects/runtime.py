"""What a running server does for projects: watch them, and answer the command line on the control socket."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar

from app.container import Container
from app.errors import AppError
from app.portability import service as portability
from app.projects.control import ControlServer
from app.projects.watcher import ProjectWatcher

log = logging.getLogger(__name__)


def handler_for(container: Container, watcher: ProjectWatcher | None) -> Any:
    async def handle(request: dict[str, Any]) -> dict[str, Any]:
        """``index`` a project now (answering with its report), ``reload`` the registered projects, or
        ``delete_account`` (app.portability) with this server's index and coordination."""
        try:
            op = request.get("op")
            if op == "index":
                project = await container.projects.find(str(request.get("project", "")), request.get("user"))
                report = await container.projects.reconcile(project)
                return {"ok": True, "report": report.model_dump(mode="json")}
            if op == "delete_account":  # `engram users delete` while this server holds the index
                erased = await portability.delete(container, str(request.get("user", "")))
                return {"ok": True, "erased": erased.as_json()}
            if op == "reload":
                if watcher is not None:
                    await watcher.refresh()
                return {"ok": True}
            return {"ok": False, "error": {"code": "bad_request", "message": f"unknown operation {op!r}"}}
        except AppError as exc:
            return {"ok": False, "error": {"code": exc.code, "message": exc.message}}
        except Exception:
            log.exception("control request failed")
            return {"ok": False, "error": {"code": "internal_error", "message": "the server failed; see its log"}}

    return handle


@asynccontextmanager
async def projects_lifespan(app: Litestar) -> AsyncIterator[None]:
    container: Container = app.state.container
    settings = container.settings
    watcher: ProjectWatcher | None = None
    if settings.watch_projects:
        watcher = ProjectWatcher(container.projects, settle_seconds=settings.watch_settle_seconds)
        try:
            await watcher.start()
        except Exception:
            log.exception("project watching is off: it could not start")
            watcher = None
    control = ControlServer(settings.data_dir, handler_for(container, watcher))
    await control.start()
    try:
        yield
    finally:
        await control.close()
        if watcher is not None:
            await watcher.stop()
