"""A server that speaks only MCP 2026-07-28 (stateless, refuses the handshake) through the API, REMOTE and LOCAL:
Test, refresh, invoke, the stored revision in the detail and on the tool page, and a version refusal's typed error."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from tests.fixtures.mcp_servers import CLIENT_PROBE, MODERN_MINI, MODERN_ONLY, http_server
from tests.tools_app.discovered import Discovered
from tools_app.models import Tool
from tools_app.wiring.pool import pool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _close_pool() -> Iterator[None]:
    yield
    pool().close_all()


@pytest.fixture(scope="module")
def modern_url() -> Iterator[str]:
    with http_server(MODERN_ONLY) as url:
        yield url


def make(api: Any, name: str, tool_type: str, config: dict[str, Any]) -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": tool_type, "config": config}, format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def local(api: Any, name: str, script: Any, *args: str) -> int:
    return make(api, name, "LOCAL", {"command": sys.executable, "args": [str(script), *args],
                                     "startup_timeout_s": 20, "call_timeout_s": 10})


@pytest.fixture(params=["REMOTE", "LOCAL"])
def modern_tool(request: pytest.FixtureRequest, api: Any) -> int:
    if request.param == "REMOTE":
        return make(api, "modern", "REMOTE", {"url": request.getfixturevalue("modern_url"), "timeout_s": 10})
    return local(api, "modern", MODERN_MINI)  # modern_only.py's stdio answers without the SDK (test_modern_mini.py)


@pytest.fixture(scope="module")
def discovered() -> Discovered:
    """The modern server's listing as the module's first Test of each tool probed it (tests/tools_app/discovered.py):
    the refreshes after it store that listing instead of starting the same server again."""
    return Discovered()


def test_a_2026_only_server_is_tested_refreshed_and_invoked(api: Any, modern_tool: int,
                                                            discovered: Discovered) -> None:
    with discovered.probes():
        tested = api.post(f"/api/v1/tools/{modern_tool}/test/").json()
    assert tested["ok"] is True, tested
    assert tested["protocol_version"] == "2026-07-28"
    name = "modern-only" if Tool.objects.get(pk=modern_tool).type == "REMOTE" else "modern-mini"
    assert tested["server"] == {"name": name, "version": "2.0.0"}
    assert {"echo", "book_table"} <= {f["name"] for f in tested["functions"]}

    refreshed = discovered.refresh(api, modern_tool)
    assert refreshed["ok"] is True and refreshed["protocol_version"] == "2026-07-28", refreshed
    assert api.get(f"/api/v1/tools/{modern_tool}/").json()["protocol_version"] == "2026-07-28"

    invoked = api.post(f"/api/v1/tools/{modern_tool}/invoke/", {"function": "echo", "arguments": {"text": "hi"}},
                       format="json").json()
    assert invoked["success"] is True and invoked["text"] == "hi", invoked


def test_a_question_without_a_person_to_ask_fails_the_invoke_with_the_reason(api: Any, modern_tool: int,
                                                                            discovered: Discovered) -> None:
    assert discovered.refresh(api, modern_tool)["ok"]
    invoked = api.post(f"/api/v1/tools/{modern_tool}/invoke/",
                       {"function": "book_table", "arguments": {"restaurant": "Chez Ada"}}, format="json").json()
    assert invoked["success"] is False and invoked["error_code"] == "BUSINESS_ERROR", invoked
    assert "nobody can answer" in invoked["error"]


def test_a_2025_server_is_stored_with_its_handshake_revision(api: Any) -> None:
    tool_id = local(api, "probe", CLIENT_PROBE)
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    assert api.get(f"/api/v1/tools/{tool_id}/").json()["protocol_version"] == "2025-11-25"


def test_a_revision_nobody_speaks_is_a_typed_error_naming_the_servers(api: Any) -> None:
    with http_server(MODERN_ONLY, extra_args=("--supported", "2099-01-01")) as url:
        tool_id = make(api, "future", "REMOTE", {"url": url, "timeout_s": 10})
        tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert tested["ok"] is False
    error = tested["error"]
    assert error["code"] == "protocol_version_unsupported", error
    assert error["details"]["supported"] == ["2099-01-01"]
    assert "2026-07-28" in error["details"]["toolhub"]
    assert "2099-01-01" in error["message"]
    assert Tool.objects.get(pk=tool_id).protocol_version == ""


def test_the_tool_page_shows_the_revision(api: Any, staff: Client, modern_url: str) -> None:
    tool_id = make(api, "modern", "REMOTE", {"url": modern_url, "timeout_s": 10})
    assert api.post(f"/api/v1/tools/{tool_id}/test/").json()["ok"]
    html = staff.get(f"/admin/tools_app/tool/{tool_id}/change/").content.decode()
    assert "Protocol version" in html and "2026-07-28" in html
