"""The dashboard's main page: API keys, the install panel, the connection test and the connected apps."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response, get, post

from app.accounts import keys as key_material
from app.accounts import service as accounts
from app.accounts.models import ApiKey, User
from app.accounts.principal import KEY_SCOPES
from app.container import Container
from app.errors import AppError, InvalidIdentity
from app.identity import validate_name
from app.oauth import connected
from app.sync import peers
from app.web.connection import Binding, check_connection
from app.web.flash import Flash, redirect_with, take_flash
from app.web.install import KEY_PLACEHOLDER, install_commands
from app.web.pages import form_data, render
from app.web.session import verify_csrf

DEFAULT_SESSION = "my-project"
DEFAULT_AGENT = "agent-1"


@dataclass(frozen=True, slots=True)
class KeyRow:
    id: str
    name: str
    scope: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool
    # "SESSION / AGENT" for a key bound to one agent.
    bound_to: str | None = None


def _row(key: ApiKey) -> KeyRow:
    return KeyRow(
        id=key.id,
        name=key.name,
        scope=key.scope,
        prefix=key_material.display_prefix(key.lookup),
        created_at=key.created_at,
        last_used_at=key.last_used_at,
        revoked=key.revoked_at is not None,
        bound_to=f"{key.session} / {key.agent}" if key.session is not None else None,
    )


def _install_panel(container: Container, user: User, session: str, agent: str, key: str | None) -> dict[str, Any]:
    """The panel's values, and either its commands or the error of each field that is wrong."""
    errors: dict[str, str] = {}
    for field, value in (("session", session), ("agent", agent)):
        try:
            validate_name(value, field)
        except InvalidIdentity as exc:
            errors[field] = exc.message
    base_url = container.settings.resolved_public_base_url
    commands = [] if errors else install_commands(base_url, user.id, session, agent, key)
    return {"session": session, "agent": agent, "commands": commands, "errors": errors}


def _name_or(value: str, field: str, default: str) -> str:
    value = value.strip()[:200]
    try:
        validate_name(value, field)
    except InvalidIdentity:
        return default
    return value


async def _page(
    request: Request[Any, Any, Any],
    container: Container,
    user: User,
    *,
    status_code: int = 200,
    session: str = DEFAULT_SESSION,
    agent: str = DEFAULT_AGENT,
    new_key: str | None = None,
    key_errors: dict[str, str] | None = None,
    key_values: dict[str, str] | None = None,
    **extra: Any,
) -> Response[Any]:
    async with container.db.session() as db_session:
        rows = [_row(k) for k in await accounts.list_keys(db_session, user.id)]
        grants = await connected.active_grants(db_session, user.id)
        machines = await peers.linked_machines(db_session, user.id)
    # A linked machine's grant is that machine: the Sync page lists it, so it is not a connected app too.
    machine_grants = {m.family_id for m in machines if m.family_id}
    grants = [g for g in grants if g.family_id not in machine_grants]
    panel = _install_panel(container, user, session, agent, new_key)
    if panel["errors"] and status_code < 400:
        status_code = 400
    return render(
        request,
        "dashboard.html",
        status_code=status_code,
        user=user,
        keys=rows,
        grants=grants,
        linked_machines=len(machines),
        scopes=KEY_SCOPES,
        new_key=new_key,
        key_placeholder=KEY_PLACEHOLDER,
        install=panel,
        errors=key_errors or {},
        values=key_values or {"scope": "write"},
        base_url=container.settings.resolved_public_base_url,
        **extra,
    )


@get("/dashboard", name="web:dashboard")
async def dashboard(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    query = request.query_params
    return await _page(
        request,
        container,
        user,
        session=query.get("session", DEFAULT_SESSION).strip()[:200],
        agent=query.get("agent", DEFAULT_AGENT).strip()[:200],
        new_key=take_flash(request).new_key,
    )


@post("/dashboard/keys", status_code=303)
async def create_key(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    name = data.get("name", "").strip()[:200]
    scope = data.get("scope", "")
    # The install panel's names ride along so the new key lands in its commands; a bad one must not fail the key.
    session = _name_or(data.get("session", ""), "session", DEFAULT_SESSION)
    agent = _name_or(data.get("agent", ""), "agent", DEFAULT_AGENT)
    # Bound to the install panel's session and agent as given, so that a bad name is an error, not a default.
    bind = data.get("bind") == "on"
    try:
        async with container.db.session() as db_session:
            created = await accounts.create_key(
                db_session,
                container.authenticator.secret,
                user.id,
                name=name,
                scope=scope,
                bound_session=data.get("session", "").strip() if bind else None,
                bound_agent=data.get("agent", "").strip() if bind else None,
            )
    except AppError as exc:
        field = str(exc.extra.get("field") or "name")
        field = "bind" if field in ("session", "agent") else field
        return await _page(
            request,
            container,
            user,
            status_code=422,
            session=session,
            agent=agent,
            key_errors={field: exc.message},
            key_values={"name": name, "scope": scope, "bind": "on" if bind else ""},
        )
    # A redirect, so that reloading the page does not create a second key. The plaintext rides to the next page in
    # the encrypted flash cookie and is never stored: no later page can show it again (the browser keeps it in the
    # tab while the person stays on the dashboard, see web.js).
    target = "/dashboard?" + urlencode({"session": session, "agent": agent}) + "#new-key"
    notice = f"Key “{created.key.name}” created."
    return redirect_with(request, target, Flash(notice=notice, new_key=created.plaintext))


@post("/dashboard/apps/{family_id:str}/revoke", status_code=303)
async def revoke_app(
    request: Request[Any, Any, Any], family_id: str, user: User, container: Container
) -> Response[Any]:
    """Disconnect an OAuth client: every token of that grant stops working at once."""
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    async with container.db.session() as db_session:
        await connected.revoke_grant(db_session, user.id, family_id)
    notice = "App disconnected: its tokens stopped working; it has to ask you again to get new ones."
    return redirect_with(request, "/dashboard#apps", Flash(notice=notice))


@post("/dashboard/keys/{key_id:str}/revoke", status_code=303)
async def revoke_key(request: Request[Any, Any, Any], key_id: str, user: User, container: Container) -> Response[Any]:
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    async with container.db.session() as db_session:
        key = await accounts.revoke_key(db_session, key_id, user_id=user.id)
    notice = f"Key “{key.name}” revoked: requests with it now get 401."
    return redirect_with(request, "/dashboard#keys", Flash(notice=notice))


@post("/dashboard/test-connection", status_code=200)
async def test_connection(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    """One real MCP call with the key the person pastes (or the new key the page kept), and what came of it."""
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    session = _name_or(data.get("session", ""), "session", DEFAULT_SESSION)
    agent = _name_or(data.get("agent", ""), "agent", DEFAULT_AGENT)
    key = data.get("key", "").strip()
    problem = None
    if not key:
        problem = "paste an API key to test (create one above)"
    elif len(key) > 200 or not key.isascii() or not key.isprintable():
        problem = "that is not an API key: keys look like egk_ followed by letters and digits"
    if problem is not None:
        return await _page(
            request, container, user, status_code=422, session=session, agent=agent, test_errors={"key": problem}
        )
    binding = await _binding_of(container, user, key)
    result = await check_connection(container.settings.resolved_public_base_url, user.id, key, binding)
    if binding is not None and (binding.session, binding.agent) != (session, agent):
        result = replace(
            result,
            message=f"{result.message} This key is bound to session {binding.session} and agent {binding.agent}: "
            "install it with those names, it works nowhere else.",
        )
    return await _page(request, container, user, session=session, agent=agent, connection=result)


async def _binding_of(container: Container, user: User, key: str) -> Binding | None:
    """The session and agent this user's key is bound to, if it is one of theirs and bound (the test then tries the
    one URL it may open); anything else is tried as it is, and the test says what the server answers."""
    try:
        principal = await container.authenticator.authenticate({"authorization": f"Bearer {key}"})
    except AppError:
        return None
    if principal.user_id != user.id or principal.session is None or principal.agent is None:
        return None
    return Binding(principal.session, principal.agent)
