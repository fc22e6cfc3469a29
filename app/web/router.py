"""Everything app.main needs to serve the pages: routes, templates, static files, the login limiter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from litestar import Litestar, Request, Router
from litestar.contrib.jinja import JinjaTemplateEngine
from litestar.di import Provide
from litestar.static_files import create_static_files_router
from litestar.template import TemplateConfig
from litestar.types import PathType

from app.accounts.models import User
from app.container import Container
from app.sync import web as sync_web
from app.web import (
    account_data,
    address_limits,
    dashboard,
    live,
    machines,
    memories,
    memory_page,
    routes,
    session_admin,
    usage,
)
from app.web.errors import WEB_EXCEPTION_HANDLERS, LoginRequired
from app.web.ratelimit import create_rate_limiter
from app.web.session import current_user

HERE = Path(__file__).resolve().parent
APP_DIR = HERE.parent
TEMPLATE_DIRS: list[PathType] = [HERE / "templates", APP_DIR / "oauth" / "templates"]


async def provide_web_user(request: Request[Any, Any, Any]) -> User:
    """The logged-in user; pages that declare ``user`` send everyone else to the login page."""
    user = await current_user(request)
    if user is None:
        raise LoginRequired
    return user


web_router = Router(
    path="/",
    route_handlers=[
        routes.home,
        routes.favicon,
        routes.signup_page,
        routes.signup,
        routes.login_page,
        routes.login,
        routes.logout,
        dashboard.dashboard,
        dashboard.create_key,
        dashboard.revoke_key,
        dashboard.revoke_app,
        dashboard.test_connection,
        machines.sync_page,
        machines.revoke_machine_client,
        machines.create_sync_client,
        sync_web.cut_off_machine,
        memories.browse,
        memories.delete,
        memories.bulk,
        memory_page.memory_page,
        memory_page.edit,
        usage.usage,
        live.sessions,
        live.session_page,
        live.session_panel,
        live.session_events,
        session_admin.reindex,
        session_admin.archive,
        session_admin.delete_session,
        account_data.export_download,
        account_data.delete_page,
        account_data.delete_account,
    ],
    dependencies={"user": Provide(provide_web_user)},
    exception_handlers=WEB_EXCEPTION_HANDLERS,
    include_in_schema=False,
)

static_files = create_static_files_router(
    path="/static", directories=[HERE / "static"], include_in_schema=False, name="web:static"
)

template_config = TemplateConfig(directory=TEMPLATE_DIRS, engine=JinjaTemplateEngine)


@asynccontextmanager
async def web_lifespan(app: Litestar) -> AsyncIterator[None]:
    """The address rate limiter (logins, sign-ups, OAuth registration and token failures), in Redis when one is
    configured. Runs after the container exists."""
    container: Container = app.state.container
    limiter = create_rate_limiter(container.settings.redis_url, namespace="engram:limits", breaker=container.redis)
    container.extras[address_limits.LIMITER] = limiter
    try:
        yield
    finally:
        await limiter.close()
