"""Limits per client address on the endpoints anyone may call without a credential.

Every sign-up attempt counts (a failed one answers "this email is taken"); every OAuth client registered counts,
since each is a row, and so does every device authorization request (RFC 8628); at the token endpoint, which checks
secrets, codes and refresh tokens, only failures count (an honest client rarely fails). The counts live in the same
sliding-window limiter as the login limit: in Redis when one is configured, shared by every instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Request

from app.container import Container
from app.settings import Settings
from app.web.ratelimit import Limit, RateLimiter, raise_if_limited

LIMITER = "web_address_limiter"


@dataclass(frozen=True, slots=True)
class Guard:
    """One limit on one endpoint, keyed by the caller's address."""

    name: str
    limit: Limit
    what: str

    def key(self, request: Request[Any, Any, Any]) -> str:
        return f"{self.name}:ip:{client_address(request)}"

    async def check(self, request: Request[Any, Any, Any], container: Container) -> None:
        """RateLimited (429 with Retry-After) when this address is over the limit."""
        await raise_if_limited(limiter_of(container), self.key(request), self.limit, self.what)

    async def count(self, request: Request[Any, Any, Any], container: Container) -> None:
        await limiter_of(container).hit(self.key(request), self.limit)


def signup_guard(settings: Settings) -> Guard:
    return Guard("signup", Limit(settings.signups_per_hour, 3600), "sign-ups from this address")


def registration_guard(settings: Settings) -> Guard:
    return Guard("register", Limit(settings.client_registrations_per_hour, 3600), "client registrations")


def token_guard(settings: Settings) -> Guard:
    return Guard("token", Limit(settings.token_failures_per_5_minutes, 300), "failed token requests")


def device_authorization_guard(settings: Settings) -> Guard:
    return Guard("device", Limit(settings.device_authorizations_per_hour, 3600), "device authorization requests")


def limiter_of(container: Container) -> RateLimiter:
    limiter: RateLimiter = container.extras[LIMITER]
    return limiter


def client_address(request: Request[Any, Any, Any]) -> str:
    # The peer, or the client a trusted proxy named (app.client_address).
    return request.client.host if request.client else "unknown"
