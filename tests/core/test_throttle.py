"""The sliding-window throttle, on the configured cache (locmem in the first CI pass, Redis in the second)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.test import RequestFactory
from rest_framework.request import Request

from core.throttle import ScopedWindowThrottle


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class View:
    throttle_scope = "invoke"


@pytest.fixture
def throttle(monkeypatch: Any) -> Any:
    cache.clear()
    monkeypatch.setattr(ScopedWindowThrottle, "THROTTLE_RATES", {"invoke": "3/min"})
    clock = Clock(600.0)  # the start of a window (600 // 60 = 10)
    request = Request(RequestFactory().post("/"))
    request.user = type("U", (), {"is_authenticated": True, "pk": 7})()

    def ask() -> tuple[bool, float | None]:
        t = ScopedWindowThrottle()
        t.timer = clock
        return t.allow_request(request, View()), t.wait()

    yield ask, clock
    cache.clear()


def test_the_rate_holds_and_retry_after_says_when(throttle: Any) -> None:
    ask, clock = throttle
    assert [ask()[0] for _ in range(3)] == [True, True, True]
    clock.now = 630.0
    allowed, wait = ask()
    assert not allowed and wait == 30  # the current window is full: it ends in 30 s


def test_a_refused_request_is_not_counted(throttle: Any) -> None:
    ask, clock = throttle
    for _ in range(3):
        ask()
    for _ in range(5):
        assert not ask()[0]
    # Next window: three counted in the previous one, a quarter of it still inside the last minute.
    clock.now = 675.0  # 15 s into window 11: 3 * 0.75 = 2.25 carried + this one = 3.25 > 3
    assert ask()[0] is False
    clock.now = 681.0  # 21 s in: 3 * 0.65 = 1.95 carried + 1 = 2.95
    assert ask()[0] is True


def test_the_previous_window_share_fades(throttle: Any) -> None:
    ask, clock = throttle
    for _ in range(3):
        ask()
    clock.now = 660.0  # window 11 starts: all of the previous window still counts
    allowed, wait = ask()
    assert not allowed and wait == 20  # 3 * (1 - t/60) <= 2 at t = 20 s
    clock.now = 680.0
    assert ask()[0] is True
    clock.now = 730.0  # window 12: window 11 held one request
    assert [ask()[0] for _ in range(3)] == [True, True, False]


def test_no_scope_means_no_limit(throttle: Any) -> None:
    t = ScopedWindowThrottle()
    request = Request(RequestFactory().post("/"))
    assert t.allow_request(request, object()) is True
