"""A tenant admin (not a superuser) manages only their own tenants' tools in the admin site."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from tools_app.models import Tool

pytestmark = pytest.mark.django_db

REMOTE = {"url": "http://127.0.0.1:9/mcp", "headers": {}}


def test_tenant_admin_sees_only_own_tenant(api: Any, other_api: Any) -> None:
    api.post("/api/v1/tools/", {"name": "mine", "type": "REMOTE", "config": REMOTE}, format="json")
    theirs = other_api.post("/api/v1/tools/", {"name": "theirs", "type": "REMOTE", "config": REMOTE}, format="json")
    call_command("add_member", "acme", "tina", "--role", "admin", "--password", "pw")
    client = Client()
    assert client.login(username="tina", password="pw")
    page = client.get("/admin/tools_app/tool/?type=REMOTE")
    assert page.status_code == 200
    assert b"mine" in page.content and b"theirs" not in page.content
    assert client.get(f"/admin/tools_app/tool/{theirs.json()['id']}/change/").status_code in (302, 404)
    assert Tool.objects.filter(name="theirs").exists()


def test_member_role_gets_no_admin(tenant: Any) -> None:
    call_command("add_member", "acme", "mo", "--role", "member", "--password", "pw")
    client = Client()
    client.login(username="mo", password="pw")
    assert client.get("/admin/tools_app/tool/").status_code == 302


def test_tenant_admin_reaches_every_admin_page_of_own_tenant(api: Any) -> None:
    call_command("add_member", "acme", "tina", "--role", "admin", "--password", "pw")
    client = Client()
    assert client.login(username="tina", password="pw")
    for url in ("/admin/", "/admin/tools_app/tool/", "/admin/tools_app/toolcall/", "/admin/tools_app/toolfunction/",
                "/admin/agents_app/agent/", "/admin/agents_app/chatmodel/", "/admin/agents_app/conversation/",
                "/admin/market_app/marketsource/", "/admin/market_app/marketentry/",
                "/admin/tenants_app/membership/"):
        assert client.get(url).status_code == 200, url
