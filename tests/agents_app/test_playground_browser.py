"""The playground in headless Chromium: log in, chat, approve a held destructive call, see its result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tenants_app.models import Role
from tests.agents_app.support import builtin, make_agent, make_model
from tests.factories import MembershipFactory, UserFactory
from tests.fixtures.fake_llm import call, text
from tools_app import adapters

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed at /usr/bin/chromium "
                                                      "(.ci/run installs it: apt-get install chromium)"),
]


def test_chat_with_approval_in_the_browser(live_server: Any, tenant: Any, api: Any, start_llm: Any,
                                           monkeypatch: Any) -> None:
    from playwright.sync_api import expect, sync_playwright

    user = UserFactory(username="pat", password="pw-browser-1", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.MEMBER)
    target = adapters.workspace_for(tenant) / "old.log"
    target.write_text("x")
    tool = builtin(tenant, "delete_file", enable=True)
    llm = start_llm([call("delete_file__delete_file", {"path": "old.log"}), text("Deleted old.log for you.")])
    make_agent(api, model=make_model(api, llm), tools=[{"tool": tool.pk}], name="janitor")
    # Playwright's sync API keeps an event loop in this thread; the ORM calls above are done by then.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-background-networking", "--headless=new"]
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(f"{live_server.url}/admin/login/?next=/playground/")
            page.fill("#id_username", "pat")
            page.fill("#id_password", "pw-browser-1")
            page.click("input[type=submit]")
            page.wait_for_url("**/playground/")
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
        finally:
            browser.close()
    assert not target.exists()
