"""credential_revocations: revocations announced through the database, for servers in other processes

Revision ID: 0041_credential_revocations
Revises: 0040_document_chunking
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0041_credential_revocations"
down_revision: str | None = "0040_document_chunking"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "credential_revocations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("revoked_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_credential_revocations")),
    )
    op.create_index(
        op.f("ix_credential_revocations_revoked_at"), "credential_revocations", ["revoked_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_credential_revocations_revoked_at"), table_name="credential_revocations")
    op.drop_table("credential_revocations")
