"""machine clients can be revoked; those minted with an OAuth token are revoked

Revision ID: 0006_client_revocation
Revises: 0005_client_key
Create Date: 2026-11-23

Before this revision an OAuth access token could register a client_credentials client, which then outlived every
revocation of the grant that made it. Such clients (an owner, but no registering API key) are revoked here, with their
tokens: only an API key, the CLI or the dashboard may make a machine client now.
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0006_client_revocation"
down_revision: str | None = "0005_client_key"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revoked_at", app.db.UTCDateTime(timezone=True), nullable=True))
    clients = sa.table(
        "oauth_clients",
        sa.column("id", sa.String),
        sa.column("owner_id", sa.String),
        sa.column("registered_with_key", sa.String),
        sa.column("revoked_at", app.db.UTCDateTime()),
    )
    tokens = sa.table("oauth_tokens", sa.column("client_id", sa.String), sa.column("revoked_at", app.db.UTCDateTime()))
    now = datetime.now(UTC)
    minted_by_token = sa.select(clients.c.id).where(
        clients.c.owner_id.is_not(None), clients.c.registered_with_key.is_(None)
    )
    op.execute(
        tokens.update()
        .where(tokens.c.client_id.in_(minted_by_token), tokens.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    op.execute(
        clients.update()
        .where(clients.c.owner_id.is_not(None), clients.c.registered_with_key.is_(None))
        .values(revoked_at=now)
    )


def downgrade() -> None:
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.drop_column("revoked_at")
