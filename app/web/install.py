"""The install panel: session URLs and the exact commands to paste. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote

from app.identity import format_identity

CLIENTS = ("claude-code", "cursor")
KEY_PLACEHOLDER = "<your-key>"


@dataclass(frozen=True, slots=True)
class Command:
    id: str
    label: str
    text: str


def _sq(value: str) -> str:
    """Single-quote for a POSIX shell."""
    return "'" + value.replace("'", "'\\''") + "'"


def session_url(base_url: str, client: str, user_id: str, session: str, agent: str) -> str:
    """``{base}/mcp/v2/{client}/{user}__session__{session}__{agent}``; raises InvalidIdentity for bad names."""
    identity = format_identity(user_id, session, agent)
    return f"{base_url.rstrip('/')}/mcp/v2/{quote(client, safe='')}/{quote(identity, safe='')}"


def install_commands(base_url: str, user_id: str, session: str, agent: str, key: str | None) -> list[Command]:
    """Every command the panel shows, with ``key`` or a placeholder in it."""
    bearer = f"Authorization: Bearer {key or KEY_PLACEHOLDER}"
    commands = []
    for client in CLIENTS:
        url = session_url(base_url, client, user_id, session, agent)
        commands.append(
            Command(
                id=f"{client}-key",
                label=f"{client} with an API key",
                text=f"npx install-mcp {_sq(url)} --client {client} --header {_sq(bearer)}",
            )
        )
    for client in CLIENTS:
        url = session_url(base_url, client, user_id, session, agent)
        commands.append(
            Command(
                id=f"{client}-oauth",
                label=f"{client} with OAuth (log in from the browser)",
                text=f"npx install-mcp {_sq(url)} --client {client} --oauth yes",
            )
        )
    body = json.dumps({"query": "how do we paginate?", "session": session, "agent": agent})
    commands.append(
        Command(
            id="curl",
            label="curl, for scripts",
            text=(
                f"curl -s {_sq(base_url.rstrip('/') + '/v1/memories/search')} -H {_sq(bearer)} "
                f"-H 'content-type: application/json' -d {_sq(body)}"
            ),
        )
    )
    return commands
