"""A node's links: each ties a local user to a user on an edge, with its credentials, positions and state.

Positions only move forward, and only from where the writer read them (compare-and-set), so a server's worker and
``engram sync once`` may run at the same time: whichever moves a position second rereads it instead.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import Database, utcnow
from app.sync.backlog import PushPosition, pending
from app.sync.grants import NodeClient, Tokens
from app.sync.models import SyncLink

OK, OFFLINE, UNAUTHORIZED, REFUSED = "ok", "offline", "unauthorized", "refused"
# The edge deleted the account: the link stays stopped for good.
ACCOUNT_DELETED = "account_deleted"
# The state `engram sync status` shows is the worse of the push's and the pull's.
_SEVERITY = {OK: 0, OFFLINE: 1, REFUSED: 2, UNAUTHORIZED: 3, ACCOUNT_DELETED: 4}
REFRESH_LEASE = timedelta(seconds=30)


def client_of(link: SyncLink) -> NodeClient:
    return NodeClient(link.client_id, link.client_secret)


def tokens_of(link: SyncLink, resource: str) -> Tokens:
    return Tokens(
        access_token=link.access_token or "",
        refresh_token=link.refresh_token,
        expires_at=link.access_expires_at,
        scope="sync",
        resource=resource,
    )


def state_of(link: SyncLink) -> tuple[str, str | None]:
    """The link's state and the reason for it (None when ok)."""
    worst = max((link.push_state, link.push_error), (link.pull_state, link.pull_error), key=lambda s: _SEVERITY[s[0]])
    return worst[0], worst[1] if worst[0] != OK else None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


async def describe(session: AsyncSession, link: SyncLink) -> dict[str, Any]:
    """The link as ``engram sync status`` and ``engram sync link`` print it."""
    state, error = state_of(link)
    waiting = await pending(session, link.local_user_id, link.id, PushPosition(link.push_seq, link.push_after))
    return {
        "edge": link.edge_url,
        "local_user": link.local_user_id,
        "edge_user": link.edge_user_id,
        "pending": waiting,
        "last_push_at": _iso(link.last_push_at),
        "last_pull_at": _iso(link.last_pull_at),
        "state": state,
        "error": error,
    }


async def all_links(session: AsyncSession) -> list[SyncLink]:
    return list((await session.execute(select(SyncLink).order_by(SyncLink.created_at, SyncLink.id))).scalars())


async def find(session: AsyncSession, edge_url: str, local_user_id: str) -> SyncLink | None:
    query = select(SyncLink).where(SyncLink.edge_url == edge_url, SyncLink.local_user_id == local_user_id)
    return (await session.execute(query)).scalar_one_or_none()


async def linked_to(session: AsyncSession, edge_url: str, edge_node_id: str, edge_user_id: str) -> list[SyncLink]:
    """The links to this edge user (the edge known by its node id, or its URL when it names none)."""
    same_edge = SyncLink.edge_url == edge_url
    if edge_node_id:
        same_edge = or_(same_edge, SyncLink.edge_node_id == edge_node_id)
    query = select(SyncLink).where(SyncLink.edge_user_id == edge_user_id, same_edge)
    return list((await session.execute(query)).scalars())


def relink_hint(edge_url: str, local_user_id: str, detail: str) -> str:
    """What a link whose grant the edge no longer takes says, with the edge's own words last."""
    return (
        f"cut off on the edge (this machine's grant or sync client was revoked there): run `engram sync link "
        f"{edge_url} --user {local_user_id}` again; the edge said: {detail}"
    )


async def by_id(db: Database, link_id: str) -> SyncLink | None:
    async with db.session() as session:
        return (await session.execute(select(SyncLink).where(SyncLink.id == link_id))).scalar_one_or_none()


async def replace(
    session: AsyncSession,
    *,
    edge_url: str,
    local_user_id: str,
    edge_user_id: str,
    edge_node_id: str,
    grant_type: str,
    client: NodeClient,
    tokens: Tokens,
    log_head: int,
) -> SyncLink:
    """A new link (replacing one to the same edge for the same user), starting with a full exchange: the snapshot
    of every memory, then the log from ``log_head`` on; the pull from an empty cursor likewise."""
    await session.execute(
        delete(SyncLink).where(SyncLink.edge_url == edge_url, SyncLink.local_user_id == local_user_id)
    )
    link = SyncLink(
        id="lnk_" + secrets.token_hex(8),
        edge_url=edge_url,
        local_user_id=local_user_id,
        edge_user_id=edge_user_id,
        edge_node_id=edge_node_id,
        grant_type=grant_type,
        client_id=client.client_id,
        client_secret=client.client_secret,
        access_token=tokens.access_token,
        access_expires_at=tokens.expires_at,
        refresh_token=tokens.refresh_token,
        push_after="",
        push_seq=log_head,
        pull_cursor="",
    )
    session.add(link)
    await session.flush()
    return link


async def remove(session: AsyncSession, link_id: str) -> None:
    await session.execute(delete(SyncLink).where(SyncLink.id == link_id))


async def move_push(db: Database, link_id: str, old: PushPosition, new: PushPosition, *, pushed: bool) -> bool:
    """Move the push position from ``old`` to ``new``; False when someone else moved it first."""
    values: dict[str, Any] = {"push_seq": new.seq, "push_after": new.after}
    if pushed:
        values.update(last_push_at=utcnow(), push_state=OK, push_error=None)
    after = SyncLink.push_after.is_(None) if old.after is None else SyncLink.push_after == old.after
    async with db.session() as session:
        result = await session.execute(
            update(SyncLink).where(SyncLink.id == link_id, SyncLink.push_seq == old.seq, after).values(**values),
            execution_options={"synchronize_session": False},
        )
    return bool(getattr(result, "rowcount", 0))


async def move_pull(session: AsyncSession, link_id: str, old: str, new: str) -> bool:
    """Within the transaction that applied a page: move the pull cursor from ``old`` to ``new``."""
    result = await session.execute(
        update(SyncLink)
        .where(SyncLink.id == link_id, SyncLink.pull_cursor == old)
        .values(pull_cursor=new, last_pull_at=utcnow(), pull_state=OK, pull_error=None),
        execution_options={"synchronize_session": False},
    )
    return bool(getattr(result, "rowcount", 0))


async def set_state(db: Database, link_id: str, direction: str, state: str, error: str | None) -> None:
    """Record how the last push or pull went (``direction``: "push" or "pull")."""
    values: dict[str, Any] = {f"{direction}_state": state, f"{direction}_error": (error or None) and error[:2000]}
    if state == OK:
        values[f"last_{direction}_at"] = utcnow()
    async with db.session() as session:
        await session.execute(
            update(SyncLink).where(SyncLink.id == link_id).values(**values),
            execution_options={"synchronize_session": False},
        )


async def claim_refresh(db: Database, link_id: str, stale_token: str) -> bool:
    """Take the right to renew the link's tokens (one process at a time: a rotated refresh token must be used
    once). False when another process holds it, or already renewed (the stored token is no longer the stale one)."""
    now = utcnow()
    async with db.session() as session:
        result = await session.execute(
            update(SyncLink)
            .where(
                SyncLink.id == link_id,
                SyncLink.access_token == stale_token,
                (SyncLink.refreshing_until.is_(None)) | (SyncLink.refreshing_until < now),
            )
            .values(refreshing_until=now + REFRESH_LEASE),
            execution_options={"synchronize_session": False},
        )
    return bool(getattr(result, "rowcount", 0))


async def store_tokens(db: Database, link_id: str, tokens: Tokens) -> None:
    async with db.session() as session:
        await session.execute(
            update(SyncLink)
            .where(SyncLink.id == link_id)
            .values(
                access_token=tokens.access_token,
                refresh_token=tokens.refresh_token,
                access_expires_at=tokens.expires_at,
                refreshing_until=None,
            ),
            execution_options={"synchronize_session": False},
        )


async def release_refresh(db: Database, link_id: str) -> None:
    async with db.session() as session:
        await session.execute(
            update(SyncLink).where(SyncLink.id == link_id).values(refreshing_until=None),
            execution_options={"synchronize_session": False},
        )


@dataclass(frozen=True, slots=True)
class LinkKey:
    """What identifies a link for the worker: a re-link replaces the row, so a new id means new credentials."""

    id: str
    edge_url: str
    local_user_id: str
