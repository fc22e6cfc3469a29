"""memories name the end user of an app they are about (Mem0's user_id): one more dimension to filter on

Revision ID: 0050_end_users
Revises: 0041_credential_revocations
Create Date: 2026-11-27

Existing memories belong to no end user (NULL). The index payload gains ``end_user`` as memories are written; points
written before carry none, which reads as NULL, so nothing needs rewriting.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0050_end_users"
down_revision: str | None = "0041_credential_revocations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("end_user", sa.String(length=128), nullable=True))
        batch_op.create_index("ix_memories_user_end_user", ["user_id", "end_user"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_index("ix_memories_user_end_user")
        batch_op.drop_column("end_user")
