"""the agents that have used each session: the team registry

Revision ID: 0010_session_agents
Revises: 0006_client_revocation
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0010_session_agents"
down_revision: str | None = "0006_client_revocation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_agents",
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=64), nullable=True),
        sa.Column("capabilities", sa.JSON(), nullable=False),
        sa.Column("client", sa.String(length=64), nullable=True),
        sa.Column("joined_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("left_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("first_seen_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_session_agents_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("user_id", "session", "agent", name=op.f("pk_session_agents")),
    )


def downgrade() -> None:
    op.drop_table("session_agents")
