"""Messages between the agents of a session: durable in the database, pushed live to the addressees.

An inbox holds the messages addressed to the agent, to its role or to everyone, from the others, oldest first.
Read marks are per agent and are taken with an insert that only one caller can win, so a message is delivered as
unread once to each addressee, whatever the number of instances, concurrent calls or restarts.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.accounts.principal import Principal
from app.coordination import Coordination
from app.coordination.rules import normalise_path
from app.db import Database, utcnow
from app.errors import NotFound, ValidationFailed
from app.identity import Identity
from app.teams import repository
from app.teams.events import EVERYONE, ROLE_PREFIX, message_event
from app.teams.models import SessionAgent, SessionMessage
from app.teams.schemas import MAX_INBOX_PAGE, InboxOut, MessageIn, MessageLog, MessageOut
from app.teams.service import TeamService, agent_key
from app.text import check_text

MAX_LOG_PAGE = 500


def to_out(message: SessionMessage, *, read: bool = False) -> MessageOut:
    return MessageOut.model_validate(
        {
            "id": message.id,
            "from": message.sender,
            "to": message.recipient,
            "kind": message.kind,
            "content": message.content,
            "attachments": message.attachments or [],
            "reply_to": message.reply_to,
            "time": message.created_at,
            "read": read,
        }
    )


class MessageService:
    """Sending, the inbox, and a session's message log."""

    def __init__(self, db: Database, coordination: Coordination, team: TeamService) -> None:
        self.db = db
        self.coordination = coordination
        self.team = team

    async def send(self, principal: Principal, identity: Identity, request: MessageIn) -> MessageOut:
        """Send a message to an agent, a role (``role:NAME``) or everyone (``*``) of the session."""
        principal.require_write()
        key, agent = agent_key(identity)
        check_text(request.content, "content")
        attachments = []
        for attachment in request.attachments:
            body = attachment.model_dump(exclude_none=True)
            body["file"] = normalise_path(attachment.file)
            for field in ("diff", "content"):
                if field in body:
                    check_text(body[field], f"attachments.{field}")
            attachments.append(body)
        await self.team.seen(identity)
        async with self.db.session() as db:
            agents = await repository.agents_of(db, key.user_id, key.session)
            recipients = _recipients(request.to, agent, agents)
            if request.reply_to is not None and not await repository.message_exists(
                db, key.user_id, key.session, request.reply_to
            ):
                raise NotFound(f"reply_to {request.reply_to} is not a message of this session", field="reply_to")
            row = await repository.add_message(
                db,
                SessionMessage(
                    user_id=key.user_id,
                    session=key.session,
                    sender=agent,
                    recipient=request.to,
                    kind=request.kind,
                    content=request.content,
                    attachments=attachments,
                    reply_to=request.reply_to,
                    created_at=utcnow(),
                ),
            )
            message = to_out(row)
        await self.coordination.publish(key, message_event(message, recipients))
        return message

    async def inbox(
        self,
        principal: Principal,
        identity: Identity,
        *,
        unread_only: bool = True,
        mark_read: bool = True,
        limit: int = 50,
    ) -> InboxOut:
        """The messages to this agent, its role or everyone, oldest first; ``mark_read`` marks those returned."""
        key, agent = agent_key(identity)
        if isinstance(limit, bool) or not 1 <= limit <= MAX_INBOX_PAGE:
            raise ValidationFailed(f"limit must be from 1 to {MAX_INBOX_PAGE}", field="limit")
        await self.team.seen(identity)
        role = await self.team.role_of(identity)
        async with self.db.session() as db:
            rows = await repository.inbox(
                db, key.user_id, key.session, agent, role, unread_only=unread_only, limit=limit + 1
            )
            more = len(rows) > limit
            rows = rows[:limit]
            # Marking is a write: a read-only credential reads the inbox as it is and leaves it so.
            if mark_read and principal.can_write:
                marked = await repository.mark_read(
                    db, key.user_id, key.session, agent, [m.id for m, read in rows if not read], utcnow()
                )
                if unread_only:
                    # Another call of this agent marked some of them first: it delivered those, so this one does not.
                    rows = [(m, read) for m, read in rows if m.id in marked]
        return InboxOut(messages=[to_out(m, read=read) for m, read in rows], more=more)

    async def log(
        self, principal: Principal, identity: Identity, *, after: int | None = None, limit: int = 100
    ) -> MessageLog:
        """Every message of the session, oldest first, a page at a time (for dashboards and scripts).

        A credential bound to one agent reads only what that agent could: the messages it sent, and those to it, its
        role or everyone; another agent's direct messages stay between the two of them."""
        if identity.session is None:
            raise ValidationFailed("a session is needed")
        if isinstance(limit, bool) or not 1 <= limit <= MAX_LOG_PAGE:
            raise ValidationFailed(f"limit must be from 1 to {MAX_LOG_PAGE}", field="limit")
        seen_by = None
        if principal.bound and identity.agent is not None:
            seen_by = (identity.agent, await self.team.role_of(identity))
        async with self.db.session() as db:
            rows = await repository.messages_of(
                db, identity.user_id, identity.session, after=after, limit=limit, seen_by=seen_by
            )
        return MessageLog(messages=[to_out(m) for m in rows], next_after=rows[-1].id if len(rows) == limit else None)

    async def latest(self, user_id: str, session: str, limit: int = 50) -> list[MessageOut]:
        """The newest messages of a session, newest first (the dashboard's message log)."""
        async with self.db.session() as db:
            return [to_out(m) for m in await repository.latest_messages(db, user_id, session, limit=limit)]


def _recipients(to: str, sender: str, agents: Sequence[SessionAgent]) -> list[str] | str:
    """Who a message to ``to`` is pushed to now; a name or role the session has never seen is refused with the
    names that exist."""
    names = sorted(a.agent for a in agents)
    roles = sorted({a.role for a in agents if a.role})
    if to == EVERYONE:
        return EVERYONE
    if to.startswith(ROLE_PREFIX):
        role = to[len(ROLE_PREFIX) :]
        if role not in roles:
            known = ", ".join(f"role:{r}" for r in roles) or "none yet (agents take a role with session_join)"
            raise NotFound(f"no agent of this session has ever had role {role!r}; roles: {known}", field="to")
        return [a.agent for a in agents if a.role == role and a.joined_at is not None and a.agent != sender]
    if to == sender:
        raise ValidationFailed("a message to yourself: address another agent, a role (role:NAME) or '*'", field="to")
    if to not in names:
        others = ", ".join(n for n in names if n != sender) or "none besides you"
        # Who exists is the session's state, not the request's form: 404, as for a reply_to that names no message.
        raise NotFound(f"this session has never seen an agent {to!r}; agents: {others}", field="to")
    return [to]
