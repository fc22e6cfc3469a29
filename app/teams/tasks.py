"""A session's task graph: created all or nothing, claimed by exactly one agent, completed by its assignee.

The database arbitrates: a claim is one conditional UPDATE (open, and no dependency unfinished), so among any number
of agents on any number of instances exactly one wins, and a task is never taken before its dependencies are
completed. Coordination only carries the live events that tell the session's agents at once.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.principal import Principal
from app.coordination import Coordination
from app.coordination.rules import normalise_paths
from app.db import Database, utcnow
from app.errors import Conflict, NotFound, ValidationFailed
from app.identity import Identity
from app.teams import task_repository as repository
from app.teams.events import task_event
from app.teams.graph import check_batch
from app.teams.models import SessionTask, TaskDependency
from app.teams.schemas import (
    MAX_TASKS_PER_SESSION,
    TASK_STATUSES,
    CompleteIn,
    TaskCompleted,
    TaskIn,
    TaskList,
    TaskOut,
)
from app.teams.service import TeamService, agent_key
from app.teams.task_repository import COMPLETED, IN_PROGRESS, TaskRow
from app.text import check_text

_CLAIM_ATTEMPTS = 2


def task_out(task: TaskRow, deps: Sequence[str], status_of: Mapping[str, str]) -> TaskOut:
    """A task as callers see it: stored open becomes blocked (with what it waits for) or available."""
    blocked_by: list[str] = []
    if task.status == COMPLETED:
        status = "completed"
    elif task.status == IN_PROGRESS:
        status = "in_progress"
    else:
        blocked_by = [d for d in deps if status_of.get(d) != COMPLETED]
        status = "blocked" if blocked_by else "available"
    return TaskOut(
        id=task.task_id,
        description=task.description,
        deps=list(deps),
        files=list(task.files or []),
        status=status,
        blocked_by=blocked_by,
        assignee=task.assignee,
        result=task.result,
        files_modified=list(task.files_modified or []),
        created_by=task.created_by,
        created_at=task.created_at,
        claimed_at=task.claimed_at,
        completed_at=task.completed_at,
    )


class TaskService:
    """Create, claim, complete, release and list the tasks of a session."""

    def __init__(self, db: Database, coordination: Coordination, team: TeamService) -> None:
        self.db = db
        self.coordination = coordination
        self.team = team

    async def create(self, principal: Principal, identity: Identity, tasks: Sequence[TaskIn]) -> TaskList:
        """Create every task or none: a duplicate id, a missing dependency or a cycle is refused, named."""
        principal.require_write()
        key, agent = agent_key(identity)
        if not tasks:
            raise ValidationFailed("no tasks given", field="tasks")
        for task in tasks:
            check_text(task.description, "description")
        files = [normalise_paths(task.files, allow_empty=True) for task in tasks]
        await self.team.seen(identity)
        now = utcnow()
        try:
            async with self.db.session() as db:
                existing = await repository.task_ids(db, key.user_id, key.session)
                if len(existing) + len(tasks) > MAX_TASKS_PER_SESSION:
                    raise ValidationFailed(
                        f"a session holds at most {MAX_TASKS_PER_SESSION} tasks; it has {len(existing)}", field="tasks"
                    )
                check_batch([(t.id, t.deps) for t in tasks], existing)
                first = await repository.next_position(db, key.user_id, key.session)
                rows = [
                    SessionTask(
                        user_id=key.user_id,
                        session=key.session,
                        task_id=task.id,
                        position=first + n,
                        description=task.description,
                        files=paths,
                        status=repository.OPEN,
                        files_modified=[],
                        created_by=agent,
                        created_at=now,
                    )
                    for n, (task, paths) in enumerate(zip(tasks, files, strict=True))
                ]
                deps = [
                    TaskDependency(user_id=key.user_id, session=key.session, task_id=task.id, depends_on=dep)
                    for task in tasks
                    for dep in dict.fromkeys(task.deps)
                ]
                await repository.add_tasks(db, rows, deps)
                created = await self._outputs(db, key.user_id, key.session, {t.id for t in tasks})
        except IntegrityError as exc:
            # Another call created one of these ids between our check and our insert; ours created nothing.
            raise Conflict("no task was created: another agent created a task with one of these ids just now") from exc
        await self.coordination.publish(key, task_event(agent, "created", [t.id for t in tasks], now))
        return TaskList(tasks=created)

    async def claim(self, principal: Principal, identity: Identity, task_id: str) -> TaskOut:
        """Take an available task; a taken, completed or blocked one is refused with the reason."""
        principal.require_write()
        key, agent = agent_key(identity)
        await self.team.seen(identity)
        now = utcnow()
        for _ in range(_CLAIM_ATTEMPTS):
            claimed = await self.db.transact(
                lambda conn: repository.claim(conn, key.user_id, key.session, task_id, agent, now)
            )
            if claimed is not None:
                out = _changed(claimed)
                break
            # Refused: say why (the UPDATE alone decided; these reads only explain its answer).
            async with self.db.session() as db:
                task = await self._task(db, key.user_id, key.session, task_id)
                if task.status == IN_PROGRESS and task.assignee == agent:
                    return await self._output(db, task)  # a retried claim: already ours
                if task.status == IN_PROGRESS:
                    raise Conflict(f"task {task_id!r} is already taken by {task.assignee}", assignee=task.assignee)
                if task.status == COMPLETED:
                    raise Conflict(f"task {task_id!r} is already completed (by {task.assignee})")
                waiting = [
                    (dep, status, assignee)
                    for dep, status, assignee in await repository.deps_with_status(
                        db, key.user_id, key.session, task_id
                    )
                    if status != COMPLETED
                ]
            if waiting:
                raise Conflict(
                    f"task {task_id!r} is blocked: it waits for " + ", ".join(_waiting(w) for w in waiting),
                    blocked_by=[dep for dep, _, _ in waiting],
                )
            # Its last dependency was completed after our UPDATE looked: try once more.
        else:
            raise Conflict(f"task {task_id!r} could not be claimed; try again")
        await self.coordination.publish(key, task_event(agent, "claimed", [task_id], now, assignee=agent))
        return out

    async def complete(
        self, principal: Principal, identity: Identity, task_id: str, request: CompleteIn
    ) -> TaskCompleted:
        """Complete a task you are working on; the tasks it unblocks become available and everyone is told."""
        principal.require_write()
        key, agent = agent_key(identity)
        check_text(request.result, "result")
        files = normalise_paths(request.files_modified, allow_empty=True)
        await self.team.seen(identity)
        now = utcnow()

        def complete(conn: Connection) -> tuple[TaskRow | None, list[str]]:
            done = repository.complete(
                conn, key.user_id, key.session, task_id, agent, result=request.result, files_modified=files, now=now
            )
            return done, [] if done is None else repository.now_available(conn, key.user_id, key.session, task_id)

        done, unblocked = await self.db.transact(complete)
        if done is None:
            async with self.db.session() as db:
                task = await self._task(db, key.user_id, key.session, task_id)
                if task.status == COMPLETED and task.assignee == agent:
                    return TaskCompleted(task=await self._output(db, task), unblocked=[])  # a retried completion
            raise Conflict(_not_yours(task, "complete"))
        out = _changed(done)
        await self.coordination.publish(
            key, task_event(agent, "completed", [task_id], now, assignee=agent, unblocked=unblocked)
        )
        return TaskCompleted(task=out, unblocked=unblocked)

    async def release(self, principal: Principal, identity: Identity, task_id: str) -> TaskOut:
        """Give back a task you are working on, so that another agent can take it."""
        principal.require_write()
        key, agent = agent_key(identity)
        await self.team.seen(identity)
        now = utcnow()
        released = await self.db.transact(
            lambda conn: repository.release(conn, key.user_id, key.session, task_id, agent)
        )
        if released is None:
            async with self.db.session() as db:
                task = await self._task(db, key.user_id, key.session, task_id)
            raise Conflict(_not_yours(task, "release"))
        out = _changed(released)
        await self.coordination.publish(key, task_event(agent, "released", [task_id], now))
        return out

    async def list(self, principal: Principal, identity: Identity, status: str | None = None) -> TaskList:
        """Every task of the session in creation order, optionally only those with ``status``."""
        if identity.session is None:
            raise ValidationFailed("a session is needed")
        if status is not None and status not in TASK_STATUSES:
            raise ValidationFailed(f"status must be one of {', '.join(TASK_STATUSES)}", field="status")
        async with self.db.session() as db:
            tasks = await self._outputs(db, identity.user_id, identity.session, None)
        return TaskList(tasks=[t for t in tasks if status is None or t.status == status])

    async def graph(self, user_id: str, session: str) -> builtins.list[TaskOut]:
        """Every task of the session (the dashboard's board)."""
        async with self.db.session() as db:
            return await self._outputs(db, user_id, session, None)

    async def _task(self, db: AsyncSession, user_id: str, session: str, task_id: str) -> TaskRow:
        task = await repository.get_task(db, user_id, session, task_id)
        if task is None:
            raise NotFound(f"no task {task_id!r} in this session")
        return task

    async def _output(self, db: AsyncSession, task: TaskRow) -> TaskOut:
        deps = await repository.deps_with_status(db, task.user_id, task.session, task.task_id)
        return task_out(task, [d for d, _, _ in deps], {d: s for d, s, _ in deps})

    async def _outputs(
        self, db: AsyncSession, user_id: str, session: str, only: set[str] | None
    ) -> builtins.list[TaskOut]:
        tasks = await repository.tasks_of(db, user_id, session)
        deps = await repository.deps_of(db, user_id, session)
        status_of = {t.task_id: t.status for t in tasks}
        return [task_out(t, deps.get(t.task_id, []), status_of) for t in tasks if only is None or t.task_id in only]


def _changed(row: TaskRow) -> TaskOut:
    """A task a claim, completion or release just changed: it had been claimed, so its dependencies are all
    completed (completion is final), and the row carries their ids."""
    deps = repository.deps_in(row)
    return task_out(row, deps, dict.fromkeys(deps, COMPLETED))


def _waiting(entry: tuple[str, str, str | None]) -> str:
    dep, status, assignee = entry
    return f"{dep} (in progress by {assignee})" if status == IN_PROGRESS else f"{dep} (not started)"


def _not_yours(task: TaskRow, verb: str) -> str:
    if task.status == COMPLETED:
        return f"task {task.task_id!r} is already completed (by {task.assignee})"
    if task.status == IN_PROGRESS:
        return f"task {task.task_id!r} is assigned to {task.assignee}; only the assignee can {verb} it"
    return f"task {task.task_id!r} is not claimed by anyone; claim it first"
