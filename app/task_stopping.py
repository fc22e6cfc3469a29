"""Ending a background task for sure, whatever its code does with a cancellation."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)


async def cancel_and_wait(task: asyncio.Task[Any], *, again_after: float = 1.0) -> None:
    """Cancel ``task`` and return once it has ended, cancelling it again every ``again_after`` seconds meanwhile.

    redis-py can swallow a cancellation that lands inside a command: with redis 8.1 here, about one ping in six that
    was cancelled at a random moment returned normally instead (redis/redis-py#2028 is that family). A loop of Redis
    calls then runs on, and whoever awaited its end after one ``cancel()`` waited forever: a server's shutdown, or a
    test. The next cancellation lands at the loop's next wait. The wait between two is long enough for a task's own
    clean-up (a rollback) to finish undisturbed. The task's outcome is consumed here; an error is logged."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=again_after)
    if not task.cancelled() and (error := task.exception()) is not None:
        log.warning("background task %s ended with an error", task.get_name(), exc_info=error)
