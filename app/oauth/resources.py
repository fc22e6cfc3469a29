"""RFC 8707 resource indicators: which URLs a token may be bound to, and the RFC 9728 metadata URL of each. Pure.

The rule: a token is bound to exactly one resource and is accepted only there. ``{base}/v1`` (the REST API) may be
granted to any user and acts as that user; an MCP URL ``{base}/mcp/v2/{client}/{id}`` may only be granted to the
user whose id (plain, or the user part of a virtual id) is in the URL, and the token works on that one URL only.
``{base}/sync/v1`` (edge sync) acts as the token's user too, and only with the ``sync`` scope (see ``scopes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from app.errors import InvalidIdentity
from app.identity import parse_identity

API_PATH = "/v1"
SYNC_PATH = "/sync/v1"
MCP_PREFIX = "/mcp/v2/"
PRM_PATH = "/.well-known/oauth-protected-resource"
MAX_CLIENT_NAME = 100


@dataclass(frozen=True, slots=True)
class Resource:
    url: str
    # None for the REST API and the sync resource, which are not tied to one user by their URL.
    user_id: str | None
    # The sync resource: only tokens with the sync scope, from the device or client credentials grants.
    sync: bool = False
    # An MCP session URL's session and agent: a token for it is bound to that agent (Principal.session, .agent).
    session: str | None = None
    agent: str | None = None


def api_resource(base: str) -> str:
    return base + API_PATH


def sync_resource(base: str) -> str:
    return base + SYNC_PATH


def mcp_resource(base: str, client_name: str, user_id: str) -> str:
    """The canonical URL of an MCP endpoint: both parts percent-encoded the one same way, whatever the client sent."""
    return f"{base}{MCP_PREFIX}{quote(client_name, safe='')}/{quote(user_id, safe='')}"


def parse(base: str, url: str) -> Resource | None:
    """The resource ``url`` names on this server, or None when it names nothing we protect."""
    url = url[:-1] if url.endswith("/") else url
    parts = urlsplit(url)
    if parts.query or parts.fragment or not url.startswith(base + "/"):
        return None
    path = url[len(base) :]
    if path == API_PATH:
        return Resource(url, None)
    if path == SYNC_PATH:
        return Resource(url, None, sync=True)
    if not path.startswith(MCP_PREFIX):
        return None
    segments = [unquote(s) for s in path[len(MCP_PREFIX) :].split("/")]
    if len(segments) != 2 or not segments[0] or len(segments[0]) > MAX_CLIENT_NAME:
        return None
    try:
        identity = parse_identity(segments[1])
    except InvalidIdentity:
        return None
    url = mcp_resource(base, segments[0], segments[1])
    return Resource(url, identity.user_id, session=identity.session, agent=identity.agent)


def allowed_for(base: str, url: str, user_id: str) -> Resource | None:
    """The resource when ``user_id`` may have a token for it."""
    resource = parse(base, url)
    if resource is None or (resource.user_id is not None and resource.user_id != user_id):
        return None
    return resource


def metadata_url(resource: str) -> str:
    """RFC 9728 section 3.1: the well-known path goes between the host and the resource's path."""
    parts = urlsplit(resource)
    path = parts.path if parts.path != "/" else ""
    return f"{parts.scheme}://{parts.netloc}{PRM_PATH}{path}"


def bearer_challenge(
    resource: str | None, scope: str, error: str | None = None, description: str | None = None
) -> dict[str, str]:
    """``WWW-Authenticate`` for a request to ``resource`` that lacks a usable token."""
    params = ['realm="engram"']
    if error:
        params.append(f'error="{error}"')
    if description:
        params.append('error_description="{}"'.format(description.replace('"', "'").replace("\\", "/")))
    if resource:
        params.append(f'resource_metadata="{metadata_url(resource)}"')
    params.append(f'scope="{scope}"')
    return {"WWW-Authenticate": "Bearer " + ", ".join(params)}
