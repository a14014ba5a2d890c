"""A session pool running on a loop it was given (SessionPool.adopt: a runner's serving loop) instead of a loop
thread of its own: async calls awaited in place, sync calls from other threads handed over, a sync call on the loop's
own thread refused rather than waiting for itself, and release() closing every server while the loop still runs."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests.tools_app.runtime.mcp.conftest import Specs, marked_pids, wait_no_marked
from tools_app.runtime.mcp import SessionPool


def _pool_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "toolhub-mcp-pool"]


def test_an_adopted_pool_serves_its_loop_and_other_threads_with_no_thread_of_its_own(make_pool: Any,
                                                                                     specs: Specs) -> None:
    pool: SessionPool = make_pool()
    spec = specs.local()
    before = _pool_threads()

    async def scenario() -> None:
        await pool.adopt()
        assert pool._loop is asyncio.get_running_loop()
        first = await pool.acall(spec, "get_inventory", {"sku": "A"})
        assert first.success, first
        # A sync method on the loop's own thread would wait for itself: refused, and the session is untouched.
        with pytest.raises(RuntimeError, match="would wait for itself"):
            pool.call(spec, "get_inventory", {"sku": "A"})
        # From another thread (a worker, the heartbeat) it is handed over to this loop as before.
        other = await asyncio.to_thread(pool.call, spec, "get_inventory", {"sku": "B"})
        assert other.success, other
        assert await asyncio.to_thread(pool.stats) | {} and pool.open_sessions() == 1
        assert _pool_threads() == before  # no loop thread was started for it
        assert marked_pids(specs.marker)  # the server runs
        await pool.release()
        assert pool._loop is None and pool.open_sessions() == 0

    asyncio.run(scenario())
    assert wait_no_marked(specs.marker) == []


def test_a_pool_cannot_adopt_a_second_loop_and_refuses_work_once_its_loop_stopped(make_pool: Any,
                                                                                specs: Specs) -> None:
    pool: SessionPool = make_pool()
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(pool.adopt())
        with pytest.raises(RuntimeError, match="already runs"):
            loop.run_until_complete(pool.adopt())
        # The loop is not running now and was not released: a sync call from another thread says so instead of
        # waiting out its bound.
        caught: list[BaseException] = []

        def from_a_worker() -> None:
            try:
                pool.call(specs.local(), "get_inventory", {"sku": "A"})
            except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
                caught.append(exc)

        worker = threading.Thread(target=from_a_worker)
        worker.start()
        worker.join(30)
        assert len(caught) == 1 and "stopped without release" in str(caught[0]), caught
        loop.run_until_complete(pool.release())
    finally:
        loop.close()
    # Released, it takes a loop thread of its own again.
    assert pool.call(specs.local(), "get_inventory", {"sku": "A"}).success
