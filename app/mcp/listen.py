"""``subscriptions/listen`` (MCP 2026-07-28): live push for clients that have no standing stream.

A 2026-07-28 client opts in to server events with one long ``subscriptions/listen`` request whose SSE response is the
stream. We honor the session resources the caller may read (``app.mcp.resources``) and drop any other URI from the
acknowledgment, so a subscription can never observe another session or tenant. When another agent of the session
claims, releases, broadcasts, joins, leaves or moves a task, or sends this agent a message, each subscribed resource
that moved gets ``notifications/resources/updated``; the
event itself rides along in ``_meta["engram/event"]`` (the same payload handshake-era clients get as a log
notification), so a client may act on it without reading the resource again. Like the SDK's own handler, delivery
has no replay: a client whose stream drops listens again and reads the resources (or syncs with its cursor).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from app.accounts.auth import Recheck
from app.coordination import Event
from app.errors import AppError, Unauthorized
from app.mcp.caller import Caller, caller_from_request
from app.mcp.errors import protocol_error
from app.mcp.live import push_payload
from app.mcp.resources import own_uris, uris_touched
from app.teams.events import visible_to

log = logging.getLogger(__name__)

EVENT_META_KEY = "engram/event"


def honored_filter(caller: Caller, requested: types.SubscriptionFilter) -> types.SubscriptionFilter:
    """What we agree to deliver: list-changed flags as asked (our lists never change, so they never fire) and, of
    the requested URIs, only the caller's own session resources."""
    allowed = own_uris(caller)
    uris = [uri for uri in requested.resource_subscriptions or () if uri in allowed]
    return types.SubscriptionFilter(
        tools_list_changed=True if requested.tools_list_changed else None,
        prompts_list_changed=True if requested.prompts_list_changed else None,
        resources_list_changed=True if requested.resources_list_changed else None,
        resource_subscriptions=list(dict.fromkeys(uris)) or None,
    )


async def listen(
    ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
) -> types.SubscriptionsListenResult:
    subscription_id = ctx.request_id
    if subscription_id is None:
        raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
    caller = caller_from_request(ctx.request)
    honored = honored_filter(caller, params.notifications)
    meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}

    async def acknowledge() -> None:
        await ctx.session.send_notification(
            types.SubscriptionsAcknowledgedNotification(
                params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
            ),
            related_request_id=subscription_id,
        )

    wanted = frozenset(honored.resource_subscriptions or ())
    recheck = caller.container.recheck(caller.principal)
    revoked = False

    async def end_once_revoked(announced: asyncio.Event, scope: anyio.CancelScope) -> None:
        """End the stream once its credential no longer holds: at once when a revocation of this user is announced,
        else at the next timed re-check (expiry), even while no event comes."""
        nonlocal revoked
        while True:
            with anyio.move_on_after(recheck.interval):
                await announced.wait()
            now = announced.is_set()
            announced.clear()
            if not await recheck.holds(now=now):
                revoked = True
                scope.cancel()
                return

    try:
        # Follow the events before acknowledging, so nothing published while the ack is written is lost.
        async with (
            caller.container.sessions.events(caller.identity) as events,
            anyio.create_task_group() as watchers,
        ):
            with caller.container.revocations.watch(caller.principal.user_id) as announced:
                watchers.start_soon(end_once_revoked, announced, watchers.cancel_scope)
                await acknowledge()
                if wanted:
                    await _deliver(events, caller, recheck, wanted, meta, ctx, subscription_id)
                else:
                    await anyio.sleep_forever()  # nothing we will ever publish: hold the stream until the client leaves
                watchers.cancel_scope.cancel()
        if revoked:
            raise Unauthorized("the credential that opened this stream was revoked or has expired")
    except AppError as exc:
        # Coordination went away (or never came), or the credential was revoked: end the stream with an error.
        log.warning("listen stream for %s ended: %s", caller.identity.format(), exc.message)
        raise protocol_error(exc) from exc
    return types.SubscriptionsListenResult(_meta=meta)


async def _deliver(
    events: AsyncIterator[Event],
    caller: Caller,
    recheck: Recheck,
    wanted: frozenset[str],
    meta: dict[str, Any],
    ctx: ServerRequestContext[Any, Any],
    subscription_id: Any,
) -> None:
    """Send every other agent's event that touches a subscribed resource, until the events end."""
    async for event in events:
        if event.agent == caller.identity.agent or not visible_to(event, caller.identity.agent):
            continue
        if not await recheck.holds():
            raise Unauthorized("the credential that opened this stream was revoked or has expired")
        payload = push_payload(caller.identity, event)
        for uri in uris_touched(caller, event):
            if uri in wanted:
                notification = types.ResourceUpdatedNotification(
                    params=types.ResourceUpdatedNotificationParams(uri=uri, _meta={**meta, EVENT_META_KEY: payload})
                )
                await ctx.session.send_notification(notification, related_request_id=subscription_id)
