"""Memory events and session messages are numbered in 64 bits on PostgreSQL (one of each per write, for years)

SQLite's INTEGER PRIMARY KEY is 64-bit already: nothing changes there.

Revision ID: 0055_big_event_ids
Revises: 0054_discarded_deletes
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0055_big_event_ids"
down_revision: str | None = "0054_discarded_deletes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, column, the sequence that numbers it or None)
_COLUMNS = (
    ("memory_events", "id", "memory_events_id_seq"),
    ("session_messages", "id", "session_messages_id_seq"),
    ("session_messages", "reply_to", None),
    ("session_message_reads", "message_id", None),
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column, sequence in _COLUMNS:
        op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer())
        if sequence is not None:
            # A serial's sequence is typed too: as an integer it would stop at 2**31 - 1 whatever the column holds.
            op.execute(f"ALTER SEQUENCE {sequence} AS bigint")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column, sequence in reversed(_COLUMNS):
        if sequence is not None:
            op.execute(f"ALTER SEQUENCE {sequence} AS integer")
        op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger())
