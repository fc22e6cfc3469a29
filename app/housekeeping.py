"""Deleting what has expired: OAuth codes and tokens, web sessions, announced revocations. Nothing else ever removes
those rows.

Every instance runs the sweep; the deletes are idempotent, so several instances sweeping at once is harmless. Rows
are kept for a grace period after they expire, so that a code or refresh token replayed soon after its expiry is
still recognised (and its family revoked) rather than being merely unknown.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import anyio

from app.accounts import revocations
from app.db import Database, utcnow
from app.oauth import repository as oauth_repository
from app.web import repository as web_repository

log = logging.getLogger(__name__)

GRACE = timedelta(days=1)
INTERVAL_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class Purged:
    oauth_rows: int
    web_sessions: int


async def purge_expired(db: Database, now: datetime | None = None) -> Purged:
    """Delete the rows that expired more than GRACE before ``now``."""
    before = (now or utcnow()) - GRACE
    async with db.engine.begin() as conn:
        oauth_rows = await oauth_repository.purge_expired(conn, before)
        web_sessions = await web_repository.purge_expired(conn, before)
        await revocations.purge(conn, before)
    return Purged(oauth_rows, web_sessions)


async def sweep_forever(db: Database, interval: float = INTERVAL_SECONDS) -> None:
    """Purge now and then every ``interval`` seconds; a failed sweep is logged and retried at the next one."""
    while True:
        try:
            purged = await purge_expired(db)
            if purged.oauth_rows or purged.web_sessions:
                log.info(
                    "purged %d expired OAuth codes and tokens, %d web sessions", purged.oauth_rows, purged.web_sessions
                )
        except Exception:
            log.exception("purging expired rows failed; retrying in %.0f s", interval)
        await anyio.sleep(interval)
