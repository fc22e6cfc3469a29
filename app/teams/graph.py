"""The task graph's rules, pure: what a batch of new tasks may be, and how deep each task sits in the graph."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from app.errors import Conflict, ValidationFailed

MAX_PROBLEMS = 10


def check_batch(new: Sequence[tuple[str, Sequence[str]]], existing: Collection[str]) -> None:
    """Refuse a batch of ``(id, deps)`` naming everything wrong: duplicate or existing ids, self-dependencies,
    dependencies that exist neither in the batch nor in the session, and cycles.

    Existing tasks cannot depend on new ones, so a cycle can only run through the batch itself."""
    problems: list[str] = []
    # What the session already holds (or lacks) makes these wrong, not the call itself: a conflict (409), unless the
    # call is wrong in itself as well (422).
    with_the_session: list[str] = []
    seen: set[str] = set()
    for task_id, _ in new:
        if task_id in seen:
            problems.append(f"task id {task_id!r} appears twice in this call")
        elif task_id in existing:
            with_the_session.append(f"task {task_id!r} already exists in this session")
        seen.add(task_id)
    for task_id, deps in new:
        for dep in deps:
            if dep == task_id:
                problems.append(f"task {task_id!r} depends on itself")
            elif dep not in seen and dep not in existing:
                with_the_session.append(f"task {task_id!r} depends on {dep!r}, which does not exist")
    if not problems and not with_the_session:
        cycle = find_cycle({task_id: list(deps) for task_id, deps in new})
        if cycle:
            problems.append("the dependencies form a cycle: " + " -> ".join(cycle))
    every = problems + with_the_session
    if every:
        shown = every[:MAX_PROBLEMS]
        more = f" (and {len(every) - MAX_PROBLEMS} more)" if len(every) > MAX_PROBLEMS else ""
        message = "no task was created: " + "; ".join(shown) + more
        if problems:
            raise ValidationFailed(message, field="tasks")
        raise Conflict(message, field="tasks")


def find_cycle(deps: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle among ``deps`` (task -> its dependencies) as ``[a, b, ..., a]``, or None. Iterative DFS."""
    white, grey, black = 0, 1, 2
    colour = dict.fromkeys(deps, white)
    for start in deps:
        if colour[start] != white:
            continue
        path: list[str] = [start]
        stack = [iter(deps[start])]
        colour[start] = grey
        while stack:
            step = next(stack[-1], None)
            if step is None:
                colour[path.pop()] = black
                stack.pop()
                continue
            if step not in colour:
                continue  # an existing task: it cannot lead back into the batch
            if colour[step] == grey:
                return [*path[path.index(step) :], step]
            if colour[step] == white:
                colour[step] = grey
                path.append(step)
                stack.append(iter(deps[step]))
    return None


def depths(deps: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Each task's depth: 0 without dependencies, else one more than its deepest dependency (the graph is acyclic)."""
    result: dict[str, int] = {}
    for start in deps:
        stack = [start]
        entered: set[str] = set()
        while stack:
            task = stack[-1]
            if task in result:
                stack.pop()
                continue
            # ``entered`` stops a cycle (which creation refuses) from looping: its back edge is ignored.
            pending = [d for d in deps.get(task, ()) if d in deps and d not in result and d not in entered]
            entered.add(task)
            if pending:
                stack.extend(pending)
                continue
            result[task] = 1 + max((result[d] for d in deps.get(task, ()) if d in result), default=-1)
            stack.pop()
    return result
