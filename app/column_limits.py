"""The largest integers the database's columns hold. A client's number is checked against these where it comes in
(schemas, parameters, wire formats), so a number too big for its column is a 4xx naming the field, never the
driver's overflow (SQLite's OverflowError, asyncpg's DataError): a 500, or a 422 that cannot say which field."""

from __future__ import annotations

# ``bigint``, and every SQLite integer: event and message ids, the change log's seq, an hlc, JSON numbers compared in
# SQL.
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
# ``integer`` (32 bits on PostgreSQL): a document's size, chunks and chunking version, a task's position.
MAX_INT32 = 2**31 - 1
