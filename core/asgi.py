"""Django's ASGI handler, made cheap per request: the middleware chain and the view run in one thread hop, on
a worker thread reused from earlier requests.

Django's own ASGIHandler costs a bare view several milliseconds on a busy two-core machine, in two ways:
- It loads the middleware in async mode, so every `MiddlewareMixin` middleware (security, sessions, common,
  CSRF, auth, messages, clickjacking) runs each hook through its own `sync_to_async`, and a sync-only
  middleware (ours) or a sync view bounces back with `async_to_sync`: about thirty thread hand-offs per
  request. Every middleware and view here is synchronous, so the chain is loaded in sync mode and entered
  once. (An async view would still work: Django wraps it with `async_to_sync`, at one extra hop.)
- Each request's `ThreadSensitiveContext` makes a new single-thread executor, i.e. a new thread, and on exit
  starts another thread to join it, and the request waits for that join. Here each request still gets a
  thread of its own for its thread-sensitive work (slow views never queue behind each other, as with Django),
  but the thread comes from a free list of idle single-thread executors (asgiref lets the caller own the
  executor of a ThreadSensitiveContext) and goes back to it when the request is done.
Reading the body, the request signals (database connections are closed or returned to the pool at the end of
every request, as before), streaming and closing the response are Django's own.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.http import HttpRequest, HttpResponseBase

# Idle request threads kept for reuse; a burst beyond this gets threads that end after their request.
MAX_IDLE_THREADS = 32


class _RequestThreads:
    """A free list of single-thread executors, one lent to each request in flight."""

    def __init__(self, max_idle: int) -> None:
        self._idle: list[ThreadPoolExecutor] = []
        self._lock = threading.Lock()
        self._max_idle = max_idle

    def lend(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="django-request")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(executor)
                return
        executor.shutdown(wait=False)  # its thread ends once idle; nobody waits for it


class OneHopASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        BaseHandler.__init__(self)  # not ASGIHandler.__init__: it loads the middleware in async mode
        self.load_middleware(is_async=False)
        self._threads = _RequestThreads(MAX_IDLE_THREADS)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self._threads.lend()
        try:
            # handle() returns only when every task it started is done (a disconnect cancels the view's task
            # and waits for it), so nothing of this request still runs on the thread when it is lent again.
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self._threads.give_back(executor)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase = await sync_to_async(self.get_response, thread_sensitive=True)(request)
        return response


def get_asgi_application() -> Any:
    """django.core.asgi.get_asgi_application, with the handler above."""
    django.setup(set_prefix=False)
    return OneHopASGIHandler()
