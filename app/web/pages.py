"""Rendering pages: one helper for templates with the headers every page gets, and form parsing."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import ValidationException

from app.accounts.models import User
from app.accounts.principal import WRITE, Principal, scopes_for
from app.web.flash import take_flash
from app.web.session import csrf_token

PAGE_HEADERS = {
    # No inline script or style anywhere, so the policy can be strict. No form-action: browsers apply it to the
    # redirect after a POST too, which would block the OAuth consent form's redirect to the client's callback.
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # Pages show API keys and memories: never keep them in a shared cache or the back-forward cache.
    "Cache-Control": "no-store",
}


def web_principal(user: User) -> Principal:
    """The dashboard acts as the logged-in user, through the same services as the API."""
    return Principal(user.id, scopes_for(WRITE), key_id=None, via="web")


def render_html(request: Request[Any, Any, Any], template: str, context: dict[str, Any]) -> str:
    engine = request.app.template_engine
    if engine is None:  # pragma: no cover - configured in app.main
        raise RuntimeError("no template engine configured")
    html: str = engine.get_template(template).render(**context)
    return html


def render(
    request: Request[Any, Any, Any],
    template: str,
    *,
    status_code: int = 200,
    user: User | None = None,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> Response[str]:
    """A page; ``user`` (from ``current_user``) decides the navigation and the CSRF token of its forms."""
    context.setdefault("errors", {})
    context.setdefault("values", {})
    context.setdefault("notice", take_flash(request).notice)
    html = render_html(request, template, {"user": user, "csrf": csrf_token(request), **context})
    return Response(
        content=html,
        status_code=status_code,
        media_type=MediaType.HTML,
        headers={**PAGE_HEADERS, **(headers or {})},
    )


async def form_data(request: Request[Any, Any, Any]) -> dict[str, str]:
    """The submitted form as single strings (the first of repeated fields); anything unparseable is empty."""
    try:
        form = await request.form()
    except (ValidationException, UnicodeDecodeError, ValueError):
        return {}
    data: dict[str, str] = {}
    for key, value in form.multi_items():
        if isinstance(value, str) and key not in data:
            data[key] = value
    return data
