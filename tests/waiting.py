"""Waiting for something that happens in another thread or process: poll a check until it holds, never a fixed
sleep (a fixed sleep is either too short on a busy machine or wasted time on an idle one)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(check: Callable[[], object], bound_s: float = 20.0, every_s: float = 0.02) -> bool:
    """True as soon as `check()` is truthy; False if it is still falsy after `bound_s` seconds."""
    deadline = time.monotonic() + bound_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(every_s)
    return True
