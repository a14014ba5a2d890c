"""The tool page's OAuth buttons: Connect goes through Toolhub's start page to the provider and back, connected;
Reconnect and Disconnect follow the connection's state; a tool without OAuth shows none of them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pytest
from django.test import Client

from tenants_app.models import Role
from tests.tools_app.runtime.mcp.test_oauth_client import browse
from tests.tools_app.test_oauth_connections import CALLBACK, make_tool, server_url  # noqa: F401 - fixture
from tools_app.models import OAuthConnection

pytestmark = pytest.mark.django_db(transaction=True)



def test_connect_reconnect_and_disconnect_from_the_tool_page(staff: Client, tenant: Any, member_client: Any,
                                                             server_url: str) -> None:  # noqa: F811
    api = member_client(tenant, Role.ADMIN)
    tool_id = make_tool(api, server_url)
    page = staff.get(f"/admin/tools_app/tool/{tool_id}/change/").content.decode()
    assert 'id="toolhub-oauth-connect"' in page and ">Connect<" in page and "toolhub-oauth-disconnect" not in page

    started = staff.post(f"/admin/tools_app/tool/{tool_id}/oauth/connect/")
    assert started.status_code == 302 and "/oauth/start/" in started["Location"]
    to_provider = staff.get(urlparse(started["Location"]).path)
    assert to_provider.status_code == 302
    query = {k: v[0] for k, v in browse(to_provider["Location"], "alice", callback=CALLBACK).items()}
    landed = staff.get("/oauth/callback/", query, follow=True)
    assert landed.status_code in (200, 302), landed.content[:300]
    assert OAuthConnection.objects.get(tool_id=tool_id).status == "connected"

    page = staff.get(f"/admin/tools_app/tool/{tool_id}/change/").content.decode()
    assert ">Reconnect<" in page and 'id="toolhub-oauth-disconnect"' in page
    gone = staff.post(f"/admin/tools_app/tool/{tool_id}/oauth/disconnect/", follow=True)
    assert "Disconnected" in gone.content.decode()
    assert not OAuthConnection.objects.filter(tool_id=tool_id).exists()
    assert staff.get(f"/admin/tools_app/tool/{tool_id}/oauth/connect/").status_code == 404  # POST only


def test_a_tool_without_oauth_shows_no_oauth_buttons(staff: Client, tenant: Any, member_client: Any) -> None:
    api = member_client(tenant, Role.ADMIN)
    made = api.post("/api/v1/tools/", {"name": "plain", "type": "REMOTE",
                                       "config": {"url": "http://127.0.0.1:9/mcp"}}, format="json")
    page = staff.get(f"/admin/tools_app/tool/{made.json()['id']}/change/").content.decode()
    assert "toolhub-oauth-connect" not in page
