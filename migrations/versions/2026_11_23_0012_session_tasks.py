"""the task graph of a session: tasks and their dependencies

Revision ID: 0012_session_tasks
Revises: 0011_session_messages
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0012_session_tasks"
down_revision: str | None = "0011_session_messages"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_tasks",
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("assignee", sa.String(length=64), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("files_modified", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("completed_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_session_tasks_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("user_id", "session", "task_id", name=op.f("pk_session_tasks")),
    )
    op.create_table(
        "session_task_deps",
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("depends_on", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id", "session", "task_id"],
            ["session_tasks.user_id", "session_tasks.session", "session_tasks.task_id"],
            name=op.f("fk_session_task_deps_user_id_session_tasks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", "session", "task_id", "depends_on", name=op.f("pk_session_task_deps")),
    )
    with op.batch_alter_table("session_task_deps", schema=None) as batch_op:
        batch_op.create_index("ix_session_task_deps_depends_on", ["user_id", "session", "depends_on"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("session_task_deps", schema=None) as batch_op:
        batch_op.drop_index("ix_session_task_deps_depends_on")
    op.drop_table("session_task_deps")
    op.drop_table("session_tasks")
