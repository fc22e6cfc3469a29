"""Client ID Metadata Documents: a client_id that is an https URL names a JSON document describing the client.

Fetching a URL a stranger chose is a server-side request forgery risk, so: https only, no redirects, a 5 s timeout,
at most 5 KB, and never an address that is not globally routable. The one exception is a local server (its public
URL is http on a loopback host, i.e. development and tests), which may fetch http documents from loopback hosts.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import socket
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from app.oauth import clients, flows
from app.oauth.clients import Client
from app.oauth.models import CLIENT_ID_MAX

log = logging.getLogger(__name__)

MAX_BYTES = 5 * 1024
TIMEOUT_SECONDS = 5.0
DEFAULT_TTL = 300
MIN_TTL, MAX_TTL = 60, 24 * 3600
FAILURE_TTL = 30
MAX_CACHED = 1000
_MAX_AGE = re.compile(r"max-age=(\d+)")


class DocumentError(Exception):
    """The document could not be fetched or does not describe a usable client."""


def looks_like_document_id(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


class ClientDocuments:
    """Fetches and caches documents in this process; each instance keeps its own cache."""

    def __init__(self, http: httpx.AsyncClient, *, allow_loopback_http: bool) -> None:
        self.http = http
        self.allow_loopback_http = allow_loopback_http
        self._cache: OrderedDict[str, tuple[float, Client | str]] = OrderedDict()

    def cached(self, client_id: str) -> Client | None:
        """The client, when ``resolve`` fetched it and it has not expired (for authlib's synchronous lookups)."""
        entry = self._cache.get(client_id)
        if entry is None or entry[0] < time.monotonic() or isinstance(entry[1], str):
            return None
        return entry[1]

    async def resolve(self, client_id: str) -> Client:
        """The client the document at ``client_id`` describes; raises DocumentError."""
        entry = self._cache.get(client_id)
        if entry is not None and entry[0] >= time.monotonic():
            if isinstance(entry[1], str):
                raise DocumentError(entry[1])
            return entry[1]
        try:
            client, ttl = await self._fetch(client_id)
        except DocumentError as exc:
            self._remember(client_id, FAILURE_TTL, str(exc))
            raise
        self._remember(client_id, ttl, client)
        return client

    def _remember(self, client_id: str, ttl: int, value: Client | str) -> None:
        self._cache[client_id] = (time.monotonic() + ttl, value)
        self._cache.move_to_end(client_id)
        while len(self._cache) > MAX_CACHED:
            self._cache.popitem(last=False)

    async def _check_url(self, url: str) -> None:
        if len(url) > CLIENT_ID_MAX:
            raise DocumentError("the client_id URL is too long")
        parts = urlsplit(url)
        if parts.fragment or parts.username or parts.password or not parts.hostname:
            raise DocumentError("the client_id URL must have a host and no fragment or user information")
        if parts.path in ("", "/") or any(seg in (".", "..") for seg in parts.path.split("/")):
            raise DocumentError("the client_id URL must have a path, without dot segments")
        if parts.scheme == "http" and self.allow_loopback_http and clients.is_loopback_host(parts.hostname):
            return
        if parts.scheme != "https":
            raise DocumentError("the client_id URL must use https")
        try:
            infos = await anyio.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise DocumentError(f"cannot resolve {parts.hostname}") from exc
        for info in infos:
            address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
            if not address.is_global:
                raise DocumentError(f"{parts.hostname} resolves to a non-public address")

    async def _fetch(self, url: str) -> tuple[Client, int]:
        await self._check_url(url)
        try:
            async with self.http.stream(
                "GET", url, headers={"Accept": "application/json"}, follow_redirects=False, timeout=TIMEOUT_SECONDS
            ) as response:
                if response.status_code != 200:
                    raise DocumentError(f"fetching the client metadata document returned {response.status_code}")
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_BYTES:
                        raise DocumentError(f"the client metadata document is larger than {MAX_BYTES} bytes")
                cache_control = response.headers.get("cache-control", "")
        except httpx.HTTPError as exc:
            raise DocumentError(f"cannot fetch the client metadata document: {type(exc).__name__}") from exc
        try:
            document = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise DocumentError("the client metadata document is not JSON") from exc
        client = client_from_document(url, document)
        match = _MAX_AGE.search(cache_control)
        ttl = min(max(int(match.group(1)), MIN_TTL), MAX_TTL) if match else DEFAULT_TTL
        if "no-store" in cache_control:
            ttl = MIN_TTL
        return client, ttl


def client_from_document(url: str, document: Any) -> Client:
    """Validate a fetched document; only public clients (no secret) can be described this way."""
    if not isinstance(document, dict):
        raise DocumentError("the client metadata document must be a JSON object")
    # A null field is an absent one.
    document = {k: v for k, v in document.items() if v is not None}
    if document.get("client_id") != url:
        raise DocumentError("the document's client_id must equal its URL")
    if "client_secret" in document or "client_secret_expires_at" in document:
        raise DocumentError("a client metadata document must not contain a client secret")
    method = document.get("token_endpoint_auth_method", flows.PUBLIC)
    if method != flows.PUBLIC:
        raise DocumentError("clients identified by a metadata document must use token_endpoint_auth_method none")
    problem = clients.metadata_problem(document)
    if problem:
        raise DocumentError(problem)
    redirect_uris = document.get("redirect_uris")
    if not redirect_uris:
        raise DocumentError("the document must list redirect_uris")
    grant_types = document.get("grant_types", ["authorization_code"])
    if not set(grant_types) <= set(flows.CODE_GRANTS):
        raise DocumentError("grant_types: a document client may only use authorization_code and refresh_token")
    name = document.get("client_name")
    metadata: dict[str, Any] = {
        "redirect_uris": redirect_uris,
        "grant_types": grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": flows.PUBLIC,
        "client_name": name[:100] if name else None,
    }
    if "scope" in document:
        metadata["scope"] = document["scope"]
    return Client(client_id=url, metadata=metadata, from_document=True)
