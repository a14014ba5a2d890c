"""core.process_state: what a process makes for itself is made again in a forked child, never inherited."""

from __future__ import annotations

import os
import threading
from typing import Any

from core.process_state import PerProcess, on_fork_in_child


def _in_child(check: Any) -> int:
    """Fork, run `check()` in the child (its exit status is the answer), and return that status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            code = 0 if check() else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_value_is_made_once_per_process_and_again_in_a_forked_child() -> None:
    made: list[int] = []

    def make() -> object:
        made.append(os.getpid())
        return object()

    holder = PerProcess(make)
    first = holder.get()
    assert holder.get() is first and made == [os.getpid()]
    # In the child the parent's value is forgotten, so get() makes a new one there.
    assert _in_child(lambda: holder.peek() is None and holder.get() is not first) == 0
    assert holder.get() is first  # the parent keeps its own


def test_fork_callbacks_run_in_the_child_only() -> None:
    class Holder:
        def __init__(self) -> None:
            self.thread: threading.Thread | None = threading.current_thread()
            on_fork_in_child(self.forget)

        def forget(self) -> None:
            self.thread = None

    holder = Holder()
    assert _in_child(lambda: holder.thread is None) == 0
    assert holder.thread is not None


def test_reset_closes_and_forgets(fresh_process_state: Any) -> None:
    closed: list[object] = []
    holder = PerProcess(object, close=closed.append)
    value = holder.get()
    holder.reset()
    assert closed == [value] and holder.peek() is None and holder.get() is not value


def test_the_shared_http_clients_are_per_process(fresh_process_state: Any) -> None:
    from agents_app.runtime.model_client import shared_http_client
    from tools_app.wiring.http import guarded_http_client

    model, guarded = shared_http_client(), guarded_http_client()
    assert shared_http_client() is model and guarded_http_client() is guarded
    assert _in_child(lambda: shared_http_client() is not model and guarded_http_client() is not guarded) == 0


def test_the_mcp_pool_starts_its_own_loop_in_a_forked_child() -> None:
    from core.outbound import OutboundPolicy
    from tools_app.runtime.mcp.pool import SessionPool

    pool = SessionPool(policy=OutboundPolicy.build(""))
    parent_loop = pool._ensure_loop()
    try:
        assert _in_child(lambda: pool._loop is None and pool._ensure_loop() is not parent_loop) == 0
        assert pool._loop is parent_loop
    finally:
        pool.shutdown()
