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


def server_name(session: str, agent: str) -> str:
    """The name install-mcp gives the entry: one per session and agent, so a second install adds, not replaces."""
    return f"engram-{session}-{agent}"


def install_commands(base_url: str, user_id: str, session: str, agent: str, key: str | None) -> list[Command]:
    """Every command the panel shows, with ``key`` or a placeholder in it.

    They run as printed in a terminal and in a script: ``--yes`` and ``--oauth yes|no`` answer both questions
    install-mcp would otherwise ask (without a terminal it crashes asking), and ``--name`` keeps one entry per agent."""
    bearer = f"Authorization: Bearer {key or KEY_PLACEHOLDER}"
    name = server_name(session, agent)  # names are [A-Za-z0-9._-]: nothing for a shell to expand
    commands = []
    for client in CLIENTS:
        url = session_url(base_url, client, user_id, session, agent)
        commands.append(
            Command(
                id=f"{client}-key",
                label=f"{client} with an API key",
                text=(
                    f"npx install-mcp {_sq(url)} --client {client} --header {_sq(bearer)} "
                    f"--oauth no --yes --name {name}"
                ),
            )
        )
    for client in CLIENTS:
        url = session_url(base_url, client, user_id, session, agent)
        commands.append(
            Command(
                id=f"{client}-oauth",
                label=f"{client} with OAuth (log in from the browser)",
                text=f"npx install-mcp {_sq(url)} --client {client} --oauth yes --yes --name {name}",
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
