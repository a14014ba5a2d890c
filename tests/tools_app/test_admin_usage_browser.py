"""The tenant's usage page (admin, beside Quotas) walked in headless Chromium: totals, chart, tools, members,
quota headroom; the numbers agree with GET /api/v1/usage/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tenants_app.models import Role
from tests.browser import MARKS, dead_links, login, shot
from tests.factories import MembershipFactory, TenantFactory, UserFactory
from tools_app.models import CallStatus, Quota, Tool, ToolCall
from tools_app.services import quotas

pytestmark = MARKS


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    quotas._store.forget()
    yield
    quotas._store.forget()


def test_usage_page_shows_calls_errors_members_headroom_and_a_chart(live_server: Any, tenant: Any,
                                                                    browser: Any) -> None:
    user = UserFactory(username="uma", password="pw-usage-1", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    helper = UserFactory(username="bob")
    MembershipFactory(tenant=tenant, user=helper, role=Role.MEMBER)
    lister = Tool.objects.get(tenant=tenant, name="list_directory")
    reader = Tool.objects.get(tenant=tenant, name="read_file")
    for ms in (5, 10, 15, 900):
        ToolCall.objects.create(tenant=tenant, tool=reader, tool_name=reader.name, function="read_file",
                                status=CallStatus.OK, cost_ms=ms, actor=helper)
    ToolCall.objects.create(tenant=tenant, tool=lister, tool_name=lister.name, function="list_directory",
                            status=CallStatus.ERROR, error_code="TIMEOUT", cost_ms=30_000, actor=user)
    other = TenantFactory(slug="elsewhere")  # never shown here
    ToolCall.objects.create(tenant=other, tool_name="secret_tool", function="x", status=CallStatus.OK, cost_ms=1)
    quota = Quota.objects.create(tenant=tenant, scope="member", target="bob", target_id=helper.pk, per_minute=4)
    tool_limit = Quota.objects.create(tenant=tenant, scope="tool", target=str(reader.pk), target_id=reader.pk,
                                      per_day=100)
    # One real call uses one of the tool's 100 a day: the headroom reads the live counters.
    quotas.store().acquire(quotas.applicable(tenant=tenant, actor=helper, tool=reader, agent=None))

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    login(page, live_server.url, "uma", "pw-usage-1")
    page.goto(f"{live_server.url}/admin/tools_app/quota/")
    page.click("#usage-link")
    page.wait_for_url("**/admin/tools_app/quota/usage/")
    assert page.inner_text("#total-calls") == "5"
    assert page.inner_text("#total-errors") == "1"
    tools = page.inner_text("#usage-tools")
    assert "read_file" in tools and "list_directory" in tools and "TIMEOUT" in tools
    assert "secret_tool" not in page.content()
    assert page.locator("#usage-chart svg rect").count() >= 1
    slowest = page.locator("#usage-slowest tr").all_inner_texts()
    assert slowest[0].startswith("list_directory")
    members = page.inner_text("#usage-members")
    assert members.index("bob") < members.index("uma")
    headroom = page.inner_text("#usage-headroom")
    assert "member bob" in headroom and f"tool {reader.pk} (read_file)" in headroom
    rows = {r.split("\t")[0].split(" (")[0]: r for r in page.locator("#usage-headroom tbody tr").all_inner_texts()}
    assert "\t1\t100" in rows[f"tool {reader.pk}"]  # used 1 of 100 today
    assert page.locator(f"#usage-headroom a[href$='/quota/{quota.pk}/change/']").count() == 1
    assert page.locator(f"#usage-headroom a[href$='/quota/{tool_limit.pk}/change/']").count() == 1
    shot(page, "admin-usage", docs="admin-usage")
    assert dead_links(page) == {}
    page.goto(f"{live_server.url}/admin/tools_app/quota/usage/?days=7")
    assert page.inner_text("#total-calls") == "5"
