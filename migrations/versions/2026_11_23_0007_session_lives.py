"""coordination lives of a session, counted in the database so fencing tokens and cursors survive Redis restarts

Revision ID: 0007_session_lives
Revises: 0033_sync_peers
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_session_lives"
down_revision: str | None = "0033_sync_peers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_lives",
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("life", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "session", name=op.f("pk_session_lives")),
    )


def downgrade() -> None:
    op.drop_table("session_lives")
