"""The Litestar side of authlib: requests as authlib reads them, replies as it writes them, and the session its
storage hooks use (see ``server`` for why a synchronous Session works on the async engine)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc6749 import JsonRequest, OAuth2Error, OAuth2Payload, OAuth2Request
from sqlalchemy.orm import Session

from app.accounts.principal import Principal
from app.oauth import resources

T = TypeVar("T")
session_var: ContextVar[Session] = ContextVar("oauth_session")


def db() -> Session:
    return session_var.get()


class ServerView(Protocol):
    """What grants and endpoints need of the authorization server that runs them. The server is built from them
    (``server``), so they see it only through this, and never import it back."""

    base: str

    def metadata(self) -> dict[str, Any]: ...


class InvalidTargetError(OAuth2Error):
    """RFC 8707: the requested resource is not one this client or user may have."""

    error = "invalid_target"


FORM = "application/x-www-form-urlencoded"


def is_form(content_type: str | None) -> bool:
    """RFC 6749 section 3.2: token (and revocation, introspection) requests are form-urlencoded, nothing else."""
    return (content_type or "").split(";")[0].strip().lower() == FORM


class Headers(dict[str, str]):
    """authlib looks headers up as ``Authorization``; HTTP header names are case-insensitive."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        super().__init__((k.lower(), v) for k, v in headers.items())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())


class Payload(OAuth2Payload):
    def __init__(self, values: Mapping[str, list[str]]) -> None:
        self._datalist: defaultdict[str, list[str]] = defaultdict(list, {k: list(v) for k, v in values.items()})
        self._data = {k: v[0] for k, v in values.items() if v}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> defaultdict[str, list[str]]:
        return self._datalist


class Request(OAuth2Request):
    """An OAuth request: query and form parameters (both multi-valued) plus what Engram adds on the way."""

    def __init__(
        self,
        method: str,
        uri: str,
        headers: Mapping[str, str],
        query: Mapping[str, list[str]],
        form: Mapping[str, list[str]] | None = None,
    ) -> None:
        super().__init__(method, uri, headers=Headers(headers))
        self._args = {k: v[0] for k, v in query.items() if v}
        self._form = {k: v[0] for k, v in (form or {}).items() if v}
        merged: dict[str, list[str]] = {k: list(v) for k, v in query.items()}
        for k, v in (form or {}).items():
            merged.setdefault(k, []).extend(v)
        self.payload = Payload(merged)
        self.resource: resources.Resource | None = None

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class RegistrationRequest(JsonRequest):
    def __init__(self, uri: str, headers: Mapping[str, str], body: Any, registrant: Principal | None) -> None:
        super().__init__("POST", uri, Headers(headers))
        self.is_object = isinstance(body, dict)
        # A null field is an absent one.
        self.payload = _JsonPayload({k: v for k, v in body.items() if v is not None} if self.is_object else {})
        self.registrant = registrant
        self.client_metadata: dict[str, Any] = {}


@dataclass
class _JsonPayload:
    data: dict[str, Any]


@dataclass
class Reply:
    """What authlib answered: status, body (a dict, or "" for redirects) and headers."""

    status: int
    body: Any
    headers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def location(self) -> str | None:
        return next((v for k, v in self.headers if k.lower() == "location"), None)

    def with_issuer(self, issuer: str) -> Reply:
        """RFC 9207: an authorization response (a redirect to the client, an error too) names its issuer, so a
        client talking to several servers can tell which one answered (mix-up attacks)."""
        location = self.location
        if location is None:
            return self
        headers = [(k, v) for k, v in self.headers if k.lower() != "location"]
        return Reply(self.status, self.body, [*headers, ("Location", add_params_to_uri(location, {"iss": issuer}))])
