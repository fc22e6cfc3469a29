"""``engram sync link|status|once|unlink``: run on a node. Each prints one JSON object on stdout; people's prompts
and warnings go to stderr; a failure is one line on stderr and a non-zero exit.

The parser is built for every ``engram`` command, so this module imports little; each command imports what it
needs when it runs: ``app.sync.status``, or ``app.sync.node_commands`` for those that talk to an edge.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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


def add_commands(sync: Any) -> None:
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
    link.set_defaults(run=_later("node_commands", "run_link"))

    status = sync.add_parser("status", help="this node and every link, as one JSON object")
    status.set_defaults(run=_later("status", "run_status"), brief=True)

    once = sync.add_parser("once", help="push everything pending and pull everything new, for every link")
    once.add_argument(
        "--timeout", type=float, default=DEFAULT_ONCE_TIMEOUT, metavar="SECONDS", help="give up after this long"
    )
    once.set_defaults(run=_later("node_commands", "run_once"))

    unlink = sync.add_parser("unlink", help="remove a link and revoke its tokens on the edge")
    unlink.add_argument("edge_url", metavar="EDGE_URL", help="the edge of the link, as `engram sync status` shows it")
    unlink.add_argument("--user", required=True, metavar="LOCAL_USER_ID", help="the local user of the link")
    unlink.set_defaults(run=_later("node_commands", "run_unlink"))


def _later(module: str, name: str) -> Any:
    def run(args: argparse.Namespace, settings: Settings) -> int:
        import importlib

        command: Any = getattr(importlib.import_module(f"app.sync.{module}"), name)
        code: int = command(args, settings)
        return code

    return run
