"""The sweep of expired OAuth codes and tokens and web sessions, against the real database."""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import select

from app.db import utcnow
from app.housekeeping import GRACE, purge_expired
from app.oauth.models import OAuthCode, OAuthDeviceCode, OAuthToken
from app.web.models import WebSession
from tests.harness import RunningServer, make_account


def _code(user_id: str, expires_in: timedelta) -> OAuthCode:
    return OAuthCode(
        id=uuid.uuid4().hex,
        client_id="c",
        user_id=user_id,
        redirect_uri="http://127.0.0.1/cb",
        scope="memories:read",
        resource="http://x",
        code_challenge="x" * 43,
        family_id=uuid.uuid4().hex,
        expires_at=utcnow() + expires_in,
    )


def _token(user_id: str, access_in: timedelta, refresh_in: timedelta | None, *, used: bool = False) -> OAuthToken:
    now = utcnow()
    return OAuthToken(
        id=uuid.uuid4().hex,
        family_id=uuid.uuid4().hex,
        client_id="c",
        user_id=user_id,
        grant_type="authorization_code",
        scope="memories:read",
        resource="http://x",
        access_hash=uuid.uuid4().hex,
        access_expires_at=now + access_in,
        refresh_hash=uuid.uuid4().hex if refresh_in is not None else None,
        refresh_expires_at=now + refresh_in if refresh_in is not None else None,
        refresh_used_at=now if used else None,
    )


def _device_code(user_id: str, expires_in: timedelta) -> OAuthDeviceCode:
    return OAuthDeviceCode(
        id=uuid.uuid4().hex,
        user_code=uuid.uuid4().hex,
        client_id="c",
        scope="sync",
        resource="http://x/sync/v1",
        family_id=uuid.uuid4().hex,
        expires_at=utcnow() + expires_in,
        interval=5,
        user_id=user_id,
        decision="approved",
    )


def _web_session(user_id: str, expires_in: timedelta) -> WebSession:
    return WebSession(id=uuid.uuid4().hex, user_id=user_id, csrf_token="t", expires_at=utcnow() + expires_in)


def test_only_rows_expired_longer_than_the_grace_period_are_purged(api: RunningServer) -> None:
    user_id = make_account(api).user_id
    long_ago, recently, later = -(GRACE + timedelta(hours=1)), -timedelta(minutes=5), timedelta(days=30)
    gone = [
        _code(user_id, long_ago),
        _token(user_id, long_ago, None),  # client_credentials: no refresh token
        _token(user_id, long_ago, long_ago, used=True),
        _web_session(user_id, long_ago),
        _device_code(user_id, long_ago),
    ]
    kept = [
        _code(user_id, recently),  # a replay now is still recognised as a reused code
        _token(user_id, long_ago, later, used=True),  # a used refresh token that is still valid: reuse detection
        _token(user_id, long_ago, later),
        _token(user_id, later, None),
        _web_session(user_id, recently),
        _web_session(user_id, later),
        _device_code(user_id, recently),
    ]
    db = api.container.db

    async def run() -> set[str]:  # on the server's loop, where its database pool lives
        async with db.session() as session:
            session.add_all([*gone, *kept])
        await purge_expired(db)
        async with db.session() as session:
            left = set()
            for model in (OAuthCode, OAuthToken, WebSession, OAuthDeviceCode):
                left |= set((await session.execute(select(model.id).where(model.user_id == user_id))).scalars())
        return left

    assert api.run(run()) == {row.id for row in kept}
