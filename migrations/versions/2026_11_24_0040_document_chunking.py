"""documents remember which chunking rules cut them, so a reconcile re-chunks files cut by older rules

Revision ID: 0040_document_chunking
Revises: 0008_server_secrets
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0040_document_chunking"
down_revision: str | None = "0008_server_secrets"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Every document indexed so far was cut by the first rules.
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("chunking", sa.Integer(), server_default="1", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_column("chunking")
