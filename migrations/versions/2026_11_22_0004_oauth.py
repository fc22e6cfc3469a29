"""OAuth clients, authorization codes and tokens (hashes only)

Revision ID: 0004_oauth
Revises: 0003_web_sessions
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0004_oauth"
down_revision: str | None = "0003_web_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "oauth_clients",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=True),
        sa.Column("owner_id", sa.String(length=64), nullable=True),
        sa.Column("client_metadata", sa.JSON(), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_oauth_clients_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_clients")),
    )
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_oauth_clients_owner_id"), ["owner_id"], unique=False)

    op.create_table(
        "oauth_codes",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("client_id", sa.String(length=512), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("redirect_uri", sa.String(length=2000), nullable=False),
        sa.Column("scope", sa.String(length=255), nullable=False),
        sa.Column("resource", sa.String(length=2000), nullable=False),
        sa.Column("code_challenge", sa.String(length=128), nullable=False),
        sa.Column("family_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("used_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_oauth_codes_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_codes")),
    )
    with op.batch_alter_table("oauth_codes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_oauth_codes_user_id"), ["user_id"], unique=False)

    op.create_table(
        "oauth_tokens",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("family_id", sa.String(length=40), nullable=False),
        sa.Column("client_id", sa.String(length=512), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("grant_type", sa.String(length=32), nullable=False),
        sa.Column("scope", sa.String(length=255), nullable=False),
        sa.Column("resource", sa.String(length=2000), nullable=False),
        sa.Column("access_hash", sa.String(length=64), nullable=False),
        sa.Column("access_expires_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("refresh_hash", sa.String(length=64), nullable=True),
        sa.Column("refresh_expires_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("refresh_used_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_oauth_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_tokens")),
        sa.UniqueConstraint("access_hash", name=op.f("uq_oauth_tokens_access_hash")),
        sa.UniqueConstraint("refresh_hash", name=op.f("uq_oauth_tokens_refresh_hash")),
    )
    with op.batch_alter_table("oauth_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_oauth_tokens_client_id"), ["client_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_oauth_tokens_family_id"), ["family_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_oauth_tokens_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("oauth_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oauth_tokens_user_id"))
        batch_op.drop_index(batch_op.f("ix_oauth_tokens_family_id"))
        batch_op.drop_index(batch_op.f("ix_oauth_tokens_client_id"))

    op.drop_table("oauth_tokens")
    with op.batch_alter_table("oauth_codes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oauth_codes_user_id"))

    op.drop_table("oauth_codes")
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oauth_clients_owner_id"))

    op.drop_table("oauth_clients")
