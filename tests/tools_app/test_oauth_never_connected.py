"""Calling a function of an OAuth tool nobody connected yet (so its functions were never listed) asks for
authorization with the caller's link, as a connected-but-expired one does; other tools keep their hint."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tenants_app.models import Role
from tests.fixtures.mcp_servers import OAUTH_SERVER, http_server
from tests.tools_app.test_oauth_connections import invoke, make_tool
from tools_app.models import Tool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with http_server(OAUTH_SERVER, extra_args=("--access-ttl", "60")) as url:
        yield url


def test_a_never_connected_shared_tool_answers_authorization_required(api: Any, member_client: Any, tenant: Any,
                                                                      server_url: str) -> None:
    tool_id = make_tool(api, server_url, name="fresh")
    assert not Tool.objects.get(pk=tool_id).functions.exists()
    answer = invoke(api, tool_id, "whoami")
    assert answer["success"] is False and answer["error_code"] == "AUTHORIZATION_REQUIRED", answer
    assert "not connected" in answer["error"] and f"/api/v1/tools/{tool_id}/oauth/connect/" in answer["error"]
    assert "Refresh" not in answer["error"]
    assert answer["authorize_url"].startswith("http://testserver/oauth/start/")  # the admin's own link
    member = member_client(tenant, Role.MEMBER)  # may not connect the shared account: told so, no link
    refused = invoke(member, tool_id, "whoami")
    assert refused["error_code"] == "AUTHORIZATION_REQUIRED" and refused["authorize_url"] is None


def test_a_never_connected_per_user_tool_gives_the_member_their_link(member_client: Any, tenant: Any, api: Any,
                                                                     server_url: str) -> None:
    tool_id = make_tool(api, server_url, per_user=True, name="mine")
    member = member_client(tenant, Role.MEMBER)
    answer = invoke(member, tool_id, "whoami")
    assert answer["error_code"] == "AUTHORIZATION_REQUIRED" and "your own account" in answer["error"], answer
    assert answer["authorize_url"].startswith("http://testserver/oauth/start/")


def test_a_plain_tool_without_functions_still_says_to_discover_them(api: Any, server_url: str) -> None:
    resp = api.post("/api/v1/tools/", {"name": "plain", "type": "REMOTE", "config": {"url": server_url}},
                    format="json")
    answer = invoke(api, int(resp.json()["id"]), "whoami")
    assert answer["error_code"] == "NOT_FOUND" and "run Test or Refresh" in answer["error"], answer
