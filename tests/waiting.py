"""Waiting for something that happens in another thread or process: poll a check until it holds, never a fixed
sleep (a fixed sleep is either too short on a busy machine or wasted time on an idle one).

The one helper of the suite (and its twin for coroutines). The bound is a hang guard, not a timing claim: it is
generous (30 s by default) because `make test` runs on machines doing other work, and a check that holds returns
at once, so a generous bound costs nothing when things work. Assert on the result (`assert wait_until(...), why`);
never assert on how long it took.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

BOUND_S = 30.0
# A Python process the test starts that sets Django up (seconds of imports, a minute and more on a machine under load):
# a hang guard, below pytest's own 120 s timeout so the process's output is what the failure shows.
PROCESS_BOUND_S = 100.0


def wait_until(check: Callable[[], object], bound_s: float = BOUND_S, every_s: float = 0.02) -> bool:
    """True as soon as `check()` is truthy; False if it is still falsy after `bound_s` seconds."""
    deadline = time.monotonic() + bound_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(every_s)
    return True


async def wait_until_async(check: Callable[[], object], bound_s: float = BOUND_S, every_s: float = 0.05) -> bool:
    """`wait_until` inside a coroutine: the event loop keeps running (and delivering what is awaited) meanwhile."""
    deadline = time.monotonic() + bound_s
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(every_s)
    return True
