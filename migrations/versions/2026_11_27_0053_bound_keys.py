"""API keys bound to one session and agent, so that private memories are a boundary between agents

Revision ID: 0053_bound_keys
Revises: 0052_erased_credentials
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0053_bound_keys"
down_revision: str | None = "0052_erased_credentials"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("session", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("agent", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("agent")
        batch.drop_column("session")
