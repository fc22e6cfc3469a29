"""Every SQL query about a session's task graph. Each takes the tenant (user id) and the session first."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, Table, and_, bindparam, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.teams.models import SessionTask, TaskDependency

OPEN, IN_PROGRESS, COMPLETED = "open", "in_progress", "completed"
# Tasks are read as plain rows (the task table's columns, named like SessionTask's attributes): listing a graph of a
# few hundred tasks then costs no ORM bookkeeping.
TaskRow = Row[Any]
_TASK_COLUMNS = tuple(SessionTask.__table__.c)


def _task(user_id: str, session: str, task_id: str) -> Any:
    return and_(SessionTask.user_id == user_id, SessionTask.session == session, SessionTask.task_id == task_id)


async def task_ids(db: AsyncSession, user_id: str, session: str) -> set[str]:
    query = select(SessionTask.task_id).where(SessionTask.user_id == user_id, SessionTask.session == session)
    return set((await db.execute(query)).scalars())


async def next_position(db: AsyncSession, user_id: str, session: str) -> int:
    query = select(func.coalesce(func.max(SessionTask.position), -1) + 1).where(
        SessionTask.user_id == user_id, SessionTask.session == session
    )
    return int((await db.execute(query)).scalar_one())


async def add_tasks(db: AsyncSession, tasks: Sequence[SessionTask], deps: Sequence[TaskDependency]) -> None:
    db.add_all(tasks)
    await db.flush()
    db.add_all(deps)
    await db.flush()


async def get_task(db: AsyncSession, user_id: str, session: str, task_id: str) -> TaskRow | None:
    return (await db.execute(select(*_TASK_COLUMNS).where(_task(user_id, session, task_id)))).first()


async def tasks_of(db: AsyncSession, user_id: str, session: str) -> Sequence[TaskRow]:
    query = (
        select(*_TASK_COLUMNS)
        .where(SessionTask.user_id == user_id, SessionTask.session == session)
        .order_by(SessionTask.position)
    )
    return (await db.execute(query)).all()


async def deps_of(db: AsyncSession, user_id: str, session: str) -> dict[str, list[str]]:
    """Every task of the session with its dependencies (tasks without any are absent)."""
    query = (
        select(TaskDependency.task_id, TaskDependency.depends_on)
        .where(TaskDependency.user_id == user_id, TaskDependency.session == session)
        .order_by(TaskDependency.task_id, TaskDependency.depends_on)
    )
    result: dict[str, list[str]] = {}
    for task_id, dep in (await db.execute(query)).all():
        result.setdefault(task_id, []).append(dep)
    return result


async def deps_with_status(
    db: AsyncSession, user_id: str, session: str, task_id: str
) -> list[tuple[str, str, str | None]]:
    """``(dependency, its stored status, its assignee)`` for each dependency of one task."""
    query = (
        select(TaskDependency.depends_on, SessionTask.status, SessionTask.assignee)
        .join(
            SessionTask,
            and_(
                SessionTask.user_id == TaskDependency.user_id,
                SessionTask.session == TaskDependency.session,
                SessionTask.task_id == TaskDependency.depends_on,
            ),
        )
        .where(TaskDependency.user_id == user_id, TaskDependency.session == session, TaskDependency.task_id == task_id)
        .order_by(TaskDependency.depends_on)
    )
    return [(dep, status, assignee) for dep, status, assignee in (await db.execute(query)).all()]


def _unfinished_dependency(user_id: Any, session: Any) -> Any:
    """True for a task row (SessionTask) with a dependency that is not completed (the tenant and session as values
    or as bound parameters)."""
    dep_task = SessionTask.__table__.alias("dep_task")
    return (
        exists()
        .where(
            TaskDependency.user_id == user_id,
            TaskDependency.session == session,
            TaskDependency.task_id == SessionTask.task_id,
            dep_task.c.user_id == TaskDependency.user_id,
            dep_task.c.session == TaskDependency.session,
            dep_task.c.task_id == TaskDependency.depends_on,
            dep_task.c.status != COMPLETED,
        )
        .correlate(SessionTask)
    )


def _deps_csv_of(dialect: str) -> Any:
    """The task's dependencies as one comma-separated value (task ids never hold a comma), so that the UPDATE that
    changes a task returns them too: a claim is then one statement and its commit."""
    column = TaskDependency.depends_on
    joined = func.string_agg(column, ",") if dialect == "postgresql" else func.group_concat(column, ",")
    found = select(joined).where(
        TaskDependency.user_id == bindparam("p_user_id"),
        TaskDependency.session == bindparam("p_session"),
        TaskDependency.task_id == bindparam("p_task_id"),
    )
    return found.scalar_subquery().label("deps_csv")


# The three statements that change one task are built once per dialect, with bound parameters: building the
# expression (the dependency subqueries, the ORM's DML bookkeeping) cost more than running it on every claim.
_TABLE: Table = SessionTask.__table__  # type: ignore[assignment]
_THIS_TASK = and_(
    _TABLE.c.user_id == bindparam("p_user_id"),
    _TABLE.c.session == bindparam("p_session"),
    _TABLE.c.task_id == bindparam("p_task_id"),
)


def _changing(dialect: str, where: Any, values: dict[str, Any]) -> Any:
    return update(_TABLE).where(_THIS_TASK, where).values(**values).returning(*_TASK_COLUMNS, _deps_csv_of(dialect))


@functools.cache
def _claim_statement(dialect: str) -> Any:
    unfinished = _unfinished_dependency(bindparam("p_user_id"), bindparam("p_session"))
    values = {"status": IN_PROGRESS, "assignee": bindparam("p_agent"), "claimed_at": bindparam("p_now")}
    return _changing(dialect, and_(_TABLE.c.status == OPEN, ~unfinished), values)


@functools.cache
def _complete_statement(dialect: str) -> Any:
    values = {
        "status": COMPLETED,
        "result": bindparam("p_result"),
        "files_modified": bindparam("p_files_modified"),
        "completed_at": bindparam("p_now"),
    }
    return _changing(dialect, and_(_TABLE.c.status == IN_PROGRESS, _TABLE.c.assignee == bindparam("p_agent")), values)


@functools.cache
def _release_statement(dialect: str) -> Any:
    values = {"status": OPEN, "assignee": None, "claimed_at": None}
    return _changing(dialect, and_(_TABLE.c.status == IN_PROGRESS, _TABLE.c.assignee == bindparam("p_agent")), values)


def deps_in(row: TaskRow) -> list[str]:
    """The dependencies a changed task's row carries (see ``_deps_csv_of``), sorted."""
    return sorted(row.deps_csv.split(",")) if row.deps_csv else []


def claim(conn: Connection, user_id: str, session: str, task_id: str, agent: str, now: datetime) -> TaskRow | None:
    """Assign an available task to ``agent`` in one conditional UPDATE: the database picks exactly one winner
    among concurrent claims (on any number of instances), and a task whose dependencies are not all completed
    is never taken. Returns the claimed task (with ``deps_csv``), or None."""
    params = {"p_user_id": user_id, "p_session": session, "p_task_id": task_id, "p_agent": agent, "p_now": now}
    return conn.execute(_claim_statement(conn.dialect.name), params).first()


def complete(
    conn: Connection,
    user_id: str,
    session: str,
    task_id: str,
    agent: str,
    *,
    result: str,
    files_modified: list[str],
    now: datetime,
) -> TaskRow | None:
    """Complete a task ``agent`` is working on; returns it (with ``deps_csv``), or None."""
    params = {
        "p_user_id": user_id,
        "p_session": session,
        "p_task_id": task_id,
        "p_agent": agent,
        "p_result": result,
        "p_files_modified": files_modified,
        "p_now": now,
    }
    return conn.execute(_complete_statement(conn.dialect.name), params).first()


def release(conn: Connection, user_id: str, session: str, task_id: str, agent: str) -> TaskRow | None:
    """Give back a task ``agent`` is working on; returns it (with ``deps_csv``), or None."""
    params = {"p_user_id": user_id, "p_session": session, "p_task_id": task_id, "p_agent": agent}
    return conn.execute(_release_statement(conn.dialect.name), params).first()


async def release_all(db: AsyncSession, user_id: str, session: str, agent: str) -> list[str]:
    """Give back every task ``agent`` is working on; returns their ids."""
    held = await in_progress(db, user_id, session, agent=agent)
    ids = [task_id for _, task_id in held]
    if ids:
        await db.execute(
            update(SessionTask)
            .where(
                SessionTask.user_id == user_id,
                SessionTask.session == session,
                SessionTask.task_id.in_(ids),
                SessionTask.status == IN_PROGRESS,
                SessionTask.assignee == agent,
            )
            .values(status=OPEN, assignee=None, claimed_at=None)
        )
    return ids


async def in_progress(
    db: AsyncSession, user_id: str, session: str, *, agent: str | None = None
) -> list[tuple[str, str]]:
    """``(assignee, task id)`` of the tasks in progress, earliest claimed first."""
    query = select(SessionTask.assignee, SessionTask.task_id).where(
        SessionTask.user_id == user_id, SessionTask.session == session, SessionTask.status == IN_PROGRESS
    )
    if agent is not None:
        query = query.where(SessionTask.assignee == agent)
    query = query.order_by(SessionTask.claimed_at, SessionTask.position)
    return [(str(assignee), task_id) for assignee, task_id in (await db.execute(query)).all()]


def now_available(conn: Connection, user_id: str, session: str, completed: str) -> list[str]:
    """The open dependents of ``completed`` whose dependencies are all completed now."""
    params = {"p_user_id": user_id, "p_session": session, "p_completed": completed}
    return list(conn.execute(_NOW_AVAILABLE, params).scalars())


_NOW_AVAILABLE = (
    select(SessionTask.task_id)
    .where(
        SessionTask.user_id == bindparam("p_user_id"),
        SessionTask.session == bindparam("p_session"),
        SessionTask.task_id.in_(
            select(TaskDependency.task_id).where(
                TaskDependency.user_id == bindparam("p_user_id"),
                TaskDependency.session == bindparam("p_session"),
                TaskDependency.depends_on == bindparam("p_completed"),
            )
        ),
        SessionTask.status == OPEN,
        ~_unfinished_dependency(bindparam("p_user_id"), bindparam("p_session")),
    )
    .order_by(SessionTask.position)
)
