"""A warm gateway call of either era makes no thread hop it can spare: a 2025 session's use is noted at most once
per TOOLHUB_MCP_SESSION_TOUCH_S without leaving the event loop, and a 2026 tools/call's Mcp-Param-* schema check
reads the caller's listing kept for ttlMs instead of listing again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.test import override_settings

from agents_app.gateway import server, sessions
from tests.agents_app.gateway.modern import MODERN, client

pytestmark = pytest.mark.django_db(transaction=True)
CALL = ("inventory__get_inventory", {"sku": "DEMO-001"})


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


async def _calls(url: str, token: str, mode: str, n: int) -> list[Any]:
    async with client(url, token, mode=mode) as connected:
        await connected.list_tools()
        return [await connected.call_tool(*CALL) for _ in range(n)]


def test_a_2025_session_is_touched_once_not_per_request(served: Any, setup: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    touched = _counting(monkeypatch, sessions, "touch")
    results = asyncio.run(_calls(served.endpoint("acme", setup.agent_id), setup.token, "legacy", 4))
    assert all(not r.is_error for r in results)
    assert touched == []  # the handshake noted the use; within TOUCH_S no request leaves the loop for it


@override_settings(TOOLHUB_MCP_SESSION_TOUCH_S=0)
def test_a_2025_session_is_touched_again_after_touch_s(served: Any, setup: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    touched = _counting(monkeypatch, sessions, "touch")
    asyncio.run(_calls(served.endpoint("acme", setup.agent_id), setup.token, "legacy", 3))
    assert len(touched) >= 3  # list + 3 calls (and the client's own requests) each note it


def test_a_2026_call_checks_its_headers_against_the_kept_listing(served: Any, setup: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    listed = _counting(monkeypatch, server, "_visible_listing")
    results = asyncio.run(_calls(served.endpoint("acme", setup.agent_id), setup.token, MODERN, 4))
    assert all(not r.is_error and r.structured_content["sku"] == "DEMO-001" for r in results)
    assert len(listed) == 1  # the client's own tools/list; its four calls read what it answered


@override_settings(TOOLHUB_MCP_LIST_TTL_MS=0)
def test_without_a_list_ttl_every_2026_call_lists_for_its_check(served: Any, setup: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    listed = _counting(monkeypatch, server, "_visible_listing")
    asyncio.run(_calls(served.endpoint("acme", setup.agent_id), setup.token, MODERN, 3))
    assert len(listed) == 4
