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

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.http import FileResponse, HttpRequest, HttpResponseBase
from django.urls import ResolverMatch, get_resolver, set_script_prefix

from core import resolve_cache

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

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's ASGIHandler.handle (5.2), with the request signals moved into the request's one hop: the
        request_started signal is sent there before the view, and a response whose body is already complete
        (not streaming) is closed there too (request_finished: database connections back to the pool) before
        its bytes are sent. Django sends each signal in a hop of its own. A streaming response is closed after
        its last chunk, as in Django."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            assert error_response is not None
            await signals.request_started.asend(sender=self.__class__, scope=scope)
            body_file.close()
            await self.send_response(error_response, send)
            await sync_to_async(error_response.close)()
            return

        closed = False

        async def process_request(request: HttpRequest, send: Any) -> HttpResponseBase:
            nonlocal closed
            response, closed = await sync_to_async(self._respond, thread_sensitive=True)(request, scope)
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client disconnected while the response was sent
            return response

        # From here on as Django: a disconnect while the view runs cancels it (after it returns).
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(process_request(request, send)),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            await signals.request_finished.asend(sender=self.__class__)
        else:
            if not closed and response is not None:
                await sync_to_async(response.close)()
        body_file.close()

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        """Django's, with the answer for a path seen before taken from core.resolve_cache."""
        if hasattr(request, "urlconf"):  # a per-request URLconf (none here): Django's way, uncached
            return super().resolve_request(request)
        match = resolve_cache.resolve(get_resolver(), request.path_info)
        request.resolver_match = match
        return match

    def _respond(self, request: HttpRequest, scope: dict[str, Any]) -> tuple[HttpResponseBase, bool]:
        """The request's one hop: request_started, middleware and view, and the close of a complete response."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        response = self.get_response(request)
        response._handler_class = self.__class__  # type: ignore[attr-defined]
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        if response.streaming:
            return response, False
        response.close()
        return response, True


def get_asgi_application() -> Any:
    """django.core.asgi.get_asgi_application, with the handler above."""
    django.setup(set_prefix=False)
    return OneHopASGIHandler()
