"""OAuth device authorization requests (RFC 8628)

Revision ID: 0036_device_codes
Revises: 0007_session_lives
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0036_device_codes"
down_revision: str | None = "0007_session_lives"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "oauth_device_codes",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_code", sa.String(length=64), nullable=False),
        sa.Column("client_id", sa.String(length=512), nullable=False),
        sa.Column("scope", sa.String(length=255), nullable=False),
        sa.Column("resource", sa.String(length=2000), nullable=False),
        sa.Column("family_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("interval", sa.Integer(), nullable=False),
        sa.Column("polled_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("user_id", sa.String(length=64), nullable=True),
        sa.Column("decision", sa.String(length=16), nullable=True),
        sa.Column("decided_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("used_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_oauth_device_codes_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_device_codes")),
        sa.UniqueConstraint("user_code", name=op.f("uq_oauth_device_codes_user_code")),
    )
    with op.batch_alter_table("oauth_device_codes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_oauth_device_codes_client_id"), ["client_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_oauth_device_codes_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_oauth_device_codes_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("oauth_device_codes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oauth_device_codes_user_id"))
        batch_op.drop_index(batch_op.f("ix_oauth_device_codes_expires_at"))
        batch_op.drop_index(batch_op.f("ix_oauth_device_codes_client_id"))

    op.drop_table("oauth_device_codes")
