"""a node's links of local users to users on an edge, with credentials and positions

Revision ID: 0032_sync_links
Revises: 0031_change_log
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0032_sync_links"
down_revision: str | None = "0031_change_log"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sync_links",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("edge_url", sa.String(length=512), nullable=False),
        sa.Column("local_user_id", sa.String(length=64), nullable=False),
        sa.Column("edge_user_id", sa.String(length=64), nullable=False),
        sa.Column("edge_node_id", sa.String(length=40), nullable=False),
        sa.Column("grant_type", sa.String(length=32), nullable=False),
        sa.Column("client_id", sa.String(length=512), nullable=False),
        sa.Column("client_secret", sa.Text(), nullable=True),
        sa.Column("access_token", sa.Text(), nullable=True),
        sa.Column("access_expires_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("refresh_token", sa.Text(), nullable=True),
        sa.Column("refreshing_until", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("push_after", sa.String(length=36), nullable=True),
        sa.Column("push_seq", sa.BigInteger(), nullable=False),
        sa.Column("pull_cursor", sa.String(length=200), nullable=False),
        sa.Column("push_state", sa.String(length=16), nullable=False),
        sa.Column("push_error", sa.Text(), nullable=True),
        sa.Column("pull_state", sa.String(length=16), nullable=False),
        sa.Column("pull_error", sa.Text(), nullable=True),
        sa.Column("last_push_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_pull_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["local_user_id"], ["users.id"], name=op.f("fk_sync_links_local_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sync_links")),
        sa.UniqueConstraint("edge_url", "local_user_id", name="uq_sync_links_edge_user"),
    )
    with op.batch_alter_table("sync_links", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sync_links_local_user_id"), ["local_user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("sync_links", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sync_links_local_user_id"))
    op.drop_table("sync_links")
