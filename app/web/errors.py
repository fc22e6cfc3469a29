"""Errors as HTML pages for browsers; API paths and API clients keep the JSON errors of app.http_errors."""

from __future__ import annotations

import logging
from collections.abc import Callable
from html import escape
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.response import Redirect

from app.errors import AppError
from app.web.pages import PAGE_HEADERS, render_html
from app.web.session import login_redirect, web_session

log = logging.getLogger(__name__)

# Paths whose callers are programs: always JSON, whatever they accept.
API_PREFIXES = ("/v1/", "/mcp", "/.well-known/", "/docs", "/healthz", "/readyz")
# Paths that are pages: always HTML.
PAGE_PREFIXES = ("/dashboard", "/login", "/signup", "/logout", "/static")

_TITLES = {
    400: "That did not work",
    401: "Please log in",
    403: "Not allowed",
    404: "Page not found",
    405: "Not allowed here",
    413: "Too large",
    415: "Not understood",
    422: "That did not work",
    429: "Too many attempts",
    503: "Temporarily unavailable",
}

ErrorHandler = Callable[[Request[Any, Any, Any], Any], Response[Any]]


class LoginRequired(Exception):
    """Raised by pages that need a logged-in user; answered with a redirect to the login page."""


def wants_html(request: Request[Any, Any, Any]) -> bool:
    path = request.url.path
    if path.startswith(API_PREFIXES):
        return False
    if path == "/" or path.startswith(PAGE_PREFIXES):
        return True
    return "text/html" in request.headers.get("accept", "")


def error_page(
    request: Request[Any, Any, Any], status: int, message: str, headers: dict[str, str] | None = None
) -> Response[str]:
    """An error page that needs nothing but the template engine (no database, no session)."""
    title = _TITLES.get(status, "Something went wrong")
    context: dict[str, Any] = {"title": title, "status": status, "message": message}
    try:
        # The user is shown in the navigation only when this request already looked them up.
        session = web_session(request)
        user = request.state.get("web_user")
        html = render_html(
            request, "error.html", {"user": user, "csrf": session.csrf_token if session else "", **context}
        )
    except Exception:
        log.exception("could not render the error page")
        html = f"<!doctype html><title>{status}</title><h1>{escape(title)}</h1><p>{escape(message)}</p>"
    return Response(
        content=html, status_code=status, media_type=MediaType.HTML, headers={**PAGE_HEADERS, **(headers or {})}
    )


def html_app_error(request: Request[Any, Any, Any], exc: AppError) -> Response[Any]:
    return error_page(request, exc.status_code, exc.message, exc.headers)


def html_http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    status = exc.status_code
    if isinstance(exc, ValidationException):
        message = "some of what was sent could not be understood"
    elif status == 404:
        message = f"there is nothing at {request.url.path}"
    elif status == 405:
        message = f"{request.method} is not supported here"
    else:
        message = exc.detail if status < 500 else "something went wrong on our side"
    headers = {k: v for k, v in (exc.headers or {}).items() if k.lower() in ("allow", "retry-after")}
    return error_page(request, status, message, headers)


def html_unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_page(request, 500, "something went wrong on our side; it has been logged")


def login_required(request: Request[Any, Any, Any], _: LoginRequired) -> Response[Any]:
    if request.method == "GET":
        return login_redirect(request)
    return Redirect("/login?next=%2Fdashboard", status_code=303)


WEB_EXCEPTION_HANDLERS: dict[Any, Any] = {
    LoginRequired: login_required,
    AppError: html_app_error,
    HTTPException: html_http_error,
    Exception: html_unexpected,
}


def _either(json_handler: ErrorHandler, html_handler: ErrorHandler) -> ErrorHandler:
    def handle(request: Request[Any, Any, Any], exc: Any) -> Response[Any]:
        if wants_html(request):
            return html_handler(request, exc)
        return json_handler(request, exc)

    return handle


def html_for_browsers(handlers: dict[Any, Any]) -> dict[Any, Any]:
    """The app's JSON error handlers, answering with an HTML page where a browser asked for a page (e.g. a 404)."""
    wrapped = dict(handlers)
    for exc_type, json_handler in handlers.items():
        if isinstance(exc_type, type) and issubclass(exc_type, AppError):
            wrapped[exc_type] = _either(json_handler, html_app_error)
        elif isinstance(exc_type, type) and issubclass(exc_type, HTTPException):
            wrapped[exc_type] = _either(json_handler, html_http_error)
        elif exc_type is Exception:
            wrapped[exc_type] = _either(json_handler, html_unexpected)
    return wrapped
