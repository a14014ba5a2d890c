"""Session caps that never lock a real client out (#40): clients that open new sessions without ending the old
ones (a lost connection, a pool, a crash) get their new session; the member's least recently used one is closed
instead; idle sessions stop counting; DELETE releases; a 2026-07-28 client counts against nothing."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from agents_app.gateway import sessions
from tests import loopback
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Mcp-Protocol-Version": "2025-06-18"}


def _initialize(url: str, token: str) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    headers.pop("Mcp-Protocol-Version")
    return loopback.post(url, json=body, headers=headers)


def _list(url: str, token: str, session_id: str) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    return loopback.post(url, json=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}",
                                                  "Mcp-Session-Id": session_id})


def _delete(url: str, token: str, session_id: str) -> httpx2.Response:
    return loopback.delete(url, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}",
                                         "Mcp-Session-Id": session_id})


def test_clients_that_never_end_their_sessions_are_not_locked_out(served: Any, setup: Any, settings: Any) -> None:
    """The lock-out of #40: each reconnect opened a session and the abandoned ones kept counting."""
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = 3
    url = served.endpoint("acme", setup.agent_id)
    opened = []
    for _ in range(8):  # a client reconnecting again and again, never sending DELETE
        resp = _initialize(url, setup.token)
        assert resp.status_code == 200, resp.text
        opened.append(resp.headers["mcp-session-id"])
        assert _list(url, setup.token, opened[-1]).status_code == 200
    for live in opened[-3:]:  # the newest are served ...
        assert _list(url, setup.token, live).status_code == 200
    # ... the least recently used were closed: the SDK's "session not found", on which a client re-initializes
    assert _list(url, setup.token, opened[0]).status_code == 404
    assert sessions.open_count(sessions.caps(token_digest="x", tenant_id=setup.tenant.pk,
                                             user_id=setup.api.user.pk)["member"]) == 3


def test_the_least_recently_used_session_is_the_one_closed(served: Any, setup: Any, settings: Any) -> None:
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = 2
    settings.TOOLHUB_MCP_SESSION_TOUCH_S = 0  # every use is recorded at once (the default spares the writes)
    url = served.endpoint("acme", setup.agent_id)
    first = _initialize(url, setup.token).headers["mcp-session-id"]
    second = _initialize(url, setup.token).headers["mcp-session-id"]
    assert _list(url, setup.token, first).status_code == 200  # first is now the more recently used
    third = _initialize(url, setup.token)
    assert third.status_code == 200
    assert _list(url, setup.token, first).status_code == 200
    assert _list(url, setup.token, second).status_code == 404


def test_a_session_closed_by_another_process_ends_there_too(served_pair: Any, setup: Any, settings: Any) -> None:
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = 1
    settings.TOOLHUB_MCP_SESSION_TOUCH_S = 0
    one, two = served_pair
    old = _initialize(one.endpoint("acme", setup.agent_id), setup.token).headers["mcp-session-id"]
    new = _initialize(two.endpoint("acme", setup.agent_id), setup.token)
    assert new.status_code == 200  # the other process closed the least recently used session ...
    assert _list(one.endpoint("acme", setup.agent_id), setup.token, old).status_code == 404  # ... here too
    assert _list(two.endpoint("acme", setup.agent_id), setup.token, new.headers["mcp-session-id"]).status_code == 200


def test_an_idle_session_stops_counting(served: Any, setup: Any, settings: Any, monkeypatch: Any) -> None:
    settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER = 5
    url = served.endpoint("acme", setup.agent_id)
    cap = sessions.caps(token_digest="x", tenant_id=setup.tenant.pk, user_id=setup.api.user.pk)["member"]
    for _ in range(2):
        assert _initialize(url, setup.token).status_code == 200
    assert sessions.open_count(cap) == 2
    later = sessions.now() + float(settings.TOOLHUB_MCP_SESSION_IDLE_S) + 1
    monkeypatch.setattr(sessions, "now", lambda: later)  # nobody used them for longer than the idle expiry
    assert sessions.open_count(cap) == 0


def test_delete_releases_the_session(served: Any, setup: Any, settings: Any) -> None:
    url = served.endpoint("acme", setup.agent_id)
    cap = sessions.caps(token_digest="x", tenant_id=setup.tenant.pk, user_id=setup.api.user.pk)["member"]
    session_id = _initialize(url, setup.token).headers["mcp-session-id"]
    assert sessions.open_count(cap) == 1
    assert _delete(url, setup.token, session_id).status_code == 200
    assert wait_until(lambda: sessions.open_count(cap) == 0)


def test_the_caps_are_sized_for_real_clients(settings: Any) -> None:
    limits = sessions.cap_limits()
    assert limits["token"] >= 64 and limits["member"] >= limits["token"]
    assert 5 * 60 <= float(settings.TOOLHUB_MCP_SESSION_IDLE_S) <= 60 * 60
