"""OAuth clients as authlib sees them, and the rules for their metadata and redirect URIs. Pure."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749 import ClientMixin

from app.oauth import credentials, scopes
from app.oauth.flows import MACHINE_GRANT, PUBLIC, SECRET_METHODS
from app.text import text_problem

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
# RFC 7591 section 2: the metadata fields Engram reads or authlib validates, by JSON type.
_STRING_FIELDS = (
    "token_endpoint_auth_method",
    "scope",
    "client_name",
    "client_uri",
    "logo_uri",
    "tos_uri",
    "policy_uri",
    "jwks_uri",
    "software_id",
    "software_version",
)
_STRING_LIST_FIELDS = ("redirect_uris", "grant_types", "response_types", "contacts")
MAX_REDIRECT_URIS = 10
MAX_LIST_ITEMS = 10
MAX_URI_CHARS = 2000
MAX_NAME_CHARS = 200
MAX_FIELD_CHARS = 2000


def is_loopback_host(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_loopback_http(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and "@" not in parts.netloc and parts.hostname in LOOPBACK_HOSTS


def redirect_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a redirect URI, or None. https; http on loopback (RFC 8252); app schemes with a dot."""
    if len(uri) > MAX_URI_CHARS:
        return f"a redirect URI is longer than {MAX_URI_CHARS} characters"
    # A URI is printable ASCII (RFC 3986): anything else, percent-encoded or not, is where redirects go wrong.
    if not uri or not all("!" <= c <= "~" for c in uri):
        return "redirect URIs must be printable ASCII, without spaces or control characters (percent-encode the rest)"
    try:
        parts = urlsplit(uri)
    except ValueError:
        return f"{uri} is not a URL"
    if parts.fragment or "#" in uri:
        return "redirect URIs must not have a fragment"
    if "@" in parts.netloc:
        return "redirect URIs must not carry user information"
    if parts.scheme == "https":
        return None if parts.hostname else f"{uri} has no host"
    if parts.scheme == "http":
        return None if is_loopback_http(uri) else "http redirect URIs are only allowed on 127.0.0.1, [::1] or localhost"
    # RFC 8252 section 7.1: private-use schemes are reverse domain names, so they contain a dot.
    if parts.scheme and "." in parts.scheme:
        return None
    return f"redirect URI scheme {parts.scheme!r} is not allowed"


def metadata_problem(metadata: Mapping[str, Any]) -> str | None:
    """Why client metadata (a registration or a metadata document) cannot be used, or None: JSON types, redirect
    URIs, scopes and response types. Which grants a client may have depends on how it is registered."""
    for name in _STRING_FIELDS:
        if name in metadata and not isinstance(metadata[name], str):
            return f"{name} must be a string"
        limit = MAX_NAME_CHARS if name == "client_name" else MAX_FIELD_CHARS
        if name in metadata and len(metadata[name]) > limit:
            return f"{name} is longer than {limit} characters"
    for name in _STRING_LIST_FIELDS:
        if name not in metadata:
            continue
        value = metadata[name]
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            return f"{name} must be an array of strings"
        limit = MAX_REDIRECT_URIS if name == "redirect_uris" else MAX_LIST_ITEMS
        if len(value) > limit:
            return f"{name} may hold at most {limit} entries"
        if any(len(v) > MAX_FIELD_CHARS for v in value):
            return f"an entry of {name} is longer than {MAX_FIELD_CHARS} characters"
    if "jwks" in metadata and not isinstance(metadata["jwks"], dict):
        return "jwks must be a JSON object"
    for uri in metadata.get("redirect_uris") or []:
        problem = redirect_uri_problem(uri)
        if problem:
            return f"redirect_uris: {problem}"
    for name, value in metadata.items():
        texts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for text in texts:
            if isinstance(text, str) and (problem := text_problem(text)):
                return f"{name} {problem}"
    if not set(scopes.split(metadata.get("scope"))) <= set(scopes.SUPPORTED):
        return f"scope may contain {', '.join(scopes.SUPPORTED)}"
    if not set(metadata.get("response_types") or []) <= {"code"}:
        return "response_types: the only response type is code"
    return None


def redirect_uri_matches(registered: str, requested: str) -> bool:
    """Exact match, except that a loopback http redirect may use any port (RFC 8252 section 7.3)."""
    if registered == requested:
        return True
    if not (is_loopback_http(registered) and is_loopback_http(requested)):
        return False
    a, b = urlsplit(registered), urlsplit(requested)
    try:
        _ = b.port
    except ValueError:
        return False
    return (a.hostname, a.path, a.query) == (b.hostname, b.path, b.query) and not b.fragment


@dataclass(frozen=True)
class Client(ClientMixin):
    """A registered client, or one described by its Client ID Metadata Document."""

    client_id: str
    metadata: dict[str, Any]
    secret_hash: str | None = None
    owner_id: str | None = None
    # True for a client whose id is the URL of its metadata document.
    from_document: bool = False

    @property
    def name(self) -> str:
        name = self.metadata.get("client_name")
        return str(name) if isinstance(name, str) and name.strip() else self.client_id

    @property
    def auth_method(self) -> str:
        return str(self.metadata.get("token_endpoint_auth_method", "client_secret_basic"))

    @property
    def redirect_uris(self) -> list[str]:
        return [str(u) for u in self.metadata.get("redirect_uris") or []]

    @property
    def grant_types(self) -> list[str]:
        return [str(g) for g in self.metadata.get("grant_types") or ["authorization_code"]]

    @property
    def is_public(self) -> bool:
        return self.auth_method == PUBLIC

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        # Always require redirect_uri in the request: with several registered URIs there is no safe default.
        uris = self.redirect_uris
        return uris[0] if len(uris) == 1 else None

    def get_allowed_scope(self, scope: str | None) -> str | None:
        """The memories scope to grant (authlib asks in the code grant); None (invalid_scope) when that is none."""
        return scopes.grantable(scope, self.metadata.get("scope"), sync=False)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        # A client stored before the URI rules tightened may hold one no redirect can be built from: never use it.
        if redirect_uri_problem(redirect_uri) is not None:
            return False
        return any(redirect_uri_matches(r, redirect_uri) for r in self.redirect_uris)

    def check_client_secret(self, client_secret: str) -> bool:
        return self.secret_hash is not None and credentials.matches(client_secret, self.secret_hash)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if endpoint == "introspection":
            return method in SECRET_METHODS and self.secret_hash is not None
        if self.is_public:
            return method == PUBLIC
        # A confidential client may use either secret method, wherever it authenticates.
        return method in SECRET_METHODS

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code" and "authorization_code" in self.grant_types

    def check_grant_type(self, grant_type: str) -> bool:
        if grant_type == MACHINE_GRANT:
            return MACHINE_GRANT in self.grant_types and self.owner_id is not None and not self.is_public
        return grant_type in self.grant_types
