"""A Redis that hangs (connections open, nothing answered, as under SIGSTOP), seen by the coordination backend.

    .venv/bin/python bench/redis_hang.py [--redis-url URL] [--rounds 5]

The tests only check that each of these ends (their limits catch hangs); the speeds are measured here. Per round,
through a TCP proxy that stops forwarding:
- the first call after the hang: bounded by the command timeout, retries included (target <= 2 s + 10%);
- later calls while the breaker is open: answered without asking Redis (target p99 <= 50 ms);
- the time from Redis answering again until a call succeeds, with no call having to find out first: the open
  breaker probes every 0.25 s, and a probe in flight when Redis returns may wait out its 2 s (target <= 2.5 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.coordination import CoordinationUnavailable, RedisCoordination, SessionKey
from tests.coordination.test_redis_outage import Proxy


async def one_round(redis_url: str) -> tuple[float, list[float], float]:
    parsed = urlparse(redis_url)
    proxy = Proxy(parsed.hostname or "127.0.0.1", parsed.port or 6379)
    await proxy.start()
    prefix = f"bench:hang:{uuid.uuid4().hex}:"
    coord = RedisCoordination(f"redis://127.0.0.1:{proxy.port}{parsed.path or '/0'}", prefix=prefix)
    key = SessionKey("u-bench", "hang")
    try:
        await coord.claim(key, "alice", ["a.py"])
        proxy.hang()
        started = time.perf_counter()
        with contextlib.suppress(CoordinationUnavailable):
            await coord.claims(key)
        first = time.perf_counter() - started
        open_calls: list[float] = []
        for _ in range(20):
            started = time.perf_counter()
            with contextlib.suppress(CoordinationUnavailable):
                await coord.claims(key)
            open_calls.append(time.perf_counter() - started)
        proxy.resume()
        resumed = time.perf_counter()
        while True:
            try:
                await coord.claims(key)
                break
            except CoordinationUnavailable:
                await asyncio.sleep(0.01)
        return first, open_calls, time.perf_counter() - resumed
    finally:
        await coord.close()
        await proxy.stop()
        await asyncio.sleep(0.1)  # the proxy's connections wind down


async def main(args: argparse.Namespace) -> None:
    firsts: list[float] = []
    opened: list[float] = []
    back: list[float] = []
    for _ in range(args.rounds):
        first, open_calls, recovered = await one_round(args.redis_url)
        firsts.append(first)
        opened += open_calls
        back.append(recovered)
    print(f"first call under a hang      max {max(firsts):6.2f} s   (target <= 2.2 s: the command timeout)")
    p99 = statistics.quantiles(opened, n=100)[98] * 1000
    print(f"calls with the breaker open  p99 {p99:6.1f} ms  (target <= 50 ms: Redis is not asked)")
    print(f"recovered after Redis answers max {max(back):5.2f} s   (target <= 2.5 s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
