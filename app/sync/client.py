"""A link's calls to its edge's ``/sync/v1``, with its token renewed once when the edge answers 401.

Errors come back as ``credentials``' kinds, each with the ``state`` the link shows: ``EdgeUnreachable``
(offline: no answer, a 5xx, a rate limit), ``CredentialsRefused`` (unauthorized: still 401 after renewing, or the
renewal refused) and ``PushRefused`` (refused: the edge answered why it will not take the changes, which stay
pending). ``CursorReset`` asks the caller to pull again from the beginning.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import httpx
from pydantic import ValidationError

from app.db import Database
from app.sync import credentials, links, timeouts
from app.sync.credentials import AccountGone, CredentialsRefused, Edge, EdgeUnreachable, SyncAuthError
from app.sync.grants import Tokens
from app.sync.protocol import MAX_PUSH_BYTES, PullOut, PushOut, SentChange, encode_json

log = logging.getLogger(__name__)

# Renew a token this long before it expires, rather than have a request refused.
RENEW_BEFORE_SECONDS = 60.0
# How long to wait for another process that is renewing the same link's tokens.
OTHER_RENEWAL_SECONDS = 30.0


class PushRefused(SyncAuthError):
    """The edge will not take these changes (a quota, another tenant's memory, a change it finds invalid)."""

    status_code = 409
    code = "refused"
    state = "refused"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BodyTooLarge(PushRefused):
    """The edge, or a proxy in front of it, refused a request body for its size (413, not a memory's own length)."""


class CursorReset(SyncAuthError):
    """The edge's log is behind this link's cursor (restored from an older copy): pull everything again."""

    state = "ok"


def _error_message(response: httpx.Response) -> tuple[str, str]:
    try:
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            return str(error.get("code", "")), str(error.get("message", ""))[:500]
    except ValueError:
        pass
    return "", response.text[:200]


class EdgeSession:
    """One link's conversation with its edge. Created per process; ``http`` is owned by the caller."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        db: Database,
        link_id: str,
        edge: Edge,
        tokens: Tokens,
        *,
        max_push_bytes: int = MAX_PUSH_BYTES,
    ) -> None:
        self.http = http
        self.max_push_bytes = max_push_bytes
        self.db = db
        self.link_id = link_id
        self.edge = edge
        self.tokens = tokens
        self._renewing = asyncio.Lock()

    async def push(self, node_id: str, name: str | None, changes: list[SentChange]) -> PushOut:
        """Send ``changes``. A body over ``max_push_bytes`` goes in halves, each applied on its own: changes are
        versions, so a half applied alone or twice is harmless, and the caller moves the link past the batch only
        once every part was taken. A body refused for its size (a proxy's smaller limit) halves ``max_push_bytes``
        below it for as long as this process runs, and goes again in parts."""
        body = encode_json({"node_id": node_id, "name": name, "changes": changes})  # a PushIn
        if len(body) > self.max_push_bytes and len(changes) > 1:
            half = len(changes) // 2
            parts: list[PushOut] = []
            too_large: BodyTooLarge | None = None
            for part in (changes[:half], changes[half:]):
                try:
                    parts.append(await self.push(node_id, name, part))
                except BodyTooLarge as exc:  # one memory no body can carry: the others go all the same
                    too_large = too_large or exc
            if too_large is not None:
                raise too_large
            return PushOut(
                accepted=sum(p.accepted for p in parts),
                applied=sum(p.applied for p in parts),
                unchanged=sum(p.unchanged for p in parts),
                conflicts=sum(p.conflicts for p in parts),
                discarded=sum(p.discarded for p in parts),
            )
        try:
            response = await self._call("POST", "/push", content=body, headers={"Content-Type": "application/json"})
        except BodyTooLarge as exc:
            if len(changes) == 1:
                raise BodyTooLarge(
                    f"the edge or a proxy in front of it refuses memory {changes[0]['memory_id']} for its size: its "
                    f"push alone was {len(body)} bytes ({exc.message})"
                ) from None
            log.warning(
                "link %s: a push of %d bytes was refused for its size (%s); sending smaller parts from now on "
                "(ENGRAM_SYNC_PUSH_MAX_BYTES sets this from the start)",
                self.link_id,
                len(body),
                exc.message,
            )
            # Below half of what was refused: parts then fit at once, not after one more refusal each.
            self.max_push_bytes = min(self.max_push_bytes, len(body) // 2)
            return await self.push(node_id, name, changes)
        return PushOut.model_validate(self._json(response))

    async def pull(self, *, cursor: str, limit: int, wait: float, node_id: str, name: str | None) -> PullOut:
        params: dict[str, Any] = {"cursor": cursor, "limit": limit, "wait": wait, "node": node_id}
        if name:
            params["name"] = name
        response = await self._call("GET", "/pull", params=params, seconds=timeouts.long_poll_seconds(self.http, wait))
        try:
            return PullOut.model_validate(self._json(response))
        except ValidationError as exc:
            raise PushRefused(f"the edge sent a change this node cannot take: {exc.errors()[0]['msg']}") from None

    async def me(self) -> Mapping[str, Any]:
        return self._json(await self._call("GET", "/me"))

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise EdgeUnreachable(f"{response.request.url} answered {response.status_code} without a JSON object")
        return body

    async def _call(self, method: str, path: str, *, seconds: float | None = None, **kwargs: Any) -> httpx.Response:
        if self.tokens.expires_within(RENEW_BEFORE_SECONDS):
            await self._renew(self.tokens.access_token)
        response = await self._send(method, path, seconds, **kwargs)
        if response.status_code == 401:
            await self._renew(self.tokens.access_token)
            response = await self._send(method, path, seconds, **kwargs)
            if response.status_code == 401:
                raise CredentialsRefused(f"the edge refuses this link's token: {_error_message(response)[1]}")
        if response.status_code < 400:
            return response
        code, message = _error_message(response)
        if response.status_code == 410 and code == AccountGone.code:
            raise AccountGone(credentials.gone_message(self.edge.url))
        if response.status_code == 409 and code == "cursor_reset":
            raise CursorReset(message)
        if response.status_code >= 500 or (response.status_code == 429 and code != "quota_exceeded"):
            raise EdgeUnreachable(f"the edge answered {response.status_code}: {message}")
        retry = response.headers.get("retry-after")
        if response.status_code == 413 and code != "memory_too_large":
            # A proxy's page (nginx's is HTML) says no more than the status does.
            raise BodyTooLarge(f"413 {code}: {message}" if code else "413 Request Entity Too Large")
        raise PushRefused(
            f"the edge refused it ({response.status_code} {code}): {message}",
            retry_after=float(retry) if retry and retry.isdigit() else None,
        )

    async def _send(self, method: str, path: str, seconds: float | None, **kwargs: Any) -> httpx.Response:
        url = self.edge.sync_resource + path
        headers = {**kwargs.pop("headers", {}), "Authorization": f"Bearer {self.tokens.access_token}"}
        try:
            return await timeouts.request(self.http, method, url, answer_within=seconds, headers=headers, **kwargs)
        except httpx.TransportError as exc:
            raise EdgeUnreachable(f"cannot reach {self.edge.url}: {exc.__class__.__name__} {exc}".strip()) from exc

    async def _renew(self, stale: str) -> None:
        """New tokens, once for every caller that saw ``stale`` refused, and once across processes."""
        async with self._renewing:
            if self.tokens.access_token != stale:
                return  # renewed while this caller waited
            deadline = asyncio.get_running_loop().time() + OTHER_RENEWAL_SECONDS
            while True:
                stored = await links.by_id(self.db, self.link_id)
                if stored is None:
                    raise CredentialsRefused("this link was removed")
                if stored.access_token and stored.access_token != stale:  # another process renewed them
                    self.tokens = links.tokens_of(stored, self.edge.sync_resource)
                    return
                if await links.claim_refresh(self.db, self.link_id, stale):
                    break
                if asyncio.get_running_loop().time() > deadline:
                    raise EdgeUnreachable("another process has been renewing this link's tokens for too long")
                await asyncio.sleep(0.2)
            try:
                renewed = await credentials.renew(self.http, self.edge, links.client_of(stored), self.tokens)
            except BaseException:
                await links.release_refresh(self.db, self.link_id)
                raise
            await links.store_tokens(self.db, self.link_id, renewed)
            self.tokens = renewed
