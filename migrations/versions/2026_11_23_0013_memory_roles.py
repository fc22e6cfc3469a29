"""memories of scope role keep their role; history entries say what a promotion changed

Revision ID: 0013_memory_roles
Revises: 0012_session_tasks
Create Date: 2026-11-23

Existing memories keep their visibility keys ("user", "s:SESSION", "a:SESSION:AGENT") and stay public: the new keys
("r:ROLE", "p:SESSION:AGENT") are only ever written from now on, so nothing needs rewriting and the index is unchanged.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_memory_roles"
down_revision: str | None = "0012_session_tasks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("role", sa.String(length=64), nullable=True))
    with op.batch_alter_table("memory_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("detail", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memory_events", schema=None) as batch_op:
        batch_op.drop_column("detail")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_column("role")
