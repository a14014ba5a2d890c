"""The tool and market admin pages in headless Chromium, as a tenant admin uses them; each saves a screenshot."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from market_app.models import MarketEntry, MarketSource
from tenants_app.models import Role
from tests.browser import MARKS, signed_in_page, take
from tests.browser import shot as browser_shot
from tests.factories import MembershipFactory, UserFactory
from tests.fixtures.mcp_servers import CHANGING, MINI, http_server
from tools_app.models import FunctionState, Tool, ToolFunction
from tools_app.wiring.pool import pool
from tools_app.wiring.workspaces import workspace_for

SHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"

pytestmark = MARKS


@pytest.fixture
def page(live_server: Any, tenant: Any, browser: Any) -> Iterator[Any]:
    """A page of the module's Chromium, in a context of its own, signed in as tenant admin tina (a session cookie:
    no login form; each test opens its first page itself)."""
    user = UserFactory(username="tina", password="pw-browser-2", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        p = signed_in_page(browser, live_server.url, user)
        p.base = live_server.url  # the tests' own attribute on the page
        yield p
    finally:
        pool().close_all()


def shot(page: Any, name: str, readme: str = "") -> None:
    """The whole page; with `readme` (a selector), also a small picture of that part, at most 720 px high
    (var/screenshots/readme-<name>.png: the README's candidates)."""
    take(page, SHOTS / f"{name}.png", full_page=True)
    if readme:
        box = page.locator(readme).first.bounding_box()
        scroll = page.evaluate("({x: window.scrollX, y: window.scrollY})")
        clip = {"x": box["x"] + scroll["x"] - 8, "y": box["y"] + scroll["y"] - 8, "width": min(box["width"] + 16, 1100),
                "height": min(box["height"] + 16, 720)}
        take(page, SHOTS / f"readme-{name}.png", full_page=True, clip=clip)


def fill_row(page: Any, field: str, index: int, key: str, value: str, secret: bool | None = None) -> None:
    rows = page.locator(f"#id_{field} tr.toolhub-row")
    while rows.count() <= index:
        page.click(f"#id_{field} .toolhub-add-row")
    row = rows.nth(index)
    row.locator("input.toolhub-key").fill(key)
    row.locator("input.toolhub-value").fill(value)
    if secret is not None:
        row.locator("select.toolhub-secret-flag").select_option("1" if secret else "0")


def shown_rows(page: Any, field: str) -> dict[str, str]:
    """The rows of a key/value field as the page shows them (name -> value box content)."""
    return dict(page.evaluate(
        """(id) => Array.from(document.querySelectorAll(`#${id} tr.toolhub-row`))
              .map(r => [r.querySelector('.toolhub-key').value, r.querySelector('.toolhub-value').value])
              .filter(([k]) => k)""", f"id_{field}"))


def add_tool(page: Any, tenant: Any, tool_type: str, name: str) -> None:
    page.goto(f"{page.base}/admin/tools_app/tool/add/")
    assert page.input_value("#id_tenant") == str(tenant.pk)  # carried hidden: the header names the tenant
    page.fill("#id_name", name)
    page.select_option("#id_type", tool_type)
    for other in {"LOCAL", "REMOTE", "HTTP"} - {tool_type}:
        assert page.locator(f"fieldset.toolhub-config-{other}").is_hidden()


def test_local_tool_created_tested_and_tried_from_its_page(page: Any, tenant: Any) -> None:
    from playwright.sync_api import expect

    add_tool(page, tenant, "LOCAL", "inventory-local")
    page.fill("#id_local_command", sys.executable)
    page.fill("#id_local_args", str(MINI))
    fill_row(page, "local_env", 0, "CURRENCY", "EUR", secret=False)
    fill_row(page, "local_env", 1, "INVENTORY_TOKEN", "tok-browser-1234", secret=True)
    shot(page, "tool-add-local-form")
    page.click("input[name=_continue]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    tool = Tool.objects.get(tenant=tenant, name="inventory-local")
    assert tool.config["env"] == {"CURRENCY": "EUR", "INVENTORY_TOKEN": "tok-browser-1234"}
    assert shown_rows(page, "local_env") == {"CURRENCY": "EUR", "INVENTORY_TOKEN": "********"}
    assert "tok-browser-1234" not in page.content()

    page.click("#toolhub-test")
    expect(page.locator(".messagelist")).to_contain_text("Test OK in")
    page.click("#toolhub-refresh")
    expect(page.locator(".messagelist")).to_contain_text("Refreshed")
    expect(page.locator(".field-badge").first).to_contain_text("enabled")
    shot(page, "tool-change-local", readme="fieldset.toolhub-config-LOCAL")

    page.click("#toolhub-try")
    page.select_option("#id_function", "get_inventory")
    page.fill("#arg-sku", "DEMO-001")
    page.click("#toolhub-run")
    expect(page.locator("#toolhub-result h2")).to_contain_text("Result: ok in")
    expect(page.locator("#toolhub-result")).to_contain_text("DEMO-001")
    shot(page, "tool-try-function", readme="#content-main")


def test_remote_tool_keeps_its_secret_while_a_shown_header_changes(page: Any, tenant: Any) -> None:
    from playwright.sync_api import expect

    with http_server() as url:
        add_tool(page, tenant, "REMOTE", "inventory-remote")
        page.fill("#id_remote_url", url)
        fill_row(page, "remote_headers", 0, "Authorization", "Bearer remote-secret-999", secret=True)
        fill_row(page, "remote_headers", 1, "X-Tenant", "acme", secret=False)
        page.click("input[name=_continue]")
        expect(page.locator(".messagelist")).to_contain_text("was added successfully")
        assert shown_rows(page, "remote_headers") == {"Authorization": "********", "X-Tenant": "acme"}
        page.locator("#id_remote_headers input.toolhub-value").nth(1).fill("globex")
        page.click("input[name=_continue]")
        expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
        shot(page, "tool-keep-secret")
        page.click("#toolhub-test")
        expect(page.locator(".messagelist")).to_contain_text("Test OK in")
    tool = Tool.objects.get(tenant=tenant, name="inventory-remote")
    assert tool.config["headers"] == {"Authorization": "Bearer remote-secret-999", "X-Tenant": "globex"}


def test_http_tool_failed_save_keeps_typed_values_then_saves(page: Any, tenant: Any) -> None:
    from playwright.sync_api import expect

    add_tool(page, tenant, "HTTP", "weather")
    page.select_option("#id_http_method", "POST")
    page.fill("#id_http_url", "http://127.0.0.1:9/weather/${input.city}?key=${secret.api_key}")
    fill_row(page, "http_headers", 0, "X-Units", "metric", secret=False)
    fill_row(page, "http_secrets", 0, "apikey", "typed-key-555")  # a typo: the URL names ${secret.api_key}
    page.fill("#id_http_input_schema", '{"type": "object", "properties": {"city": {"type": "string"}}}')
    page.click("input[name=_continue]")
    expect(page.locator(".errornote")).to_be_visible()
    expect(page.locator(".field-http_secrets .errorlist")).to_contain_text("${secret.api_key}")
    assert page.input_value("#id_http_url") == "http://127.0.0.1:9/weather/${input.city}?key=${secret.api_key}"
    assert shown_rows(page, "http_headers") == {"X-Units": "metric"}
    typed_secret = page.locator("#id_http_secrets input.toolhub-value").nth(0)
    assert typed_secret.input_value() == "typed-key-555" and typed_secret.get_attribute("type") == "password"
    assert page.input_value("#id_http_method") == "POST"
    shot(page, "tool-failed-save-kept")
    page.locator("#id_http_secrets input.toolhub-key").nth(0).fill("api_key")
    page.click("input[name=_continue]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    tool = Tool.objects.get(tenant=tenant, name="weather")
    assert tool.config["secrets"] == {"api_key": "typed-key-555"} and tool.config["method"] == "POST"


def test_changed_function_is_approved_after_reading_the_diff(page: Any, tenant: Any) -> None:
    from playwright.sync_api import expect

    add_tool(page, tenant, "LOCAL", "changing")
    page.fill("#id_local_command", sys.executable)
    page.fill("#id_local_args", str(CHANGING))
    # In the workspace: the sandboxed server can write nowhere else.
    state = workspace_for(tenant) / "state"
    fill_row(page, "local_env", 0, "TOOLHUB_FIXTURE_STATE", str(state), secret=False)
    page.click("input[name=_continue]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    page.click("#toolhub-refresh")  # first discovery: trusted
    expect(page.locator(".messagelist")).to_contain_text("Refreshed")
    page.click("#toolhub-refresh")  # `restock` appears: held
    expect(page.locator(".messagelist")).to_contain_text("added 1")
    page.click("#toolhub-refresh")  # `lookup` gains a field: held for approval
    expect(page.locator(".messagelist")).to_contain_text("changed 1")
    row = page.locator("tr", has_text="lookup").first
    expect(row).to_contain_text("awaiting approval")
    assert row.locator("img[alt=True]").count() == 0  # no green tick while awaiting approval
    page.click("#toolhub-review")
    expect(page.locator("#change-lookup .diff-add").first).to_be_visible()
    expect(page.locator("#change-lookup .toolhub-diff")).to_contain_text("warehouse")
    shot(page, "tool-approve-diff", readme="#content-main")
    expect(page.locator("#change-restock")).to_contain_text("new function")
    page.click("#approve-lookup")
    expect(page.locator(".messagelist")).to_contain_text("Approved changing.lookup")
    fn = ToolFunction.objects.get(tool__name="changing", name="lookup")
    assert fn.state == FunctionState.ACTIVE and "warehouse" in fn.input_schema["properties"]


def test_market_entry_loaded_from_its_page(page: Any, tenant: Any) -> None:
    from playwright.sync_api import expect

    source = MarketSource.objects.create(tenant=tenant, name="Team catalog", url="http://127.0.0.1:9/c.json")
    entry = MarketEntry.objects.create(
        source=source, name="io.example/inventory", title="Inventory", description="Stock levels", kind="LOCAL",
        install={"command": sys.executable, "args": [str(MINI)]}, content_hash="h1",
        required_env=[{"name": "INVENTORY_TOKEN", "is_secret": True, "is_required": True},
                      {"name": "CURRENCY", "is_secret": False, "is_required": False, "default": "EUR"}])
    page.goto(f"{page.base}/admin/market_app/marketentry/{entry.pk}/change/")
    page.fill("#id_name", "market-inventory")
    page.fill("#id_env__INVENTORY_TOKEN", "market-secret-777")
    shot(page, "market-entry-load")
    page.click("#toolhub-load-submit")
    expect(page.locator(".messagelist")).to_contain_text("as tool 'market-inventory'")
    assert shown_rows(page, "local_env") == {"INVENTORY_TOKEN": "********", "CURRENCY": "EUR"}
    page.click("#toolhub-test")
    expect(page.locator(".messagelist")).to_contain_text("Test OK in")
    tool = Tool.objects.get(tenant=tenant, name="market-inventory")
    assert tool.config["env"]["INVENTORY_TOKEN"] == "market-secret-777" and tool.market_entry_id == entry.pk
    assert "market-secret-777" not in page.content()


def test_tool_pages_fit_the_screen(page: Any, tenant: Any) -> None:
    """The list, change, try and changes pages of a tool with long values, at 390 px (a phone) and 1280 px: none is
    wider than the window. Each page is loaded once, at 390, then laid out again at 1280 (a resize re-applies the
    CSS as a load at that width would)."""
    tool = Tool.objects.create(tenant=tenant, name="wide-tool", type="REMOTE", description="x " * 200, config={
        "url": "http://127.0.0.1:9/" + "very-long-path-segment/" * 8, "transport": "streamable_http",
        "headers": {"X-Team": "blue", "Authorization": "Bearer wide-secret-1"}, "timeout_s": 30.0,
        "not_secret": ["headers.X-Team"]})
    ToolFunction.objects.create(tool=tool, name="a_rather_long_function_name_for_layout", schema_hash="h",
                                description="d " * 100, input_schema={}, state=FunctionState.CHANGED)
    for url in ("/admin/tools_app/tool/", f"/admin/tools_app/tool/{tool.pk}/change/",
                f"/admin/tools_app/tool/{tool.pk}/try/", f"/admin/tools_app/tool/{tool.pk}/changes/"):
        page.set_viewport_size({"width": 390, "height": 900})
        page.goto(page.base + url)
        for width in (390, 1280):
            page.set_viewport_size({"width": width, "height": 900})
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, (url, width, overflow)
            if url.endswith("/change/"):
                shot(page, f"tool-change-{width}px")


def test_market_load_then_update_shows_a_diff_before_applying(page: Any, tenant: Any) -> None:
    """A real catalog (served over HTTP): refresh the source, load its entry as a tool; the catalog then publishes a
    new version, and the tool's "Update from market" shows the before/after diff, asks for the newly required
    secret, and only then changes the tool."""
    from playwright.sync_api import expect

    from tests.fixtures.catalog_server import CatalogServer

    def publish(server: CatalogServer, version: str, env: dict[str, str]) -> None:
        server.json("/catalog.json", {"data": [{"name": "inventory", "description": "Stock levels per warehouse",
                                                "version": version, "command": sys.executable,
                                                "args": [str(MINI)], "env": env}]})

    with CatalogServer() as server:
        publish(server, "1.0.0", {"INVENTORY_TOKEN": "", "CURRENCY": "EUR"})
        source = MarketSource.objects.create(tenant=tenant, name="Team catalog", url=server.url("/catalog.json"))
        page.goto(f"{page.base}/admin/market_app/marketsource/{source.pk}/change/")
        page.click("#toolhub-source-refresh")
        expect(page.locator(".messagelist")).to_contain_text("added 1")
        page.goto(f"{page.base}/admin/market_app/marketentry/")
        page.locator("#result_list a", has_text="inventory").first.click()
        page.fill("#id_name", "market-stock")
        page.fill("#id_env__INVENTORY_TOKEN", "market-secret-888")
        page.click("#toolhub-load-submit")
        expect(page.locator(".messagelist")).to_contain_text("as tool 'market-stock'")
        expect(page.locator("#toolhub-market-update")).to_have_count(0)  # loaded from the current version
        tool = Tool.objects.get(tenant=tenant, name="market-stock")
        version = tool.config_version

        publish(server, "1.1.0", {"INVENTORY_TOKEN": "", "CURRENCY": "EUR", "LOG_LEVEL": "info",
                                  "REGION_TOKEN": ""})
        page.goto(f"{page.base}/admin/market_app/marketsource/{source.pk}/change/")
        page.click("#toolhub-source-refresh")
        expect(page.locator(".messagelist")).to_contain_text("updated 1")
    page.goto(f"{page.base}/admin/tools_app/tool/{tool.pk}/change/")
    page.click("#toolhub-market-update")
    diff = page.locator("#toolhub-update-diff")
    expect(diff.locator("tr[data-key='env.LOG_LEVEL'] td.after")).to_have_text("info")
    expect(diff.locator("tr[data-key='env.LOG_LEVEL']")).to_contain_text("added")
    expect(diff.locator("tr[data-key='env.REGION_TOKEN'] td.after")).to_have_text("********")
    expect(diff.locator("tr[data-key='env.INVENTORY_TOKEN']")).to_contain_text("kept")
    expect(diff.locator("tr[data-key='env.INVENTORY_TOKEN'] td.before")).to_have_text("********")
    # Only what the catalog changed: the tool's own settings (defaults included) read "kept", none "removed".
    expect(diff.locator("tr.change-added")).to_have_count(2)
    expect(diff.locator("tr.change-removed")).to_have_count(0)
    expect(diff.locator("tr.change-changed")).to_have_count(0)
    assert "market-secret-888" not in page.content()
    tool.refresh_from_db()
    assert tool.config_version == version and "LOG_LEVEL" not in tool.config["env"]  # nothing applied yet
    shot(page, "market-update-diff", readme="#content-main")
    browser_shot(page, "market-update-diff-window", full_page=False, docs="market-update-diff")
    page.fill("#id_env__REGION_TOKEN", "region-secret-3")
    page.click("#toolhub-update-apply")
    expect(page.locator(".messagelist")).to_contain_text("Updated market-stock")
    page.wait_for_url(f"**/admin/tools_app/tool/{tool.pk}/change/")
    expect(page.locator("#toolhub-market-update")).to_have_count(0)
    tool.refresh_from_db()
    assert tool.config_version == version + 1
    assert tool.config["env"] == {"INVENTORY_TOKEN": "market-secret-888", "CURRENCY": "EUR", "LOG_LEVEL": "info",
                                  "REGION_TOKEN": "region-secret-3"}
    assert shown_rows(page, "local_env")["LOG_LEVEL"] == "info"
    page.click("#toolhub-test")
    expect(page.locator(".messagelist")).to_contain_text("Test OK in")
