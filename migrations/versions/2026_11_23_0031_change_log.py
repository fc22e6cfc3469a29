"""the change log (outbox) of memory writes, in commit order, and this database's node identity

Revision ID: 0031_change_log
Revises: 0030_memory_versions
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0031_change_log"
down_revision: str | None = "0030_memory_versions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sync_node",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("node_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sync_node")),
        sa.UniqueConstraint("node_id", name=op.f("uq_sync_node_node_id")),
    )
    op.create_table(
        "memory_changes",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("memory_id", sa.String(length=36), nullable=False),
        sa.Column("op", sa.String(length=8), nullable=False),
        sa.Column("hlc", sa.BigInteger(), nullable=False),
        sa.Column("origin", sa.String(length=40), nullable=False),
        sa.Column("writer", sa.String(length=40), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=True),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_memory_changes_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_memory_changes")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("memory_changes", schema=None) as batch_op:
        batch_op.create_index("ix_memory_changes_user_seq", ["user_id", "seq"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("memory_changes", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_changes_user_seq")
    op.drop_table("memory_changes")
    op.drop_table("sync_node")
