"""memories carry the version edge sync orders by: a hybrid logical clock and the node that wrote it

Revision ID: 0030_memory_versions
Revises: 0013_memory_roles
Create Date: 2026-11-23

Rows written before this revision get version 0 from no node: any later write, anywhere, wins over them.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030_memory_versions"
down_revision: str | None = "0013_memory_roles"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("hlc", sa.BigInteger(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("origin", sa.String(length=40), nullable=False, server_default=""))
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.alter_column("hlc", server_default=None)
        batch_op.alter_column("origin", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_column("origin")
        batch_op.drop_column("hlc")
