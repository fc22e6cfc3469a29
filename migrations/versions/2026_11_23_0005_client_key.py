"""the API key a machine client was registered with

Revision ID: 0005_client_key
Revises: 0004_oauth
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_client_key"
down_revision: str | None = "0004_oauth"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.add_column(sa.Column("registered_with_key", sa.String(length=32), nullable=True))
        batch_op.create_index(batch_op.f("ix_oauth_clients_registered_with_key"), ["registered_with_key"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("oauth_clients", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oauth_clients_registered_with_key"))
        batch_op.drop_column("registered_with_key")
