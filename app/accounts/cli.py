"""``engram users create|set-password|list`` and ``engram keys create|list|revoke`` (app.cli lists the commands;
``users delete`` is app.portability.cli's).

Parsing imports only the standard library (simple commands start fast, tests/test_cli.py); each command imports the
database and the accounts service when it runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from app.cli_database import run_with_db
from app.cli_output import add_format_option, print_rows
from app.cli_parser import described_later, sub_commands

if TYPE_CHECKING:
    from app.settings import Settings


def describe_users(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``engram users``."""
    users = sub_commands(parser, dest="action", required=True, help="what to do with users")
    create_user = users.add_parser("create", help="create a user; prints the user id")
    create_user.add_argument("email", help="the new user's email address")
    create_user.set_defaults(run=_users_create, brief=True)
    set_password = users.add_parser(
        "set-password",
        help="give a user a password for the web pages (read from stdin, or asked twice on a terminal); "
        "ends their browser sessions",
    )
    set_password.add_argument("user_id", help="whose password")
    set_password.set_defaults(run=_users_set_password, brief=True)
    list_users = users.add_parser("list", help="every user: id, email, plan, password (set or not), created_at")
    add_format_option(list_users)
    list_users.set_defaults(run=_users_list, brief=True)
    users.add_parser(
        "delete",
        help="delete a user and everything of theirs, everywhere; needs --yes",
        describe=described_later("app.portability.cli", "describe_users_delete"),
    )


def describe_keys(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``engram keys``."""
    keys = sub_commands(parser, dest="action", required=True, help="what to do with API keys")
    create_key = keys.add_parser("create", help="create a key; prints it, the only time it is shown")
    create_key.add_argument("user_id", help="the user the key acts for")
    create_key.add_argument("--name", default="default", help="what the key is for, shown in lists")
    create_key.add_argument("--scope", choices=["read", "write"], default="write", help="what the key may do")
    create_key.add_argument(
        "--session", default=None, help="bind the key to this session (with --agent): it acts only as that agent"
    )
    create_key.add_argument("--agent", default=None, help="bind the key to this agent (with --session)")
    create_key.set_defaults(run=_keys_create, brief=True)
    list_keys = keys.add_parser(
        "list", help="a user's keys: id, name, scope, prefix, status, created_at, last_used_at, revoked_at"
    )
    list_keys.add_argument("user_id", help="whose keys")
    add_format_option(list_keys)
    list_keys.set_defaults(run=_keys_list, brief=True)
    revoke = keys.add_parser("revoke", help="revoke a key")
    revoke.add_argument("key_id", help="the key's id, as `engram keys list` shows it")
    revoke.set_defaults(run=_keys_revoke, brief=True)


def _users_create(args: argparse.Namespace, settings: Settings) -> int:
    from app.accounts import service

    async def work(db: Any) -> int:
        async with db.session() as session:
            user = await service.create_user(session, args.email)
        print(user.id)
        return 0

    return run_with_db(settings, work)


def _users_set_password(args: argparse.Namespace, settings: Settings) -> int:
    from app.web import service as web

    password = _read_password()

    async def work(db: Any) -> int:
        async with db.session() as session:
            user = await web.set_password(session, args.user_id, password)
        print(f"{user.id} ({user.email}) can log in at /login with that password", file=sys.stderr)
        return 0

    return run_with_db(settings, work)


def _read_password() -> str:
    """Never from an argument, which ``ps`` and shell history show: asked twice on a terminal, else stdin's first
    line."""
    from app.errors import ValidationFailed

    if sys.stdin.isatty():
        import getpass

        first = getpass.getpass("new password: ")
        if getpass.getpass("again: ") != first:
            raise ValidationFailed("the two passwords differ; nothing was changed")
        return first
    return sys.stdin.readline().rstrip("\r\n")


def _users_list(args: argparse.Namespace, settings: Settings) -> int:
    from app.accounts import service

    async def work(db: Any) -> int:
        async with db.session() as session:
            users = await service.list_users(session)
        rows = [
            {
                "id": user.id,
                "email": user.email,
                "plan": user.plan,
                "password": user.password_hash is not None,
                "created_at": user.created_at.isoformat(),
            }
            for user in users
        ]
        print_rows(rows, args.format, ("id", "email", "plan", "password", "created_at"))
        return 0

    return run_with_db(settings, work)


def _keys_create(args: argparse.Namespace, settings: Settings) -> int:
    from app.accounts import service
    from app.accounts.secret import resolve_secret_key

    async def work(db: Any) -> int:
        secret = await resolve_secret_key(db, settings.secret_key, settings.ensure_data_dir())
        async with db.session() as session:
            created = await service.create_key(
                session,
                secret,
                args.user_id,
                name=args.name,
                scope=args.scope,
                bound_session=args.session,
                bound_agent=args.agent,
            )
        print(created.plaintext)
        print(f"the key above is shown once: store it now (its id, for revoking it: {created.key.id})", file=sys.stderr)
        return 0

    return run_with_db(settings, work)


def _keys_list(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import datetime

    from app.accounts import service
    from app.accounts.keys import display_prefix

    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    async def work(db: Any) -> int:
        async with db.session() as session:
            keys = await service.list_keys(session, args.user_id)
        rows = [
            {
                "id": key.id,
                "name": key.name,
                "scope": key.scope,
                "prefix": display_prefix(key.lookup),
                "status": "revoked" if key.revoked_at else "active",
                "created_at": iso(key.created_at),
                "last_used_at": iso(key.last_used_at),
                "revoked_at": iso(key.revoked_at),
                "session": key.session,
                "agent": key.agent,
            }
            for key in keys
        ]
        columns = ("id", "name", "scope", "prefix", "status", "session", "agent", "created_at", "last_used_at")
        print_rows(rows, args.format, columns)
        return 0

    return run_with_db(settings, work)


def _keys_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from app.accounts import service

    async def work(db: Any) -> int:
        async with db.session() as session:
            key = await service.revoke_key(session, args.key_id)
        print(f"revoked {key.id}")
        return 0

    return run_with_db(settings, work)
