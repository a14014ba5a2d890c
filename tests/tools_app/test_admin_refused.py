"""Admin "Refused calls": argument errors and refusals with their reasons, only the viewer's tenants."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from tools_app.models import Tool, ToolType

pytestmark = pytest.mark.django_db

URL = "/admin/tools_app/refusedcall/"


def read_file(tenant: Any) -> Tool:
    return Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="read_file")


def invoke(client: Any, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    resp = client.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": tool.name, "arguments": arguments},
                       format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def test_lists_refused_calls_with_reasons_and_the_most_frequent_on_top(tenant: Any, other_tenant: Any, api: Any,
                                                                       other_api: Any) -> None:
    (tenant_tool, foreign_tool) = (read_file(tenant), read_file(other_tenant))
    for _ in range(3):
        assert invoke(api, tenant_tool, {"path": "a", "mode": "fast"})["error_code"] == "INVALID_PARAMS"
    assert invoke(api, tenant_tool, {"path": 7})["error_code"] == "INVALID_PARAMS"
    assert invoke(api, tenant_tool, {"path": "missing.txt"})["error_code"] != "INVALID_PARAMS"  # not bad input
    assert invoke(other_api, foreign_tool, {"path": "b", "other_tenant_marker": 1})["error_code"] == "INVALID_PARAMS"

    call_command("add_member", "acme", "tina", "--role", "admin", "--password", "pw")
    client = Client()
    assert client.login(username="tina", password="pw")
    page = client.get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert "unknown argument(s) mode; accepted: path" in html
    assert "other_tenant_marker" not in html  # another tenant's calls never show
    assert "missing.txt" not in html  # a call that ran and failed is not a refusal
    top = page.context["top_reasons"]
    assert top[0]["count"] == 3 and top[0]["tool_name"] == "read_file" and "mode;" in top[0]["error"]
    assert sum(r["count"] for r in top) == 4
    row = page.context["cl"].result_list[0]
    detail = client.get(f"{URL}{row.pk}/change/")
    assert detail.status_code == 200 and "&quot;path&quot;" in detail.content.decode()


def test_members_get_no_admin(tenant: Any) -> None:
    call_command("add_member", "acme", "mo", "--role", "member", "--password", "pw")
    client = Client()
    client.login(username="mo", password="pw")
    assert client.get(URL).status_code == 302
