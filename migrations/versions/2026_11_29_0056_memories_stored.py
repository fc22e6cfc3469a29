"""Each user's number of live memories, kept by the database itself (``users.memories_stored``)

The memory quota counted a user's live memories at every write: an index scan as long as the user's memories (20 ms
at 200,000 on SQLite, inside the one write lock every tenant's writes share). Triggers on ``memories`` now keep the
number on the user's row, in the writing transaction, whichever path writes: adds, deletes, imports, sync pushes,
erasure. Filled from a count here, once.

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

_POSTGRESQL = (
    """
    CREATE FUNCTION memories_stored_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') AND OLD.deleted_at IS NULL THEN
            UPDATE users SET memories_stored = memories_stored - 1 WHERE id = OLD.user_id;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.deleted_at IS NULL THEN
            UPDATE users SET memories_stored = memories_stored + 1 WHERE id = NEW.user_id;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER memories_stored_insert_delete AFTER INSERT OR DELETE ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_stored_count()
    """,
    """
    CREATE TRIGGER memories_stored_update AFTER UPDATE OF deleted_at, user_id ON memories
    FOR EACH ROW WHEN ((OLD.deleted_at IS NULL) IS DISTINCT FROM (NEW.deleted_at IS NULL)
                       OR OLD.user_id IS DISTINCT FROM NEW.user_id)
    EXECUTE FUNCTION memories_stored_count()
    """,
)


def upgrade() -> None:
    with op.batch_alter_table("users") as batch_op:
        batch_op.add_column(sa.Column("memories_stored", sa.Integer(), nullable=False, server_default="0"))
    # Lock the table first on PostgreSQL: no memory may be written between the count and the triggers' start.
    if op.get_bind().dialect.name == "postgresql":
        op.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
    op.execute(
        "UPDATE users SET memories_stored = (SELECT count(*) FROM memories"
        " WHERE memories.user_id = users.id AND memories.deleted_at IS NULL)"
    )
    for statement in _POSTGRESQL if op.get_bind().dialect.name == "postgresql" else _SQLITE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER memories_stored_update ON memories")
        op.execute("DROP TRIGGER memories_stored_insert_delete ON memories")
        op.execute("DROP FUNCTION memories_stored_count()")
    else:
        for name in ("memories_stored_insert", "memories_stored_delete", "memories_stored_update"):
            op.execute(f"DROP TRIGGER {name}")
    with op.batch_alter_table("users") as batch_op:
        batch_op.drop_column("memories_stored")
