"""On the edge: the machines syncing each user's memories (the dashboard's "Linked machines"), and cutting one off."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import Database, utcnow
from app.errors import NotFound
from app.oauth import connected, machine_clients
from app.sync.models import MemoryChange, SyncPeer

log = logging.getLogger(__name__)

# A machine long-polling keeps calling; its row is written at most this often unless something changed.
SEEN_EVERY_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class LinkedMachine:
    id: str
    node_id: str
    name: str
    last_seen_at: datetime
    # Changes of the user from elsewhere that this machine has not pulled yet.
    behind: int
    cut_off_at: datetime | None
    # The grant it syncs with: the dashboard lists that grant under this machine, not again as a connected app.
    family_id: str = ""


class PeerBook:
    """Notes each (user, machine) when it calls, without a database write on every long-poll."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._written: dict[tuple[str, str], tuple[float, str, int | None, str | None]] = {}
        self._order: dict[tuple[str, str], asyncio.Lock] = {}
        self._notes: set[asyncio.Task[None]] = set()

    async def note(
        self, user_id: str, node_id: str, *, family_id: str, name: str | None = None, reached: int | None = None
    ) -> None:
        """``seen``, written after the caller has answered once this process has the machine on record: a pull
        that brings changes moves ``reached``, and waiting for that write (a commit) delayed every synced change by
        it. A machine's first call is written before the answer, so it is listed once it had one. One machine's
        notes are written in call order."""
        key = (user_id, node_id)
        last = self._written.get(key)
        if last is None or last[1] != family_id:
            await self.seen(user_id, node_id, family_id=family_id, name=name, reached=reached)
            return
        lock = self._order.setdefault(key, asyncio.Lock())

        async def write() -> None:
            async with lock:
                try:
                    await self.seen(user_id, node_id, family_id=family_id, name=name, reached=reached)
                except Exception:  # the dashboard's record only; the next call writes it again
                    log.warning("could not note machine %s of user %s", node_id, user_id, exc_info=True)

        task = asyncio.get_running_loop().create_task(write())
        self._notes.add(task)
        task.add_done_callback(self._notes.discard)

    async def seen(
        self, user_id: str, node_id: str, *, family_id: str, name: str | None = None, reached: int | None = None
    ) -> None:
        """``node_id`` called as ``user_id`` with grant ``family_id``; ``reached``: the log position it pulled to."""
        key = (user_id, node_id)
        now = time.monotonic()
        last = self._written.get(key)
        if (
            last is not None
            and now - last[0] < SEEN_EVERY_SECONDS
            and last[1] == family_id
            and (reached is None or reached == last[2])
            and (name is None or name == last[3])
        ):
            return
        values: dict[str, object] = {"last_seen_at": utcnow(), "family_id": family_id, "cut_off_at": None}
        if reached is not None:
            values["pulled_seq"] = reached
        async with self.db.session() as session:
            if last is None or last[1] != family_id:
                # What the person approved (a device's name on the consent page, a sync client's --name) names the
                # machine; what the node calls itself only when the grant has no client name.
                client = await connected.client_of(session, user_id, family_id) if family_id else None
                named = client[1] if client is not None and client[1] != client[0] else name
                if named:
                    values["name"] = named[:200]
            found = await session.execute(
                update(SyncPeer).where(SyncPeer.user_id == user_id, SyncPeer.node_id == node_id).values(**values)
            )
            if not getattr(found, "rowcount", 0):
                session.add(
                    SyncPeer(
                        id="peer_" + secrets.token_hex(8),
                        user_id=user_id,
                        node_id=node_id,
                        name=str(values.get("name") or name or node_id)[:200],
                        family_id=family_id,
                        pulled_seq=reached or 0,
                    )
                )
                try:
                    await session.flush()
                except IntegrityError:  # the same machine's other request made it first; next call updates it
                    await session.rollback()
                    return
        self._written[key] = (now, family_id, reached, name)


async def linked_machines(session: AsyncSession, user_id: str) -> list[LinkedMachine]:
    """The user's machines, most recently seen first, each with how many changes it has still to pull."""
    peers = (
        (await session.execute(select(SyncPeer).where(SyncPeer.user_id == user_id).order_by(SyncPeer.last_seen_at)))
        .scalars()
        .all()
    )
    out: list[LinkedMachine] = []
    for peer in reversed(peers):
        behind = select(func.count()).where(
            MemoryChange.user_id == user_id, MemoryChange.seq > peer.pulled_seq, MemoryChange.origin != peer.node_id
        )
        out.append(
            LinkedMachine(
                id=peer.id,
                node_id=peer.node_id,
                name=peer.name,
                last_seen_at=peer.last_seen_at,
                behind=int((await session.execute(behind)).scalar_one()),
                cut_off_at=peer.cut_off_at,
                family_id=peer.family_id,
            )
        )
    return out


async def cut_off(session: AsyncSession, user_id: str, peer_id: str) -> str:
    """Revoke what the machine syncs with: its grant, and its machine client if it has one. Its next request fails."""
    peer = (
        await session.execute(select(SyncPeer).where(SyncPeer.id == peer_id, SyncPeer.user_id == user_id))
    ).scalar_one_or_none()
    if peer is None:
        raise NotFound(f"no linked machine {peer_id[:40]!r}")
    client = await connected.client_of(session, user_id, peer.family_id) if peer.family_id else None
    if peer.family_id:
        with contextlib.suppress(NotFound):  # already revoked, or expired
            await connected.revoke_grant(session, user_id, peer.family_id)
    if client is not None:
        # NotFound: not a machine client of this user (a device grant), and revoking the grant was enough.
        with contextlib.suppress(NotFound):
            await machine_clients.revoke(session, client[0], user_id=user_id)
    peer.cut_off_at = utcnow()
    return peer.name
