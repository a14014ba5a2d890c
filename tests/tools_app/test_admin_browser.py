"""The approvals queue in headless Chromium: decide one from its row (a DESTRUCTIVE one after a confirmation, the
result linked to its call), and a batch after seeing its count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tenants_app.models import Role
from tests.browser import MARKS, login, overflows, shot
from tests.conftest import make_client
from tests.factories import MembershipFactory, UserFactory
from tools_app.models import Approval, ApprovalStatus, Tool, ToolStatus, ToolType
from tools_app.wiring.workspaces import workspace_for

pytestmark = MARKS


def test_decide_pending_approvals_from_the_queue(live_server: Any, tenant: Any, browser: Any) -> None:
    from playwright.sync_api import expect

    user = UserFactory(username="ops", password="pw-browser-2", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    api = make_client(user, tenant.slug)
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="delete_file")
    Tool.objects.filter(pk=tool.pk).update(status=ToolStatus.ENABLED)
    workspace = Path(workspace_for(tenant))
    files = {name: workspace / name for name in ("old.log", "keep-a.txt", "keep-b.txt")}
    ids = {}
    for name, path in files.items():
        path.write_text("x")
        body = api.post(f"/api/v1/tools/{tool.pk}/invoke/",
                        {"function": "delete_file", "arguments": {"path": name}}, format="json").json()
        ids[name] = body["approval_id"]
    api.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": "delete_file", "arguments": {"path": "keep-a.txt"}},
             format="json")  # identical: joins keep-a.txt's approval (×2)

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    login(page, live_server.url, "ops", "pw-browser-2")
    page.click("#panel-approvals a.button")
    page.wait_for_url("**/admin/tools_app/approval/")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("#result_list")).to_contain_text("DESTRUCTIVE")
    expect(page.locator("#result_list")).to_contain_text("×2")
    assert not overflows(page)
    shot(page, "admin-approvals-queue", docs="approvals-queue")

    row = rows.filter(has_text="old.log")
    row.locator("button.toolhub-approve").click()
    # A DESTRUCTIVE call is shown with its warning before it runs.
    expect(page.locator("#destructive-warning")).to_contain_text("This call is DESTRUCTIVE")
    expect(page.locator("#batch-rows")).to_contain_text("old.log")
    assert files["old.log"].exists()
    shot(page, "admin-approvals-destructive-confirm", docs="approval-confirm")
    page.click("#confirm-batch")
    expect(page.locator(".messagelist")).to_contain_text("approved; it ran: OK")
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    page.click(".messagelist a.toolhub-result-call")  # the result links to the call that ran
    page.wait_for_url("**/admin/tools_app/toolcall/*/change/")
    expect(page.locator("#toolhub-approval")).to_contain_text(f"approval #{ids['old.log']}")
    page.goto(f"{live_server.url}/admin/tools_app/approval/")

    page.locator("#result_list tbody tr input.action-select").nth(0).check()
    page.locator("#result_list tbody tr input.action-select").nth(1).check()
    page.select_option("select[name=action]", "deny_selected")
    page.click("button[name=index]")
    expect(page.locator("#batch-summary")).to_contain_text("deny 2 requests covering 3 calls")
    shot(page, "admin-approvals-batch-confirm")
    page.click("#confirm-batch")
    expect(page.locator(".messagelist")).to_contain_text("2 of 2 request(s) denied")
    expect(page.locator("#result_list tbody tr")).to_have_count(0)

    assert not files["old.log"].exists() and files["keep-a.txt"].exists() and files["keep-b.txt"].exists()
    statuses = dict(Approval.objects.filter(pk__in=ids.values()).values_list("pk", "status"))
    assert statuses == {ids["old.log"]: ApprovalStatus.APPROVED, ids["keep-a.txt"]: ApprovalStatus.DENIED,
                        ids["keep-b.txt"]: ApprovalStatus.DENIED}

