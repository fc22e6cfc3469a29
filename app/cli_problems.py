"""What ``engram`` says, in one line, when it cannot start: bad settings, or a database it cannot find or open.

Each line names the place it tried and how to choose another; no traceback."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.settings import Settings


def database_place(settings: Settings) -> str:
    """The database, as a person would name it: where it is, and what chose that place."""
    if settings.database_url:
        from sqlalchemy.engine import make_url

        return f"the database at {make_url(settings.database_url).render_as_string(hide_password=True)}"
    return f"the database in {settings.data_dir} (the data directory, from {settings.data_dir_origin()})"


def choose_another(settings: Settings) -> str:
    if settings.database_url:
        return "set ENGRAM_DATABASE_URL (or database_url in engram.toml) to another"
    return "choose another data directory with ENGRAM_DATA_DIR=DIR or data_dir in engram.toml"


def missing_database(settings: Settings) -> str | None:
    """An embedded database that is missing or cannot be opened, said before the async driver tries: its worker
    thread, failing after the event loop has closed, would print tracebacks of its own."""
    if settings.database_url:
        return None
    path = settings.data_dir / "engram.db"
    if not path.exists():
        return f"no database in {settings.data_dir} (the data directory, from {settings.data_dir_origin()}): " + (
            f"run `engram migrate` to make one there, or {choose_another(settings)}"
        )
    import sqlite3

    try:
        sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True).close()
    except sqlite3.Error as exc:
        return f"cannot use {database_place(settings)}: {exc}; {choose_another(settings)}"
    return None


def database_problem(exc: BaseException, settings: Settings) -> str | None:
    """One line for a database the command could not open or use; None for any other failure."""
    import socket

    sqlalchemy_exc = sys.modules.get("sqlalchemy.exc")
    from_driver = sqlalchemy_exc is not None and isinstance(exc, sqlalchemy_exc.DBAPIError)
    unreachable = settings.database_url is not None and isinstance(exc, ConnectionError | socket.gaierror)
    if not (from_driver or unreachable):
        return None
    reason = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or ["unknown error"])[0]
    place = database_place(settings)
    if "no such table" in reason or ("relation" in reason and "does not exist" in reason):
        return f"{place} has no tables yet: run `engram migrate` first, or {choose_another(settings)}"
    return f"cannot use {place}: {reason}; {choose_another(settings)}"
