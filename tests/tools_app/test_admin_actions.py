"""Admin actions run the real services: Test connects, Refresh stores, Approve trusts."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.fixtures.mcp_servers import MINI
from tools_app.models import FunctionState, Tool, ToolFunction
from tools_app.wiring.pool import pool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    yield
    pool().close_all()


def test_test_refresh_and_approve_actions(api: Any, admin_client: Any) -> None:
    tool_id = api.post("/api/v1/tools/", {"name": "inv", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(MINI)]}}, format="json").json()["id"]
    url = "/admin/tools_app/tool/"
    tested = admin_client.post(url, {"action": "test_tools", "_selected_action": [tool_id]}, follow=True)
    assert b"OK in" in tested.content and b"get_inventory" in tested.content
    assert not ToolFunction.objects.filter(tool_id=tool_id).exists()
    admin_client.post(url, {"action": "refresh_functions", "_selected_action": [tool_id]}, follow=True)
    fn = ToolFunction.objects.get(tool_id=tool_id, name="get_inventory")
    ToolFunction.objects.filter(pk=fn.pk).update(state=FunctionState.CHANGED, approved_hash="")
    admin_client.post(url, {"action": "approve_changed_functions", "_selected_action": [tool_id]}, follow=True)
    fn.refresh_from_db()
    assert fn.state == FunctionState.ACTIVE and fn.approved_hash == fn.schema_hash
    page = admin_client.get(f"/admin/tools_app/tool/{tool_id}/change/")
    assert b"get_inventory" in page.content
    assert Tool.objects.get(pk=tool_id).last_ok_at is not None
