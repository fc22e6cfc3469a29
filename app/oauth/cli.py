"""``engram oauth clients list|revoke``: a user's machine (client_credentials) clients (app.cli lists the command).

Parsing imports only the standard library, and listing loads no authlib (simple commands start fast,
tests/test_cli.py); each command imports the database and ``app.oauth.machine_clients`` when it runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from app.cli_database import run_with_db
from app.cli_output import add_format_option, print_rows
from app.cli_parser import sub_commands

if TYPE_CHECKING:
    from app.settings import Settings


def describe(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``engram oauth``."""
    oauth = sub_commands(parser, dest="topic", required=True, help="which clients")
    oauth_clients = sub_commands(
        oauth.add_parser("clients", help="machine (client_credentials) clients"),
        dest="action",
        required=True,
        help="what to do with machine clients",
    )
    list_clients = oauth_clients.add_parser("list", help="a user's machine clients")
    list_clients.add_argument("user_id", help="whose machine clients")
    add_format_option(list_clients)
    list_clients.set_defaults(run=_clients_list, brief=True)
    revoke_client = oauth_clients.add_parser("revoke", help="revoke a machine client and every token it holds")
    revoke_client.add_argument("client_id", help="the client's id, as `engram oauth clients list` shows it")
    revoke_client.set_defaults(run=_clients_revoke, brief=True)


def _clients_list(args: argparse.Namespace, settings: Settings) -> int:
    from app.oauth import machine_clients

    async def work(db: Any) -> int:
        async with db.session() as session:
            clients = await machine_clients.list_for(session, args.user_id)
        columns = ("client_id", "name", "scope", "status", "key_name", "created_at", "last_token_at")
        print_rows([client.as_json() for client in clients], args.format, columns)
        return 0

    return run_with_db(settings, work)


def _clients_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from app.oauth import machine_clients

    async def work(db: Any) -> int:
        async with db.session() as session:
            tokens = await machine_clients.revoke(session, args.client_id)
        print(f"revoked {args.client_id} and {tokens} of its tokens")
        return 0

    return run_with_db(settings, work)
