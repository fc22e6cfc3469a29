"""``engram sync``: ``clients create``, run on an edge, and ``link|status|once|unlink``, run on a node. Each prints
one JSON object on stdout; people's prompts and warnings go to stderr; a failure is one line on stderr and a non-zero
exit.

Every ``engram`` command loads this module (main reads the command line with ``glue_option_values``), so it imports
little; each command imports what it needs when it runs: ``app.oauth.machine_clients`` for ``clients create``,
``app.sync.status``, or ``app.sync.node_cli`` for those that talk to an edge.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.cli_parser import sub_commands

if TYPE_CHECKING:
    from app.settings import Settings

DEFAULT_ONCE_TIMEOUT = 600.0
# Options whose values are secrets or ids that may begin with "-", which argparse would take for an option.
_VERBATIM = ("--client-secret", "--client-id")


def glue_option_values(argv: Sequence[str]) -> list[str]:
    """``--client-secret -abc`` as ``--client-secret=-abc``: a secret may start with a dash."""
    out: list[str] = []
    items = iter(argv)
    for item in items:
        if item in _VERBATIM:
            value = next(items, None)
            out.append(item if value is None else f"{item}={value}")
        else:
            out.append(item)
    return out


def describe(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``engram sync`` (app.cli lists the command)."""
    sync = sub_commands(
        parser, dest="topic", required=True, help="clients on an edge; link, status, once and unlink on a node"
    )
    sync_clients = sync.add_parser("clients", help="sync credentials for servers and scripts (run on the edge)")
    sync_clients_actions = sub_commands(sync_clients, dest="action", required=True, help="what to do with sync clients")
    create_sync = sync_clients_actions.add_parser(
        "create",
        help="make a client_credentials client with scope sync acting as EDGE_USER_ID; prints "
        '{"client_id": ..., "client_secret": ...}, the only time the secret is shown',
    )
    create_sync.add_argument("user_id", metavar="EDGE_USER_ID", help="the user on this edge whose memories it syncs")
    create_sync.add_argument("--name", required=True, help="what the machine is called (shown on the dashboard)")
    create_sync.set_defaults(run=_clients_create, brief=True)
    _add_node_commands(sync)


def _add_node_commands(sync: Any) -> None:
    """Register the node's commands under ``engram sync``."""
    link = sync.add_parser("link", help="link a local user to a user on an edge; prints the link as JSON")
    link.add_argument(
        "edge_url", metavar="EDGE_URL", help="the edge: https://HOST[:PORT][/PATH], or http:// on this machine"
    )
    link.add_argument("--user", required=True, metavar="LOCAL_USER_ID", help="the local user to link")
    link.add_argument(
        "--client-id", help="a sync client's id (engram sync clients create, on the edge); without it a person approves"
    )
    link.add_argument("--client-secret", help="its secret (with --client-id)")
    link.add_argument("--name", help="what the edge calls this machine (default: Engram on HOSTNAME)")
    link.set_defaults(run=_later("node_cli", "run_link"))

    status = sync.add_parser("status", help="this node and every link, as one JSON object")
    status.set_defaults(run=_later("status", "run_status"), brief=True)

    once = sync.add_parser("once", help="push everything pending and pull everything new, for every link")
    once.add_argument(
        "--timeout", type=float, default=DEFAULT_ONCE_TIMEOUT, metavar="SECONDS", help="give up after this long"
    )
    once.set_defaults(run=_later("node_cli", "run_once"))

    unlink = sync.add_parser("unlink", help="remove a link and revoke its tokens on the edge")
    unlink.add_argument("edge_url", metavar="EDGE_URL", help="the edge of the link, as `engram sync status` shows it")
    unlink.add_argument("--user", required=True, metavar="LOCAL_USER_ID", help="the local user of the link")
    unlink.set_defaults(run=_later("node_cli", "run_unlink"))


def _later(module: str, name: str) -> Any:
    def run(args: argparse.Namespace, settings: Settings) -> int:
        import importlib

        command: Any = getattr(importlib.import_module(f"app.sync.{module}"), name)
        code: int = command(args, settings)
        return code

    return run


def _clients_create(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from app.cli_database import run_with_db
    from app.oauth import machine_clients

    async def work(db: Any) -> int:
        async with db.session() as session:
            created = await machine_clients.create_sync_client(session, args.user_id, args.name)
        print(json.dumps(created.as_json()))
        return 0

    return run_with_db(settings, work)
