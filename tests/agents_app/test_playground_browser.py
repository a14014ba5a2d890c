"""The playground in headless Chromium: log in, chat, approve a held destructive call, see its result."""

from __future__ import annotations

from typing import Any

from tenants_app.models import Role
from tests.agents_app.support import builtin, make_agent, make_model
from tests.browser import MARKS, login
from tests.factories import MembershipFactory, UserFactory
from tests.fixtures.fake_llm import call, text
from tests.waiting import scaled_ms
from tools_app.wiring.workspaces import workspace_for

pytestmark = MARKS


def test_chat_with_approval_in_the_browser(live_server: Any, tenant: Any, api: Any, start_llm: Any,
                                           browser: Any) -> None:
    from playwright.sync_api import expect

    user = UserFactory(username="pat", password="pw-browser-1", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.MEMBER)
    target = workspace_for(tenant) / "old.log"
    target.write_text("x")
    tool = builtin(tenant, "delete_file", enable=True)
    llm = start_llm([call("delete_file__delete_file", {"path": "old.log"}), text("Deleted old.log for you.")])
    make_agent(api, model=make_model(api, llm), tools=[{"tool": tool.pk}], name="janitor")
    page = browser.new_page()
    login(page, live_server.url, "pat", "pw-browser-1", "/playground/")
    expect(page.locator("#agent")).to_contain_text("janitor")
    page.fill("#message", "please delete old.log")
    page.click("#send")
    approve = page.locator(".approval button.approve")
    expect(approve).to_be_visible()
    expect(page.locator(".approval .warning")).to_contain_text("DESTRUCTIVE")
    assert target.exists()
    approve.click()
    expect(page.locator(".tool-result")).to_contain_text("[ok]")
    expect(page.locator(".assistant").last).to_have_text("Deleted old.log for you.")
    assert not target.exists()


def test_conversations_persist_across_reloads_even_while_waiting_for_approval(
        live_server: Any, tenant: Any, api: Any, start_llm: Any, browser: Any) -> None:
    from playwright.sync_api import expect

    from tests.browser import shot

    user = UserFactory(username="robin", password="pw-browser-5", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.MEMBER)
    workspace = workspace_for(tenant)
    (workspace / "stock.json").write_text('[{"sku": "DEMO-001", "qty": 12}, {"sku": "DEMO-002", "qty": 0}]')
    target = workspace / "old.log"
    target.write_text("x")
    reader = builtin(tenant, "read_file", enable=True)
    deleter = builtin(tenant, "delete_file", enable=True)
    llm = start_llm([call("read_file__read_file", {"path": "stock.json"}), text("Two SKUs, one sold out."),
                     call("delete_file__delete_file", {"path": "old.log"}), text("Deleted old.log.")])
    make_agent(api, model=make_model(api, llm), tools=[{"tool": reader.pk}, {"tool": deleter.pk}], name="stock")

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    login(page, live_server.url, "robin", "pw-browser-5", "/playground/")
    page.fill("#message", "what is in stock?")
    page.click("#send")
    table = page.locator(".tool-result table.result-table")
    expect(table).to_contain_text("DEMO-002")
    expect(table.locator("th")).to_have_text(["sku", "qty"])
    expect(page.locator(".assistant").last).to_have_text("Two SKUs, one sold out.")
    # The conversation joined the sidebar without a reload.
    expect(page.locator("#conversations a.current")).to_contain_text("what is in stock?")
    page.fill("#message", "now delete old.log")
    page.click("#send")
    expect(page.locator(".approval button.approve")).to_be_visible()
    assert "conversation=" in page.url
    # One notation for a call, live here and after the reload below: <tool>__<function> (a held call is
    # announced by its approval card, not as a running call).
    expect(page.locator(".tool-call").last).to_contain_text("read_file__read_file")
    expect(page.locator(".approval .approval-title")).to_contain_text("delete_file__delete_file")
    expect(page.locator("#conversations a.current .badge")).to_have_text("awaiting approval")
    expect(page.locator(".msg.waiting")).to_have_count(1)

    page.reload()  # the run is paused: the reopened page shows the transcript and the pending approval
    expect(page.locator("#conversations a.current")).to_contain_text("awaiting approval")
    expect(page.locator(".user").first).to_have_text("what is in stock?")
    expect(page.locator(".tool-result table.result-table")).to_contain_text("DEMO-001")
    approve = page.locator(".approval button.approve")
    expect(approve).to_be_visible()
    shot(page, "playground-waiting-after-reload", docs="playground")
    assert target.exists()
    approve.click()
    expect(page.locator(".approval .decision")).to_have_text("Approved by robin.")
    expect(page.locator(".assistant").last).to_have_text("Deleted old.log.")
    # Decided and finished: the waiting note and the sidebar's badge are gone without a reload.
    expect(page.locator(".msg.waiting")).to_have_count(0)
    expect(page.locator("#conversations .badge")).to_have_count(0)
    expect(page.locator("#conversations a.current")).to_be_visible()

    page.reload()  # decided and finished: the box says what was decided, no buttons
    expect(page.locator(".assistant").last).to_have_text("Deleted old.log.")
    expect(page.locator(".approval .decision")).to_have_text("Approved by robin.")
    expect(page.locator(".approval button")).to_have_count(0)
    expect(page.locator(".tool-call").last).to_contain_text("delete_file__delete_file")
    expect(page.locator(".tool-result").last).to_contain_text("delete_file__delete_file")
    expect(page.locator("#conversations .badge")).to_have_count(0)
    shot(page, "playground-resumed")
    assert not target.exists()


def test_a_member_who_is_not_staff_signs_in_and_chats(live_server: Any, tenant: Any, api: Any, start_llm: Any,
                                                      browser: Any) -> None:
    """A plain member (no admin access): the playground sends them to the members' sign-in, not the staff login,
    and they chat there; the tool call and the model's answer show, and the call is audited as theirs."""
    from playwright.sync_api import expect

    from tests.browser import shot
    from tools_app.models import ToolCall

    user = UserFactory(username="mia", password="pw-member-7", is_staff=False)
    MembershipFactory(tenant=tenant, user=user, role=Role.MEMBER)
    (workspace_for(tenant) / "stock.json").write_text('[{"sku": "DEMO-001", "qty": 12}]')
    reader = builtin(tenant, "read_file", enable=True)
    llm = start_llm([call("read_file__read_file", {"path": "stock.json"}), text("DEMO-001: 12 in stock.")])
    make_agent(api, model=make_model(api, llm), tools=[{"tool": reader.pk}], name="stock-desk")

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(scaled_ms(20))
    page.goto(f"{live_server.url}/playground/")
    page.wait_for_url("**/accounts/login/**")
    page.fill("#id_username", "mia")
    page.fill("#id_password", "pw-member-7")
    page.click("#login-form [type=submit]")
    page.wait_for_url("**/playground/")
    expect(page.locator("#agent")).to_contain_text("stock-desk")
    expect(page.locator("a[href^='/admin/login/']")).to_have_count(0)
    page.fill("#message", "how many DEMO-001 are left?")
    page.click("#send")
    expect(page.locator(".tool-result table.result-table")).to_contain_text("DEMO-001")
    expect(page.locator(".assistant").last).to_have_text("DEMO-001: 12 in stock.")
    expect(page.locator("#conversations a.current")).to_contain_text("how many DEMO-001 are left?")
    shot(page, "playground-member", full_page=False, docs="playground-member")
    page.goto(f"{live_server.url}/admin/")  # the admin stays closed to them
    expect(page.locator("#toolhub-sections")).to_have_count(0)
    done = ToolCall.objects.get(tenant=tenant, tool=reader)
    assert (done.status, done.actor_id, done.via) == ("ok", user.pk, "chat")
