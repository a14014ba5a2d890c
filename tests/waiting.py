"""Waiting for something that happens in another thread or process: poll a check until it holds, never a fixed
sleep (a fixed sleep is either too short on a busy machine or wasted time on an idle one).

The one helper of the suite (and its twin for coroutines). The bound is a hang guard, not a timing claim: it is
generous because `make test` runs on machines doing other work, and a check that holds returns at once, so a
generous bound costs nothing when things work. Assert on the result (`assert wait_until(...), why`); never assert on
how long it took.

Every hang guard of the suite is a base figure times one factor, SLOW_FACTOR (TOOLHUB_TEST_SLOW_FACTOR, default 3):
pytest's per-test timeout (pyproject.toml's `timeout`, scaled in tests/conftest.py), the per-module
`pytest.mark.timeout(scaled(...))`, these bounds, the `timeout=` of the processes and HTTP calls a test makes and
the browser's (`scaled_ms`). The base figures leave room on an idle 2-core machine; the default factor is for one
doing other work (on the base figures alone, 11 tests hit a limit at load 20 on 2 cores). One factor keeps their order: an
inner guard (PROCESS_BOUND_S) stays below the test's own timeout, so a hang fails with the process's output rather
than pytest's stack dump. Raise the factor on a slower machine; it costs nothing when nothing hangs.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

SLOW_FACTOR = float(os.environ.get("TOOLHUB_TEST_SLOW_FACTOR") or 3)
if not SLOW_FACTOR > 0:
    raise ValueError(f"TOOLHUB_TEST_SLOW_FACTOR must be a number above 0, not {SLOW_FACTOR}")


def scaled(seconds: float) -> float:
    """A hang guard's base figure in seconds, times SLOW_FACTOR."""
    return seconds * SLOW_FACTOR


def scaled_ms(seconds: float) -> float:
    """`scaled` in milliseconds (Playwright's timeouts)."""
    return scaled(seconds) * 1000


BOUND_S = scaled(30)
# A Python process the test starts that sets Django up (seconds of imports, a minute and more on a machine under load):
# a hang guard, below pytest's own timeout so the process's output is what the failure shows.
PROCESS_BOUND_S = scaled(100)


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
