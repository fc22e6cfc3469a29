"""What ``engram sync link|once|unlink`` do, each talking to an edge (the parser is in ``app.sync.cli``;
``engram sync status``, which reads the database alone, is ``app.sync.status``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx

from app.accounts import repository as accounts
from app.db import Database
from app.errors import Conflict, NotFound, ServiceUnavailable, ValidationFailed
from app.settings import Settings
from app.sync import credentials, links, timeouts
from app.sync.changelog import head, load_node_id
from app.sync.credentials import CredentialsRefused, SyncAuthError
from app.sync.grants import NodeClient, Tokens
from app.sync.status import node_database, print_json

if TYPE_CHECKING:  # the runtime and the worker bring the model and the stores, which link and unlink never need
    from app.sync.runtime import SyncRuntime
    from app.sync.worker import LinkRunner


# --- link -------------------------------------------------------------------------------------------------------


def run_link(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_link(args, settings))


async def _link(args: argparse.Namespace, settings: Settings) -> int:
    edge_url = credentials.normalise_edge_url(args.edge_url)
    if bool(args.client_id) != bool(args.client_secret):
        raise ValidationFailed("give both --client-id and --client-secret, or neither (then a person approves it)")
    async with node_database(settings) as db, timeouts.client(settings) as http:
        async with db.session() as session:
            if await accounts.get_user(session, args.user) is None:
                raise NotFound(f"no local user {args.user!r}: create it with `engram users create`")
        edge = await credentials.discover(http, edge_url)
        if args.client_id:
            client = NodeClient(args.client_id, args.client_secret)
            tokens = await credentials.client_credentials_token(http, edge, client)
            grant = "client_credentials"
        else:
            name = args.name or credentials.default_device_name()
            client = await credentials.register_device_client(http, edge, name)
            flow = await credentials.start_device_flow(http, edge, client)
            prompt = f"To link this machine, open {flow.verification_uri} and enter the code {flow.user_code}"
            print(prompt, file=sys.stderr)
            if flow.verification_uri_complete:
                print(f"(or open {flow.verification_uri_complete})", file=sys.stderr)
            sys.stderr.flush()
            tokens = await credentials.poll_device_flow(http, edge, client, flow)
            grant = "device_code"
        who = await _whoami(http, edge, tokens)
        async with db.session() as session:
            others = await links.linked_to(session, edge_url, who.get("node_id", ""), who["user_id"])
        taken = [link.local_user_id for link in others if link.local_user_id != args.user]
        if taken:
            with contextlib.suppress(SyncAuthError):  # the grant just made serves nothing
                await credentials.revoke_tokens(http, edge, client, tokens)
            raise Conflict(
                f"the edge user {who['user_id']} is already linked to the local user {taken[0]} on this machine, "
                "and an edge user syncs with one local user per machine (the same memories cannot belong to two "
                f"users here): link another edge user, or first `engram sync unlink {edge_url} --user {taken[0]}`"
            )
        await load_node_id(db)
        async with db.session() as session:
            link = await links.replace(
                session,
                edge_url=edge_url,
                local_user_id=args.user,
                edge_user_id=who["user_id"],
                edge_node_id=who.get("node_id", ""),
                grant_type=grant,
                client=client,
                tokens=tokens,
                log_head=await head(session),
            )
            described = await links.describe(session, link)
    print_json(described)
    return 0


async def _whoami(http: httpx.AsyncClient, edge: credentials.Edge, tokens: Tokens) -> dict[str, str]:
    try:
        bearer = {"Authorization": f"Bearer {tokens.access_token}"}
        response = await timeouts.request(http, "GET", f"{edge.sync_resource}/me", headers=bearer)
    except httpx.TransportError as exc:
        raise credentials.EdgeUnreachable(f"cannot reach {edge.url}: {exc}") from exc
    body = response.json() if response.headers.get("content-type", "").startswith("application/json") else None
    if response.status_code != 200 or not isinstance(body, dict) or not isinstance(body.get("user_id"), str):
        raise credentials.EdgeRefused(f"{edge.sync_resource}/me answered {response.status_code}: {response.text[:200]}")
    return {k: str(v) for k, v in body.items() if isinstance(v, str)}


# --- once -------------------------------------------------------------------------------------------------------


def run_once(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_once(args, settings))


async def _once(args: argparse.Namespace, settings: Settings) -> int:
    from app.sync.worker import LinkRunner, SyncContext

    if args.timeout <= 0:
        raise ValidationFailed("--timeout must be a positive number of seconds", field="timeout")
    async with _runtime(settings) as (runtime, db, engine):
        feed = runtime.changes.feed
        context = SyncContext(settings, db, engine, runtime.applier, feed, runtime.node_id, runtime.dims)
        async with db.session() as session:
            every = await links.all_links(session)
        try:
            async with asyncio.timeout(args.timeout), timeouts.client(settings) as http:
                for link in every:
                    await _exchange(LinkRunner(context, link, http))
        except TimeoutError:
            raise ServiceUnavailable(f"sync did not finish within {args.timeout:g} s") from None
        async with db.session() as session:
            described = [await links.describe(session, link) for link in await links.all_links(session)]
    print_json({"node_id": runtime.node_id, "links": described})
    return 0


async def _exchange(runner: LinkRunner) -> None:
    direction = "push"
    try:
        while not await runner.step_push():
            pass
        direction = "pull"
        while await runner.step_pull(0.0):
            pass
    except SyncAuthError as exc:
        reason = exc.message
        if isinstance(exc, CredentialsRefused):
            reason = links.relink_hint(runner.edge_url, runner.local_user, exc.message)
        await links.set_state(runner.context.db, runner.link_id, direction, exc.state, reason)
        raise type(exc)(f"{runner.edge_url} for {runner.local_user}: {reason}") from exc
    finally:
        runner.discard_ahead()


@asynccontextmanager
async def _runtime(settings: Settings) -> AsyncIterator[tuple[SyncRuntime, Database, Any]]:
    """The server's parts when the index is free; else the database alone (the running server's index follows it)."""
    from app.assembly import build_container, close_container
    from app.memories.engine import IndexInUse
    from app.sync.runtime import open_sync

    try:
        container = await build_container(settings)
    except IndexInUse:
        async with node_database(settings) as db:
            runtime = await open_sync(settings, db, None, dims=0, writer="w_cli_" + secrets.token_hex(6))
            yield runtime, db, None
        return
    try:
        assert container.sync is not None
        yield container.sync, container.db, container.engine
    finally:
        await close_container(container)


# --- unlink -----------------------------------------------------------------------------------------------------


def run_unlink(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_unlink(args, settings))


async def _unlink(args: argparse.Namespace, settings: Settings) -> int:
    edge_url = credentials.normalise_edge_url(args.edge_url)
    async with node_database(settings) as db:
        async with db.session() as session:
            link = await links.find(session, edge_url, args.user)
        if link is None:
            raise NotFound(f"no link to {edge_url} for {args.user!r}")
        revoked = True
        try:
            async with timeouts.client(settings) as http:
                edge = await credentials.discover(http, edge_url)
                await credentials.revoke_tokens(http, edge, links.client_of(link), links.tokens_of(link, ""))
        except SyncAuthError as exc:
            revoked = False
            print(f"warning: the tokens could not be revoked on the edge: {exc.message}", file=sys.stderr)
        async with db.session() as session:
            await links.remove(session, link.id)
    gone = {"edge": edge_url, "local_user": args.user, "edge_user": link.edge_user_id, "unlinked": True}
    print_json({**gone, "revoked": revoked})
    return 0
