"""This process's MCP session pool, from settings: in-process (SessionPool) or, with runners, the RunnerPool that
sends LOCAL servers to their runner. Both satisfy `Pool`, the surface the services use."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from django.conf import settings

from tools_app.wiring.http import outbound_policy

# The pools are imported where they are made: the session pool imports the MCP SDK (~1 s of CPU) and the runners'
# registry redis (~0.3 s), and this module is imported by the services and so by every Django process's start
# (issue 35), most of which never open a pool.
if TYPE_CHECKING:
    from tools_app.runtime.mcp.pool import Discovery, SessionPool
    from tools_app.runtime.mcp.spec import ServerSpec
    from tools_app.runtime.result import ToolResult
    from tools_app.runtime.runner.placement import Registry

T = TypeVar("T")


class Pool(Protocol):
    """What the services ask of an MCP session pool (SessionPool and RunnerPool both are one)."""

    def probe(self, spec: ServerSpec) -> Discovery: ...

    def call(self, spec: ServerSpec, function: str, arguments: dict[str, Any], timeout_s: float | None = None,
             on_progress: Any = None, client_requests: Any = None) -> ToolResult: ...

    def session_request(self, spec: ServerSpec, op: Callable[[Any], Awaitable[T]],
                        timeout_s: float | None = None) -> T: ...

    def asking_request(self, spec: ServerSpec, send: Callable[[Any, Any, str | None], Awaitable[T]],
                       client_requests: Any, what: str, timeout_s: float | None = None) -> T: ...

    def close(self, tool_id: int) -> None: ...

    def close_all(self) -> None: ...

    def shutdown(self) -> None: ...

    def stats(self) -> dict[str, Any]: ...


class _Slot:
    """The process's one pool and the lock that guards making it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pool: Pool | None = None

    def get(self) -> Pool:
        with self.lock:
            if self.pool is None:
                # the pools on first use (see the imports)
                from tools_app.runtime.runner.client import RunnerPool

                local = local_pool()
                self.pool = RunnerPool(local, runner_registry(), settings.TOOLHUB_RUNNER_SECRET) \
                    if settings.TOOLHUB_RUNNERS else local
                from tools_app.pool_broadcast import start_listener

                start_listener(release_tool)
            return self.pool

    def current(self) -> Pool | None:
        with self.lock:
            return self.pool

    def swap(self, pool: Pool | None) -> Pool | None:
        """Put `pool` in the slot and give back the one it held (tests run one against a pool of their own)."""
        with self.lock:
            old, self.pool = self.pool, pool
            return old


_slot = _Slot()


def pool() -> Pool:
    """This process's MCP session pool, configured from settings on first use: with runners (TOOLHUB_RUNNERS) a
    facade that sends LOCAL servers to their runner and keeps REMOTE ones here."""
    return _slot.get()


def swap_pool(new: Pool | None) -> Pool | None:
    """Replace this process's pool (None: made again from settings on next use); returns the one replaced."""
    return _slot.swap(new)


def local_pool() -> SessionPool:
    """The process-wide session pool from settings (a runner hosts its servers in one)."""
    from tools_app.runtime.mcp.pool import configure_pool  # the SDK on first use (see the imports)

    return configure_pool(
        policy=outbound_policy(),
        idle_ttl_s=settings.TOOLHUB_POOL_IDLE_TTL_S,
        max_per_tenant=settings.TOOLHUB_POOL_MAX_PER_TENANT,
        max_total=settings.TOOLHUB_POOL_MAX_TOTAL,
        fair_share=settings.TOOLHUB_POOL_FAIR_SHARE,
        input_rounds=settings.TOOLHUB_MCP_INPUT_ROUNDS,
        stdio_discover_s=settings.TOOLHUB_MCP_STDIO_DISCOVER_S,
        raw_post=settings.TOOLHUB_MCP_RAW_POST,
    )


def runner_registry() -> Registry:
    from tools_app.runtime.runner.placement import Registry  # redis on first use (see the imports)

    return Registry(settings.REDIS_URL, ttl_s=settings.TOOLHUB_RUNNER_TTL_S, secret=settings.TOOLHUB_RUNNER_SECRET)


def release_tool(tool_id: int) -> None:
    """Close this process's sessions of a tool (config changed or tool deleted)."""
    current = _slot.current()
    if current is not None:
        current.close(tool_id)


def pool_stats() -> dict[str, Any]:
    """The pool's counters for metrics; zeros while this process has not opened the pool (scraping never starts it)."""
    current = _slot.current()
    return current.stats() if current is not None else {}
