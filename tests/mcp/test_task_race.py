"""Twenty agents on two server instances (one PostgreSQL, one Redis) race through MCP for the tasks of one graph."""

from __future__ import annotations

import random
import time
from collections import defaultdict

import anyio
import pytest

from tests.harness import RunningServer, make_account
from tests.mcp.conftest import connect, session_id
from tests.mcp.test_sessions import call
from tests.mcp.test_tools import error_text

AGENTS = 20
LAYERS, WIDTH = 3, 8  # 24 tasks; each task of a layer depends on two of the layer before


def graph() -> list[dict[str, object]]:
    rng = random.Random(11)
    tasks: list[dict[str, object]] = []
    for layer in range(LAYERS):
        for i in range(WIDTH):
            deps = [f"L{layer - 1}-{j}" for j in rng.sample(range(WIDTH), 2)] if layer else []
            tasks.append({"id": f"L{layer}-{i}", "description": f"layer {layer} task {i}", "deps": deps})
    return tasks


@pytest.mark.anyio
@pytest.mark.redis
@pytest.mark.slow
async def test_every_task_has_one_assignee_and_waits_for_its_dependencies(
    redis_api_pair: tuple[RunningServer, RunningServer],
) -> None:
    servers = redis_api_pair
    me = make_account(servers[0])
    tasks = graph()
    deps = {str(t["id"]): list(t["deps"]) for t in tasks}  # type: ignore[call-overload]
    wins: dict[str, list[str]] = defaultdict(list)
    claimed_at: dict[str, float] = {}
    complete_sent: dict[str, float] = {}
    refused_blocked = refused_taken = 0

    async with connect(servers[0], me.key, session_id(me.user_id, "race", "lead")) as lead:
        assert len((await call(lead, "session_task_create", tasks=tasks))["tasks"]) == len(tasks)

        async def agent(n: int) -> None:
            nonlocal refused_blocked, refused_taken
            name, rng = f"agent{n}", random.Random(n)
            async with connect(servers[n % 2], me.key, session_id(me.user_id, "race", name)) as client:
                while True:
                    listed = (await call(client, "session_task_list"))["tasks"]
                    # Everyone goes for every task not taken yet, blocked ones included: those must all be refused.
                    open_ = [t["id"] for t in listed if t["status"] in ("available", "blocked")]
                    if not open_:
                        return
                    rng.shuffle(open_)
                    for task_id in open_[:4]:
                        result = await client.call_tool("session_task_claim", {"task_id": task_id})
                        if result.is_error:
                            message = error_text(result)
                            assert "conflict" in message, message
                            if "is blocked" in message:
                                refused_blocked += 1
                            else:
                                refused_taken += 1
                            continue
                        assert result.structured_content is not None
                        assert result.structured_content["assignee"] == name
                        wins[task_id].append(name)
                        claimed_at[task_id] = complete_sent[task_id] = time.perf_counter()
                        await call(client, "session_task_complete", task_id=task_id, result="ok")
                        break

        with anyio.fail_after(240):
            async with anyio.create_task_group() as group:
                for n in range(AGENTS):
                    group.start_soon(agent, n)

        final = {t["id"]: t for t in (await call(lead, "session_task_list"))["tasks"]}

    assert {task_id: len(names) for task_id, names in wins.items()} == dict.fromkeys(deps, 1)
    assert all(final[t]["status"] == "completed" and final[t]["assignee"] == wins[t][0] for t in deps)
    # No claim was granted before the completion of one of its dependencies had even been asked for.
    for task_id in wins:
        assert all(complete_sent.get(dep, float("inf")) < claimed_at[task_id] for dep in deps[task_id]), task_id
    assert refused_blocked > 0 and refused_taken > 0  # both refusals were exercised by the race
    assert len({w[0] for w in wins.values()}) > 1  # the work was spread over agents on both instances
