"""Every admin list at 1280 and 1366 px in headless Chromium (read from the admin index): no column clipped, no dead
link on the pages they open; health as badges, MCP tools first, tool calls filtered by tool, agent, via and date."""

from __future__ import annotations

from datetime import timedelta
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

from django.utils import timezone

from agents_app.models import Agent, ChatModel, Conversation, IntentNode
from identity_app.models import IdentityEvent, IdentityProvider
from market_app.models import MarketEntry, MarketSource
from tenants_app.models import Role
from tests.browser import MARKS, dead_links, shot, signed_in_page, viewer_client
from tests.factories import MembershipFactory, ToolFactory, UserFactory
from tools_app.models import Approval, CallStatus, Quota, Tool, ToolCall, ToolFunction
from tools_app.runtime import result as codes

pytestmark = MARKS

# What counts as clipped in a change list: a header or cell whose content is wider than its box (cut, or
# scrolled inside it), the results box scrolling sideways, or the page wider than the window.
CLIPPED_JS = """() => {
  const out = [];
  const label = (el) => (el.innerText || el.className || el.tagName).trim().slice(0, 40);
  const box = document.querySelector('#changelist .results');
  if (box && box.scrollWidth > box.clientWidth + 1) out.push(`results box scrolls ${box.scrollWidth - box.clientWidth}px`);
  const table = document.querySelector('#result_list');
  if (table && box && table.getBoundingClientRect().right > box.getBoundingClientRect().right + 1)
    out.push('table wider than its box');
  for (const cell of document.querySelectorAll('#result_list th, #result_list td')) {
    for (const el of [cell, ...cell.querySelectorAll('*')]) {
      if (el !== cell && getComputedStyle(el).overflowX === 'visible') continue;
      if (el.scrollWidth > el.clientWidth + 1) { out.push(`${cell.className || cell.tagName}: ${label(el)}`); break; }
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1) out.push('page wider than the window');
  return out;
}"""


class _FirstRowLink(HTMLParser):
    """The href of the first link in the first row of a change list's results (`#result_list tbody tr`)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_results = self.in_body = False
        self.rows = 0
        self.href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and dict(attrs).get("id") == "result_list":
            self.in_results = True
        elif self.in_results and tag == "tbody":
            self.in_body = True
        elif self.in_body and tag == "tr":
            self.rows += 1
        elif self.in_body and self.rows == 1 and tag == "a" and self.href is None:
            self.href = dict(attrs).get("href")


def first_row_link(html: str) -> str:
    parser = _FirstRowLink()
    parser.feed(html)
    assert parser.href, "a list without a linked row"
    return parser.href


def stocked(tenant: Any) -> None:
    now = timezone.now()
    inventory = ToolFactory(tenant=tenant, name="inventory-service-eu", last_ok_at=now, last_checked_at=now)
    weather = ToolFactory(tenant=tenant, name="weather-forecasts", last_ok_at=now, consecutive_failures=3,
                          last_error="HTTP 502 from upstream", disabled_until=now + timedelta(minutes=4))
    ToolFactory(tenant=tenant, name="crm-remote", consecutive_failures=1, last_error="connect timeout")
    for i, name in enumerate(["get_stock_level_for_warehouse", "list_products_in_category", "set_price"]):
        ToolFunction.objects.create(tool=inventory, name=name, input_schema={"type": "object"},
                                    description="A long description of what this function does " * 3,
                                    state="CHANGED" if i == 2 else "ACTIVE")
    agent = Agent.objects.create(tenant=tenant, name="stock-helper")
    rows = []
    for i in range(30):
        tool = (inventory, weather)[i % 2]
        rows.append(ToolCall(tenant=tenant, tool=tool, tool_name=tool.name, function="get_stock_level_for_warehouse",
                             agent=agent if i % 3 == 0 else None, via=("chat", "invoke", "gateway")[i % 3],
                             status=CallStatus.ERROR if i % 7 == 0 else CallStatus.OK,
                             error_code="EXECUTION_ERROR" if i % 7 == 0 else "", cost_ms=20 + i,
                             created_at=now - timedelta(days=i % 10, minutes=i)))
    ToolCall.objects.bulk_create(rows)
    source = MarketSource.objects.create(tenant=tenant, name="Team catalog with a long name",
                                         url="http://127.0.0.1:9/a/rather/long/path/to/the/catalog.json",
                                         last_refresh_at=now, last_status="ok",
                                         last_counts={"added": 2, "updated": 1, "unchanged": 9, "removed": 0})
    for i in range(5):
        MarketEntry.objects.create(source=source, name=f"io.github.some-org/a-long-server-name-{i}",
                                   title=f"A long server title {i}", description="Does things " * 10,
                                   version="1.2.3", content_hash=f"h{i}")


def stocked_everywhere(tenant: Any, user: Any) -> None:
    """stocked(), and a row in every other list a tenant admin sees (chat models, conversations, intents,
    refused calls, approvals), with long values where a list shows free text."""
    stocked(tenant)
    model = ChatModel.objects.create(tenant=tenant, name="gpt-4o-mini-eu-datacenter",
                                     base_url="https://llm-gateway.internal.example.com/v1/openai-compatible",
                                     model="gpt-4o-mini-2024-07-18")
    agent = Agent.objects.get(tenant=tenant, name="stock-helper")
    Agent.objects.filter(pk=agent.pk).update(model=model)
    Conversation.objects.create(tenant=tenant, agent=agent, user=user,
                                title="How many units of DEMO-001 are left in the Rotterdam warehouse this week?")
    root = IntentNode.objects.create(tenant=tenant, code="info", name="Information requests", level="DOMAIN",
                                     kind="MCP")
    IntentNode.objects.create(tenant=tenant, code="info-stock-levels", name="Stock levels per warehouse",
                              level="TOPIC", kind="MCP", parent=root)
    inventory = Tool.objects.get(tenant=tenant, name="inventory-service-eu")
    ToolCall.objects.create(tenant=tenant, tool=inventory, tool_name=inventory.name,
                            function="get_stock_level_for_warehouse", via="chat", agent=agent,
                            status=CallStatus.ERROR, error_code=codes.INVALID_PARAMS,
                            error="arguments: 'warehouse' is a required property; 'sku' must match ^[A-Z]+-[0-9]+$",
                            arguments={"sku": "demo 1"})
    held = ToolCall.objects.create(tenant=tenant, tool=inventory, tool_name=inventory.name, function="set_price",
                                   via="chat", agent=agent, status=CallStatus.AWAITING_APPROVAL,
                                   arguments={"sku": "DEMO-001", "price": "12.50", "note": "summer sale " * 6})
    Approval.objects.create(tenant=tenant, tool_call=held, requested_by=user, warning="Changes a price " * 4,
                            summary="inventory-service-eu.set_price(sku=DEMO-001, price=12.50)",
                            expires_at=timezone.now() + timedelta(hours=1))
    Quota.objects.create(tenant=tenant, scope="member", target=user.username, target_id=user.pk, per_minute=60,
                         per_day=10_000, concurrent=4)
    # A function the screen flagged (the "Screen findings" list), a company identity provider and its audit.
    ToolFunction.objects.filter(tool=inventory, name="list_products_in_category").update(
        screen_status="flagged", screen_findings=[{"rule": "exfil_url", "severity": "medium", "field": "description",
                                                   "excerpt": "send the results to https://collector.example.com"}])
    provider = IdentityProvider.objects.create(tenant=tenant, name="Acme Entra ID with a long display name",
                                               issuer="https://login.microsoftonline.com/acme-tenant-id/v2.0",
                                               client_id="0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
                                               email_domains=["acme.example.com"], role_map={"toolhub-admins": "admin"})
    IdentityEvent.objects.create(tenant=tenant, kind="signin", provider=provider, subject="00u1abcd2efgh3ijk4l5",
                                 user=user, username=user.username, actor="provider", role="admin",
                                 message="signed in through Acme Entra ID with a long display name")


def test_no_list_clips_a_column_at_1280_or_1366(live_server: Any, tenant: Any, browser: Any) -> None:
    """Every change list the admin index offers a tenant admin (read from the index, so a new list is covered),
    each with rows: no header or cell is cut or scrolls, and neither does the results box or the page."""
    user = UserFactory(username="lena", password="pw-lists-1", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    stocked_everywhere(tenant, user)
    page = signed_in_page(browser, live_server.url, user, width=1280, height=800)
    page.goto(f"{live_server.url}/admin/")
    lists = page.eval_on_selector_all(
        "#toolhub-sections tr[class^=model-] th a",
        "links => links.map(a => new URL(a.href).pathname)")
    assert len(lists) >= 12 and "/admin/tools_app/tool/" in lists, lists
    clipped, empty = {}, []
    for path in lists:
        # Loaded once, at 1280, then laid out again at 1366 (a resize re-applies the CSS, as a load at that
        # width would; no list sizes anything in script at load): the same two layouts for half the loads.
        page.set_viewport_size({"width": 1280, "height": 800})
        page.goto(f"{live_server.url}{path}")
        if page.locator("#result_list tbody tr").count() == 0:
            empty.append(path)
            continue
        for width in (1280, 1366):
            page.set_viewport_size({"width": width, "height": 800})
            found = page.evaluate(CLIPPED_JS)
            if found:
                clipped[f"{path} at {width}"] = found
            if width == 1280:
                shot(page, "admin-list-" + path.strip("/").replace("/", "-").replace("admin-", ""),
                     full_page=False)
    assert empty == [], f"lists without rows (stock them above): {empty}"
    assert clipped == {}


def test_every_page_a_list_opens_has_no_dead_link(live_server: Any, tenant: Any, browser: Any) -> None:
    """From every list on the admin index, the first row's page: each link in it opens for a tenant admin (none
    leads to a page they may not see, such as Django's user admin)."""
    user = UserFactory(username="noel", password="pw-lists-4", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    stocked_everywhere(tenant, user)
    page = signed_in_page(browser, live_server.url, user, width=1280, height=800)
    page.goto(f"{live_server.url}/admin/")
    lists = page.eval_on_selector_all("#toolhub-sections tr[class^=model-] th a",
                                      "links => links.map(a => new URL(a.href).pathname)")
    dead: dict[str, dict[str, int]] = {}
    seen: dict[str, int] = {}  # every link opened once: the pages only read
    client = viewer_client(page)
    for path in lists:
        # The list only leads the way (its rows are links in the HTML Django sends; the layout test above renders
        # every list): read through the viewer's session, not rendered. The page it opens is loaded in Chromium,
        # where the admin's scripts set hrefs of their own (the related-object links), then its links are walked.
        listed = client.get(path)
        assert listed.status_code == 200, (path, listed.status_code)
        href = first_row_link(listed.content.decode())
        assert urlsplit(href).path.endswith("/change/"), (path, href)
        page.goto(f"{live_server.url}{href}")
        found = dead_links(page, seen)
        if found:
            dead[page.url.removeprefix(live_server.url)] = found
    assert dead == {}


def test_tools_list_shows_health_badges_and_mcp_tools_first(live_server: Any, tenant: Any, browser: Any) -> None:
    from playwright.sync_api import expect

    user = UserFactory(username="hugo", password="pw-lists-2", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    stocked(tenant)
    page = signed_in_page(browser, live_server.url, user)
    page.goto(f"{live_server.url}/admin/tools_app/tool/")
    names = page.locator("#result_list tbody th.field-name").all_inner_texts()
    assert names[:3] == ["crm-remote", "inventory-service-eu", "weather-forecasts"]  # built-ins after them
    health = page.locator("#result_list tbody tr", has_text="weather-forecasts").locator(".toolhub-badge")
    expect(health.first).to_have_class("toolhub-badge bad")
    expect(health.first).to_contain_text("paused")
    ok = page.locator("#result_list tbody tr", has_text="inventory-service-eu").locator(".toolhub-badge.ok")
    expect(ok).to_have_count(1)
    shot(page, "admin-tools-list", docs="tools-list")


def test_tool_calls_filter_by_tool_agent_via_and_date(live_server: Any, tenant: Any, browser: Any) -> None:
    from playwright.sync_api import expect

    user = UserFactory(username="vic", password="pw-lists-3", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    stocked(tenant)
    page = signed_in_page(browser, live_server.url, user)
    page.goto(f"{live_server.url}/admin/tools_app/toolcall/")
    expect(page.locator("#result_list thead")).to_contain_text("Via")
    filters = page.locator("#changelist-filter")
    for title in ("By tool", "By agent", "By via", "By created at"):
        expect(filters).to_contain_text(title)
    filters.get_by_role("link", name="weather-forecasts").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(15)
    filters.get_by_role("link", name="MCP gateway").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(5)
    filters.get_by_role("link", name="Past 7 days").click()
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)  # as the filter counts
    count = ToolCall.objects.filter(tenant=tenant, tool__name="weather-forecasts", via="gateway",
                                    created_at__gte=midnight - timedelta(days=7)).count()
    expect(page.locator("#result_list tbody tr")).to_have_count(count)
    shot(page, "admin-tool-calls-filtered")
    page.goto(f"{live_server.url}/admin/tools_app/toolcall/")
    page.locator("#changelist-filter").get_by_role("link", name="stock-helper").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(10)
