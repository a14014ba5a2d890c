"""The admin frame in headless Chromium: switch tenants, and the dashboard at 1280 px and at phone width."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from market_app.models import MarketEntry, MarketSource
from tenants_app.models import Role
from tests.browser import MARKS, login, overflows, shot
from tests.factories import MembershipFactory, ToolFactory, UserFactory
from tools_app.models import CallStatus, ToolCall

pytestmark = MARKS


def busy_tenant(tenant: Any) -> None:
    """A tenant with tools in every health state, a day of calls and a market source with an update."""
    now = timezone.now()
    ToolFactory(tenant=tenant, name="inventory", last_ok_at=now, last_checked_at=now)
    ToolFactory(tenant=tenant, name="weather", last_ok_at=now, consecutive_failures=1, last_error="connect timeout")
    tripped = ToolFactory(tenant=tenant, name="crm-remote", consecutive_failures=3, last_error="HTTP 502 from upstream",
                          disabled_until=now + timedelta(minutes=4))
    ToolFactory(tenant=tenant, name="search")
    rows = []
    for hour in range(24):
        for i in range(3 + (hour * 7) % 11):
            tool = ("inventory", "weather", "read_file")[i % 3]
            failed = (hour + i) % 13 == 0
            rows.append(ToolCall(tenant=tenant, tool_name=tool, function="call", cost_ms=20 + (i * 37 + hour * 11) % 400,
                                 status=CallStatus.ERROR if failed else CallStatus.OK,
                                 created_at=now - timedelta(hours=hour, minutes=i)))
    ToolCall.objects.bulk_create(rows)
    source = MarketSource.objects.create(tenant=tenant, name="Team catalog", url="http://127.0.0.1:9/c.json",
                                         last_refresh_at=now - timedelta(minutes=12), last_status="ok",
                                         last_counts={"added": 2, "updated": 1, "unchanged": 9, "removed": 0,
                                                      "errors_total": 0})
    entry = MarketEntry.objects.create(source=source, name="crm", content_hash="v2")
    tripped.market_entry, tripped.market_hash = entry, "v1"
    tripped.save()


def test_switch_tenants_from_the_header(live_server: Any, tenant: Any, other_tenant: Any, browser: Any) -> None:
    from playwright.sync_api import expect

    user = UserFactory(username="both", password="pw-browser-3", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    MembershipFactory(tenant=other_tenant, user=user, role=Role.OWNER)
    ToolFactory(tenant=tenant, name="alpha-tool")
    ToolFactory(tenant=other_tenant, name="omega-tool")

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    login(page, live_server.url, "both", "pw-browser-3", next_url="/admin/tools_app/tool/")
    expect(page.locator("#toolhub-tenant-select")).to_have_value(str(tenant.pk))
    expect(page.locator("#result_list")).to_contain_text("alpha-tool")
    expect(page.locator("#result_list")).not_to_contain_text("omega-tool")
    page.select_option("#toolhub-tenant-select", str(other_tenant.pk))
    page.wait_for_load_state()
    expect(page.locator(".messagelist")).to_contain_text(f"Now working in tenant {other_tenant.slug}")
    expect(page.locator("#result_list")).to_contain_text("omega-tool")
    expect(page.locator("#result_list")).not_to_contain_text("alpha-tool")
    shot(page, "admin-tenant-switched")
    page.goto(f"{live_server.url}/admin/")  # the choice is kept in the session
    expect(page.locator("#toolhub-tenant-select")).to_have_value(str(other_tenant.pk))


def test_dashboard_at_desktop_and_phone_width(live_server: Any, tenant: Any, browser: Any) -> None:
    from playwright.sync_api import expect

    user = UserFactory(username="dash", password="pw-browser-4", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.OWNER)
    busy_tenant(tenant)

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    login(page, live_server.url, "dash", "pw-browser-4")
    health = page.locator("#panel-health")
    expect(health).to_contain_text("crm-remote")
    expect(health).to_contain_text("min left")
    expect(page.locator("#calls-chart rect")).not_to_have_count(0)
    expect(page.locator("#cost-per-tool")).to_contain_text("inventory")
    expect(page.locator("#panel-market")).to_contain_text("1 available")
    assert not overflows(page)
    shot(page, "admin-dashboard-1280", docs="dashboard")

    phone = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=1, is_mobile=True)
    login(phone, live_server.url, "dash", "pw-browser-4")
    expect(phone.locator("#panel-health")).to_be_visible()
    assert not overflows(phone)
    box = phone.locator("#panel-activity").bounding_box()
    assert box is not None and box["width"] <= 390
    shot(phone, "admin-dashboard-phone")


def test_a_refused_membership_save_keeps_what_was_typed(live_server: Any, tenant: Any, browser: Any) -> None:
    """Adding a member by a username that does not exist: the service's refusal is shown at the username, the
    typed name and the chosen role stay; corrected, it saves. A role the service refuses is shown at the role."""
    from playwright.sync_api import expect

    from tenants_app.models import Membership
    from tenants_app.services import NO_SUCH_USER

    admin_user = UserFactory(username="lead", password="pw-members-1", is_staff=True)
    MembershipFactory(tenant=tenant, user=admin_user, role=Role.ADMIN)
    UserFactory(username="newcomer-eu")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    login(page, live_server.url, "lead", "pw-members-1", next_url="/admin/tenants_app/membership/add/")
    page.fill("#id_username", "newcomer-ue")  # a typo
    page.select_option("#id_role", "viewer")
    page.click("input[name=_save]")
    expect(page.locator(".field-username .errorlist")).to_have_text(NO_SUCH_USER)
    expect(page.locator("#id_username")).to_have_value("newcomer-ue")
    expect(page.locator("#id_role")).to_have_value("viewer")
    assert not overflows(page)
    shot(page, "admin-membership-refused-keeps-input", full_page=False, docs="failed-save-keeps-input")
    assert not Membership.objects.filter(tenant=tenant, user__username__startswith="newcomer").exists()
    page.fill("#id_username", "newcomer-eu")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    assert Membership.objects.get(tenant=tenant, user__username="newcomer-eu").role == Role.VIEWER

    own = Membership.objects.get(tenant=tenant, user=admin_user)
    page.goto(f"{live_server.url}/admin/tenants_app/membership/{own.pk}/change/")
    page.select_option("#id_role", "owner")  # an admin cannot make anyone owner, themselves included
    page.click("input[name=_save]")
    expect(page.locator(".field-role .errorlist")).to_contain_text("owner")
    expect(page.locator("#id_role")).to_have_value("owner")
    own.refresh_from_db()
    assert own.role == Role.ADMIN
