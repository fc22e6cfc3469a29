"""A server told to stop (SIGTERM, Ctrl-C) answers its long polls at once, so that none is cut off.

On the signal uvicorn stops taking connections and waits ``timeout_graceful_shutdown`` (5 s) for the requests in
progress, then cancels them, logging an error with a traceback and sending a 500 for each. The application hears of
the shutdown only after that (the lifespan's end), too late for a pull that long-polls up to a minute. So the signal
is heard here first: the callback runs on the event loop, then the handler that was there (uvicorn's) runs as before.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def on_stop_signal(callback: Callable[[], None]) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM call ``callback`` on the running loop before their previous handler. Only
    in the main thread, where signals arrive (servers run on other threads in tests stop without them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    previous: dict[signal.Signals, Any] = {}

    def heard(signum: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(callback)
        prior = previous[signal.Signals(signum)]
        if callable(prior):
            prior(signum, frame)
        elif prior == signal.SIG_DFL:  # no server of ours behind: do what the signal would have done
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    for sig in STOP_SIGNALS:
        previous[sig] = signal.signal(sig, heard)
    try:
        yield
    finally:
        for sig, prior in previous.items():
            signal.signal(sig, prior)
