"""The versions of pushed deletes of memories an edge never had, kept for a while so that an older version in flight
loses to them

Revision ID: 0054_discarded_deletes
Revises: 0053_bound_keys
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0054_discarded_deletes"
down_revision: str | None = "0053_bound_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sync_discarded_deletes",
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("memory_id", sa.String(length=36), nullable=False),
        sa.Column("hlc", sa.BigInteger(), nullable=False),
        sa.Column("origin", sa.String(length=40), nullable=False),
        sa.Column("discarded_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_sync_discarded_deletes_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("user_id", "memory_id", name=op.f("pk_sync_discarded_deletes")),
    )
    op.create_index(
        "ix_sync_discarded_deletes_user_time", "sync_discarded_deletes", ["user_id", "discarded_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_sync_discarded_deletes_user_time", table_name="sync_discarded_deletes")
    op.drop_table("sync_discarded_deletes")
