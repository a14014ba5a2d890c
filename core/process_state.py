"""State a process keeps for itself (HTTP clients, executor threads, the MCP pool's loop), in one registry.

A forked child (gunicorn and Celery prefork workers) inherits its parent's objects but not their threads or
sockets, so each such object must be made again in the child. Instead of every holder comparing `os.getpid()`,
holders register here: `PerProcess` values are forgotten in a forked child (`os.register_at_fork`) and made
again on first use, and `on_fork_in_child` callbacks (the MCP pool drops its loop state) run there too.
`reset_all()` is the one reset tests use between cases that must not share this state.

Django-free: runtime packages use it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_holders: weakref.WeakSet[PerProcess[object]] = weakref.WeakSet()
_fork_callbacks: list[weakref.WeakMethod[Callable[[], None]] | Callable[[], None]] = []
_lock = threading.Lock()


class PerProcess(Generic[T]):
    """A value each process makes for itself on first use (`make`), never inherited across a fork.

    `close` (optional) releases a value `reset()` drops in this process; a forked child never closes its
    parent's value (its sockets are the parent's), it only forgets it.
    """

    def __init__(self, make: Callable[[], T], *, close: Callable[[T], None] | None = None) -> None:
        self._make, self._close = make, close
        self._value: T | None = None
        self._lock = threading.Lock()
        with _lock:
            _holders.add(self)  # type: ignore[arg-type]

    def get(self) -> T:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._make()
                value = self._value
        return value

    def peek(self) -> T | None:
        """The value if this process made one, without making it."""
        return self._value

    def forget(self) -> None:
        """Drop the value without closing it (what a forked child does with its parent's)."""
        self._lock = threading.Lock()  # the parent's may have been held at the fork
        self._value = None

    def reset(self) -> None:
        """Close (if a closer was given) and drop the value: the next get() makes a new one."""
        with self._lock:
            value, self._value = self._value, None
        if value is not None and self._close is not None:
            self._close(value)


def on_fork_in_child(callback: Callable[[], None]) -> None:
    """Run `callback` in every forked child (a bound method is held weakly: its object may go)."""
    ref: weakref.WeakMethod[Callable[[], None]] | Callable[[], None]
    ref = weakref.WeakMethod(callback) if hasattr(callback, "__self__") else callback
    with _lock:
        _fork_callbacks.append(ref)


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    for holder in list(_holders):
        holder.forget()
    for ref in list(_fork_callbacks):
        callback = ref() if isinstance(ref, weakref.WeakMethod) else ref
        if callback is not None:
            callback()


def reset_all() -> None:
    """Close and drop every PerProcess value of this process (tests)."""
    for holder in list(_holders):
        holder.reset()


os.register_at_fork(after_in_child=_after_fork_in_child)
