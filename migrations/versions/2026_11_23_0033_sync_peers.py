"""the edge's record of the machines that sync each user's memories

Revision ID: 0033_sync_peers
Revises: 0032_sync_links
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0033_sync_peers"
down_revision: str | None = "0032_sync_links"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sync_peers",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("node_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("family_id", sa.String(length=40), nullable=False),
        sa.Column("client_id", sa.String(length=512), nullable=False),
        sa.Column("pulled_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("cut_off_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_sync_peers_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sync_peers")),
        sa.UniqueConstraint("user_id", "node_id", name="uq_sync_peers_user_node"),
    )
    with op.batch_alter_table("sync_peers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sync_peers_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("sync_peers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sync_peers_user_id"))
    op.drop_table("sync_peers")
