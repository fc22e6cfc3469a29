"""messages between the agents of a session, and per-agent read marks

Revision ID: 0011_session_messages
Revises: 0010_session_agents
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0011_session_messages"
down_revision: str | None = "0010_session_agents"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("sender", sa.String(length=64), nullable=False),
        sa.Column("recipient", sa.String(length=70), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("attachments", sa.JSON(), nullable=False),
        sa.Column("reply_to", sa.Integer(), nullable=True),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_session_messages_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_messages")),
    )
    with op.batch_alter_table("session_messages", schema=None) as batch_op:
        batch_op.create_index("ix_session_messages_user_session", ["user_id", "session", "id"], unique=False)

    op.create_table(
        "session_message_reads",
        sa.Column("message_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("read_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["session_messages.id"],
            name=op.f("fk_session_message_reads_message_id_session_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("message_id", "agent", name=op.f("pk_session_message_reads")),
    )
    with op.batch_alter_table("session_message_reads", schema=None) as batch_op:
        batch_op.create_index("ix_session_message_reads_reader", ["user_id", "session", "agent"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("session_message_reads", schema=None) as batch_op:
        batch_op.drop_index("ix_session_message_reads_reader")
    op.drop_table("session_message_reads")
    with op.batch_alter_table("session_messages", schema=None) as batch_op:
        batch_op.drop_index("ix_session_messages_user_session")
    op.drop_table("session_messages")
