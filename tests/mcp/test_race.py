"""Fifty agents on two server instances sharing one Redis claim overlapping files at random through MCP tool calls."""

from __future__ import annotations

import itertools
import random
import time
from collections import defaultdict
from dataclasses import dataclass

import anyio
import pytest

from tests.harness import RunningServer, make_account
from tests.mcp.conftest import connect, session_id
from tests.mcp.test_sessions import call

AGENTS = 50
ROUNDS = 8
FILES = [f"src/module_{i}.py" for i in range(12)]


@dataclass
class Grant:
    agent: str
    token: int
    granted_at: float
    released_at: float = float("inf")


@pytest.mark.anyio
@pytest.mark.redis
async def test_fifty_agents_on_two_instances_never_share_a_file(
    redis_api_pair: tuple[RunningServer, RunningServer],
) -> None:
    servers = redis_api_pair
    me = make_account(servers[0])
    grants: dict[str, list[Grant]] = defaultdict(list)
    holders: dict[str, str] = {}
    overlaps: list[str] = []
    refused = 0

    async def agent(n: int) -> None:
        nonlocal refused
        name, rng = f"agent{n}", random.Random(n)
        async with connect(servers[n % 2], me.key, session_id(me.user_id, "race", name)) as client:
            for _ in range(ROUNDS):
                wanted = rng.sample(FILES, rng.randint(1, 3))
                result = await call(client, "session_claim_files", file_paths=wanted, duration_minutes=5)
                granted_at = time.perf_counter()
                if not result["granted"]:
                    refused += 1
                    assert result["claims"] == [] and {c["file_path"] for c in result["conflicts"]} <= set(wanted)
                    continue
                mine = []
                for claim in result["claims"]:
                    path = claim["file_path"]
                    if path in holders:
                        overlaps.append(f"{path}: {holders[path]} and {name}")
                    holders[path] = name
                    mine.append(Grant(name, claim["fencing_token"], granted_at))
                    grants[path].append(mine[-1])
                await anyio.sleep(rng.random() / 100)
                released_at = time.perf_counter()
                for path, grant in zip(wanted, mine, strict=True):
                    grant.released_at = released_at
                    del holders[path]
                released = await call(client, "session_release_files", file_paths=wanted)
                assert sorted(released["released"]) == sorted(wanted)

    with anyio.fail_after(180):
        async with anyio.create_task_group() as tasks:
            for n in range(AGENTS):
                tasks.start_soon(agent, n)

    assert overlaps == []
    total = sum(len(g) for g in grants.values())
    assert total > 0 and refused > 0, "the race should both grant and refuse claims"
    for path, history in grants.items():
        by_token = sorted(history, key=lambda g: g.token)
        assert len({g.token for g in history}) == len(history), f"{path}: a fencing token was granted twice"
        for earlier, later in itertools.pairwise(by_token):
            # A larger token is granted only after the holder of the smaller one let go.
            assert earlier.released_at < later.granted_at, f"{path}: token {later.token} overlapped {earlier.token}"
    print(f"\nrace: {total} file grants, {refused} refused claims over {AGENTS} agents on 2 instances")
