"""The largest integers the database's columns hold. A client's number is checked against these where it comes in
(schemas, parameters, wire formats), so a number too big for its column is a 4xx naming the field, never the
driver's overflow (SQLite's OverflowError, asyncpg's DataError): a 500, or a 422 that cannot say which field."""

from __future__ import annotations

# PostgreSQL's ``integer``: memory_events.id and session_messages.id (and reply_to) are 32-bit there.
MAX_INT32 = 2**31 - 1
# ``bigint``, and every SQLite integer: the change log's seq, an hlc, JSON numbers compared in SQL.
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
