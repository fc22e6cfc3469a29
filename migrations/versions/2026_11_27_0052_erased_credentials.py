"""the digests of a deleted account's sync credentials, so its linked machines hear 410 account_deleted

Revision ID: 0052_erased_credentials
Revises: 0051_session_archives
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0052_erased_credentials"
down_revision: str | None = "0051_session_archives"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "erased_credentials",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("erased_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_erased_credentials")),
    )


def downgrade() -> None:
    op.drop_table("erased_credentials")
