"""Each user's number of live memories, kept by SQLite itself (``users.memories_stored``)

On SQLite the memory quota counted a user's live memories at every write: an index scan as long as the user's
memories (20 ms at 200,000), inside the one write lock every tenant's writes share. Triggers on ``memories`` now keep
the number on the user's row, in the writing transaction, whichever path writes: adds, deletes, imports, sync pushes,
erasure. Filled from a count here, once.

SQLite only: it has one writer at a time. On PostgreSQL a trigger would lock the user's row from inside a memory's
write, the reverse of the quota's order (user's row first, then memories): a replace and a delete of the same memory
could deadlock. There the column stays 0 and the quota counts, which costs that user's writers alone.

Revision ID: 0056_memories_stored
Revises: 0055_big_event_ids
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0056_memories_stored"
down_revision: str | None = "0055_big_event_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A memory is live while deleted_at is NULL; a tombstone keeps its row with deleted_at set.
_SQLITE = (
    """
    CREATE TRIGGER memories_stored_insert AFTER INSERT ON memories WHEN NEW.deleted_at IS NULL
    BEGIN
        UPDATE users SET memories_stored = memories_stored + 1 WHERE id = NEW.user_id;
    END
    """,
    """
    CREATE TRIGGER memories_stored_delete AFTER DELETE ON memories WHEN OLD.deleted_at IS NULL
    BEGIN
        UPDATE users SET memories_stored = memories_stored - 1 WHERE id = OLD.user_id;
    END
    """,
    """
    CREATE TRIGGER memories_stored_update AFTER UPDATE OF deleted_at, user_id ON memories
    WHEN (OLD.deleted_at IS NULL) != (NEW.deleted_at IS NULL) OR OLD.user_id != NEW.user_id
    BEGIN
        UPDATE users SET memories_stored = memories_stored - 1 WHERE id = OLD.user_id AND OLD.deleted_at IS NULL;
        UPDATE users SET memories_stored = memories_stored + 1 WHERE id = NEW.user_id AND NEW.deleted_at IS NULL;
    END
    """,
)


def upgrade() -> None:
    with op.batch_alter_table("users") as batch_op:
        batch_op.add_column(sa.Column("memories_stored", sa.Integer(), nullable=False, server_default="0"))
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        "UPDATE users SET memories_stored = (SELECT count(*) FROM memories"
        " WHERE memories.user_id = users.id AND memories.deleted_at IS NULL)"
    )
    for statement in _SQLITE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in ("memories_stored_insert", "memories_stored_delete", "memories_stored_update"):
            op.execute(f"DROP TRIGGER {name}")
    with op.batch_alter_table("users") as batch_op:
        batch_op.drop_column("memories_stored")
