"""The task graph's pure rules: what a batch may be, and how deep each task sits."""

from __future__ import annotations

import pytest

from app.errors import ValidationFailed
from app.teams.graph import check_batch, depths, find_cycle


def refusal(new: list[tuple[str, list[str]]], existing: set[str] | None = None) -> str:
    with pytest.raises(ValidationFailed) as refused:
        check_batch(new, existing or set())
    return refused.value.message


def test_a_task_may_depend_on_others_of_its_batch_and_on_existing_tasks() -> None:
    check_batch([("b", ["a", "old"]), ("a", []), ("c", ["a", "b"])], {"old"})


def test_every_problem_is_named() -> None:
    message = refusal([("a", []), ("a", ["x"]), ("b", ["b"]), ("old", [])], {"old"})
    assert message.startswith("no task was created: ")
    assert "task id 'a' appears twice in this call" in message
    assert "task 'a' depends on 'x', which does not exist" in message
    assert "task 'b' depends on itself" in message
    assert "task 'old' already exists in this session" in message


def test_a_cycle_is_refused_with_its_path() -> None:
    message = refusal([("a", ["c"]), ("b", ["a"]), ("c", ["b"]), ("d", [])])
    assert "the dependencies form a cycle: " in message
    path = message.split("cycle: ")[1].split(" -> ")
    assert path[0] == path[-1] and set(path) == {"a", "b", "c"}


def test_find_cycle_ignores_existing_tasks_and_acyclic_graphs() -> None:
    assert find_cycle({"a": ["old"], "b": ["a", "old"]}) is None
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    # Deep chains do not recurse.
    chain = {f"t{i}": [f"t{i + 1}"] for i in range(5000)}
    chain["t5000"] = []
    assert find_cycle(chain) is None
    chain["t5000"] = ["t0"]
    cycle = find_cycle(chain)
    assert cycle is not None and len(cycle) == 5002


def test_depths_are_one_more_than_the_deepest_dependency() -> None:
    assert depths({"a": [], "b": ["a"], "c": ["a", "b"], "d": ["old"]}) == {"a": 0, "b": 1, "c": 2, "d": 0}
    long = {f"t{i}": ([f"t{i - 1}"] if i else []) for i in range(3000)}
    assert depths(long)["t2999"] == 2999
