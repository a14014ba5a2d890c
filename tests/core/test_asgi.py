"""core.asgi: Django's ASGI handler with the middleware chain and view entered in one hop, on reused threads."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from asgiref.sync import iscoroutinefunction

from core.asgi import OneHopASGIHandler
from tests.core import asgi_urls

pytestmark = pytest.mark.urls("tests.core.asgi_urls")


async def call(app: Any, path: str) -> tuple[int, dict[str, str], bytes]:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 5555), "server": ("testserver", 80)}
    received = False

    async def receive() -> dict[str, Any]:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client never hangs up
        raise AssertionError

    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await app(scope, receive, send)
    start = messages[0]
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in messages[1:])


def test_the_middleware_chain_is_synchronous() -> None:
    # Loaded in async mode, every MiddlewareMixin hook would be its own sync_to_async hop.
    assert not iscoroutinefunction(OneHopASGIHandler()._middleware_chain)  # type: ignore[attr-defined]


def test_a_request_runs_through_the_middleware_on_a_thread_reused_by_the_next() -> None:
    app = OneHopASGIHandler()

    async def two() -> list[tuple[int, dict[str, str], bytes]]:
        return [await call(app, "/where"), await call(app, "/where")]

    (s1, h1, b1), (s2, h2, b2) = asyncio.run(two())
    assert s1 == s2 == 200
    first, second = json.loads(b1), json.loads(b2)
    # Our middleware ran (request id set for the view and echoed) and Django's (clickjacking header).
    assert first["request_id"] == h1["x-request-id"] and h1["x-frame-options"] == "DENY"
    assert first["thread"] != threading.get_ident()  # never on the event loop's thread
    assert first["thread"] == second["thread"]  # no new thread (and no join) per request


def test_requests_in_flight_get_threads_of_their_own() -> None:
    app = OneHopASGIHandler()
    asgi_urls.release.clear()

    async def both() -> list[Any]:
        slow = asyncio.create_task(call(app, "/wait"))
        # The slow view holds its thread; the second request must not queue behind it.
        await asyncio.to_thread(asgi_urls.entered.acquire, True, 10)
        fast = await asyncio.wait_for(call(app, "/where"), 10)
        asgi_urls.release.set()
        return [await slow, fast]

    (s1, _, b1), (s2, _, b2) = asyncio.run(both())
    assert s1 == s2 == 200 and json.loads(b1)["thread"] != json.loads(b2)["thread"]


def test_async_views_and_errors_still_work() -> None:
    app = OneHopASGIHandler()

    async def run() -> list[Any]:
        return [await call(app, "/async"), await call(app, "/boom"), await call(app, "/nowhere")]

    (s1, _, b1), (s2, _, _), (s3, _, _) = asyncio.run(run())
    assert (s1, b1) == (200, b"async ok")
    assert s2 == 500 and s3 == 404


def test_idle_threads_are_capped() -> None:
    from core.asgi import _RequestThreads

    threads = _RequestThreads(max_idle=1)
    a, b = threads.lend(), threads.lend()
    assert a is not b
    threads.give_back(a)
    threads.give_back(b)  # over the cap: shut down, not kept
    assert threads.lend() is a and threads.lend() is not b


def test_request_signals_fire_once_in_the_request_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.core import signals

    app = OneHopASGIHandler()
    seen: list[tuple[str, int]] = []

    def started(**kwargs: Any) -> None:
        seen.append(("started", threading.get_ident()))

    def finished(**kwargs: Any) -> None:
        seen.append(("finished", threading.get_ident()))

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:
        status, _, body = asyncio.run(call(app, "/where"))
        plain = list(seen)
        seen.clear()
        s_status, _, s_body = asyncio.run(call(app, "/stream"))
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    view_thread = json.loads(body)["thread"]
    # A complete response: both signals in the view's own thread (one hop), the connection released there.
    assert status == 200 and plain == [("started", view_thread), ("finished", view_thread)]
    # A streaming one is closed after its body went out (as Django does), still exactly once.
    assert s_status == 200 and s_body == b"one two" and [name for name, _ in seen] == ["started", "finished"]


def test_a_path_resolved_before_comes_from_the_cache_with_its_own_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.urls import URLResolver

    from core import resolve_cache

    resolve_cache.clear()
    resolved: list[str] = []
    real = URLResolver.resolve

    def counted(self: URLResolver, path: str) -> Any:
        resolved.append(path)
        return real(self, path)

    monkeypatch.setattr(URLResolver, "resolve", counted)
    app = OneHopASGIHandler()

    misses: list[int] = []

    async def run() -> list[Any]:
        answers = [await call(app, "/item/7"), await call(app, "/item/7"), await call(app, "/item/8"),
                   await call(app, "/nowhere")]
        misses.append(resolved.count("/nowhere"))
        return [*answers, await call(app, "/nowhere")]

    (s1, _, b1), (s2, _, b2), (s3, _, b3), (s4, _, _), (s5, _, _) = asyncio.run(run())
    assert s1 == s2 == s3 == 200 and s4 == s5 == 404
    # Same answer both times, and the first request's change to its match's kwargs did not leak into the second.
    assert json.loads(b1) == json.loads(b2) == {"pk": 7, "kwargs": {"pk": 7}, "view": "item"}
    assert json.loads(b3)["pk"] == 8
    # The root resolver walked "/item/7" once, "/item/8" once; a miss is never kept: the second 404 walks again.
    assert [resolved.count(path) for path in ("/item/7", "/item/8")] == [1, 1]
    assert misses[0] >= 1 and resolved.count("/nowhere") == 2 * misses[0]


def test_another_urlconf_never_gets_the_answers_of_the_old_one(settings: Any) -> None:
    from core import resolve_cache

    resolve_cache.clear()
    app = OneHopASGIHandler()
    assert asyncio.run(call(app, "/where"))[0] == 200
    settings.ROOT_URLCONF = "tests.core.asgi_urls_other"  # a new resolver (Django clears its URL caches)
    status, _, body = asyncio.run(call(app, "/where"))
    assert (status, body) == (200, b"elsewhere")
