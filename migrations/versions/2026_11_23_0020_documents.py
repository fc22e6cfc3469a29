"""indexed documents of a session, and the memories (chunks) made from each

Revision ID: 0020_documents
Revises: 0036_device_codes
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0020_documents"
down_revision: str | None = "0036_device_codes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "documents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("path", sa.String(length=512), nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("modified_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("memory_ids", sa.JSON(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("indexed_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_documents_user_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_documents")),
        sa.UniqueConstraint("user_id", "session", "path", name="uq_documents_user_id_session_path"),
    )


def downgrade() -> None:
    op.drop_table("documents")
