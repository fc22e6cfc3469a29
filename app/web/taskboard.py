"""The task board's drawing: a layered layout of a session's task graph, drawn as SVG by the session panel.

Columns are depths (a task sits one column right of its deepest dependency); within a column tasks are ordered by
the mean row of their dependencies, which keeps most edges short and uncrossed. No script is needed to draw it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from app.teams.graph import depths
from app.teams.schemas import TaskOut

NODE_WIDTH = 168
NODE_HEIGHT = 46
COLUMN_GAP = 56
ROW_GAP = 14
MARGIN = 8
LABEL_CHARS = 20


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    label: str
    detail: str
    status: str
    title: str
    x: int
    y: int


@dataclass(frozen=True, slots=True)
class Edge:
    path: str
    status: str  # the dependency's: a completed one is drawn solid


@dataclass(frozen=True, slots=True)
class Board:
    width: int
    height: int
    nodes: list[Node]
    edges: list[Edge]
    counts: dict[str, int]
    node_width: int = NODE_WIDTH
    node_height: int = NODE_HEIGHT


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _detail(task: TaskOut) -> str:
    if task.status == "in_progress":
        return f"▶ {task.assignee}"
    if task.status == "completed":
        return f"✓ {task.assignee}"
    if task.status == "blocked":
        return f"waits for {len(task.blocked_by)}"
    return "available"


def layout(tasks: list[TaskOut]) -> Board:
    """Positions for every task and a path for every dependency edge."""
    by_id = {t.id: t for t in tasks}
    depth = depths({t.id: t.deps for t in tasks})
    columns: dict[int, list[str]] = defaultdict(list)
    for task in tasks:  # creation order within a column to start with
        columns[depth[task.id]].append(task.id)
    row: dict[str, float] = {}
    for column in sorted(columns):
        ids = columns[column]
        for n, task_id in enumerate(ids):
            parents = [row[d] for d in by_id[task_id].deps if d in row]
            row[task_id] = sum(parents) / len(parents) if parents else float(n)
        order = {task_id: n for n, task_id in enumerate(ids)}
        ids.sort(key=lambda task_id: (row[task_id], order[task_id]))
        for n, task_id in enumerate(ids):
            row[task_id] = float(n)
    nodes: list[Node] = []
    place: dict[str, tuple[int, int]] = {}
    for column, ids in sorted(columns.items()):
        for n, task_id in enumerate(ids):
            x = MARGIN + column * (NODE_WIDTH + COLUMN_GAP)
            y = MARGIN + n * (NODE_HEIGHT + ROW_GAP)
            place[task_id] = (x, y)
            task = by_id[task_id]
            title = f"{task.id} ({task.status.replace('_', ' ')}): {task.description}"
            nodes.append(Node(task.id, _short(task.id), _short(_detail(task), 24), task.status, title, x, y))
    edges: list[Edge] = []
    for task in tasks:
        x2, y2 = place[task.id]
        for dep in task.deps:
            if dep not in place:
                continue
            x1, y1 = place[dep]
            start, end = (x1 + NODE_WIDTH, y1 + NODE_HEIGHT // 2), (x2, y2 + NODE_HEIGHT // 2)
            bend = (end[0] - start[0]) // 2
            path = (
                f"M{start[0]},{start[1]} C{start[0] + bend},{start[1]} {end[0] - bend},{end[1]} {end[0] - 4},{end[1]}"
            )
            edges.append(Edge(path, by_id[dep].status))
    width = MARGIN * 2 + (max(columns, default=0) + 1) * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP
    height = MARGIN * 2 + max((len(ids) for ids in columns.values()), default=0) * (NODE_HEIGHT + ROW_GAP) - ROW_GAP
    counts = {status: sum(1 for t in tasks if t.status == status) for status in _STATUSES}
    return Board(max(width, 0), max(height, 0), nodes, edges, counts)


_STATUSES = ("available", "in_progress", "blocked", "completed")
