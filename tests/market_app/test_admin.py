"""Market admin: tenant-scoped sources, write-only auth headers, Refresh and Load actions."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from market_app.models import MarketSource
from tenants_app.models import Role
from tests.factories import MembershipFactory, UserFactory
from tests.fixtures.catalog_server import CatalogServer
from tests.market_app.factories import EntryFactory, SourceFactory
from tools_app.models import Tool

pytestmark = pytest.mark.django_db

CANARY = "canary-admin-5d2e"


@pytest.fixture
def root(tenant: Any) -> Client:
    user = UserFactory(username="root", is_staff=True, is_superuser=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.OWNER)
    client = Client()
    client.force_login(user)
    return client


def test_source_pages_never_show_auth_headers(root: Client, tenant: Any) -> None:
    source = SourceFactory(tenant=tenant, auth_headers={"Authorization": f"Bearer {CANARY}"},
                           last_status="error", last_error="authentication failed (HTTP 401)")
    for url in ("/admin/market_app/marketsource/", f"/admin/market_app/marketsource/{source.pk}/change/"):
        resp = root.get(url)
        assert resp.status_code == 200
        assert CANARY not in resp.content.decode()
    page = root.get(f"/admin/market_app/marketsource/{source.pk}/change/").content.decode()
    # A stored header is a row: its name, an empty write-only value box, a remove tick; never raw JSON.
    assert '<code>Authorization</code><input type="hidden" name="auth_headers_rows-0-name" value="Authorization">' in page
    assert 'type="password" name="auth_headers_rows-0-value"' in page and "Auth headers (JSON)" not in page


def form(source: MarketSource, rows: list[dict[str, str]] | None = None, **extra: Any) -> dict[str, Any]:
    """The source form as posted: stored headers first (name + stored=1), then any rows given."""
    stored = [{"name": k, "stored": "1"} for k in (source.auth_headers or {})]
    data: dict[str, Any] = {"name": source.name, "url": source.url, "format": source.format, "enabled": "on",
                            "refresh_interval_min": source.refresh_interval_min}
    all_rows = [*stored, *(rows or [])]
    for i, row in enumerate(all_rows):
        for key, value in row.items():
            data[f"auth_headers_rows-{i}-{key}"] = value
    data["auth_headers_rows-TOTAL"] = len(all_rows)
    return {**data, **extra}


def test_auth_headers_are_rows_blank_keeps_a_value_replaces_and_remove_drops(root: Client, tenant: Any) -> None:
    source = SourceFactory(tenant=tenant, auth_headers={"X-Key": CANARY})
    url = f"/admin/market_app/marketsource/{source.pk}/change/"
    assert root.post(url, form(source, name="Renamed")).status_code == 302
    source.refresh_from_db()
    assert source.name == "Renamed" and source.auth_headers == {"X-Key": CANARY}
    added = root.post(url, form(source, [{"name": "X-Two", "value": "two-2"}]))
    assert added.status_code == 302
    source.refresh_from_db()
    assert source.auth_headers == {"X-Key": CANARY, "X-Two": "two-2"}
    data = form(source)
    data["auth_headers_rows-1-value"] = "two-3"  # replace one value, keep the other
    assert root.post(url, data).status_code == 302
    source.refresh_from_db()
    assert source.auth_headers == {"X-Key": CANARY, "X-Two": "two-3"}
    refused = root.post(url, form(source, [{"name": "X-Three"}]))  # a new header without a value
    assert refused.status_code == 200 and "header X-Three needs a value" in refused.content.decode()
    assert 'value="X-Three"' in refused.content.decode()  # what was typed stays
    bad = root.post(url, form(source, [{"name": "Bad Header", "value": "v"}]))
    assert bad.status_code == 200 and "not a valid HTTP header name" in bad.content.decode()
    source.refresh_from_db()
    assert source.auth_headers == {"X-Key": CANARY, "X-Two": "two-3"}
    data = form(source)
    data["auth_headers_rows-0-remove"] = "on"
    data["auth_headers_rows-1-remove"] = "on"
    assert root.post(url, data).status_code == 302
    source.refresh_from_db()
    assert source.auth_headers is None


def test_tenant_admin_sees_own_and_global_sources_only(tenant: Any, other_tenant: Any) -> None:
    call_command("add_member", "acme", "tina", "--role", "admin", "--password", "pw")
    client = Client()
    assert client.login(username="tina", password="pw")
    mine = SourceFactory(tenant=tenant, name="mine-src")
    theirs = SourceFactory(tenant=other_tenant, name="theirs-src")
    shared = SourceFactory(tenant=None, name="global-src")
    EntryFactory(source=theirs, name="theirs-entry")
    EntryFactory(source=mine, name="mine-entry")
    page = client.get("/admin/market_app/marketsource/").content.decode()
    assert "mine-src" in page and "global-src" in page and "theirs-src" not in page
    assert client.get(f"/admin/market_app/marketsource/{theirs.pk}/change/").status_code in (302, 404)
    entries = client.get("/admin/market_app/marketentry/").content.decode()
    assert "mine-entry" in entries and "theirs-entry" not in entries
    # A global source is read-only for a tenant admin; refreshing it is refused with a message.
    resp = client.post("/admin/market_app/marketsource/",
                       {"action": "refresh_sources", "_selected_action": [shared.pk]}, follow=True)
    assert "superusers" in resp.content.decode()


def test_member_role_gets_no_market_admin(tenant: Any) -> None:
    call_command("add_member", "acme", "mo", "--role", "member", "--password", "pw")
    client = Client()
    client.login(username="mo", password="pw")
    assert client.get("/admin/market_app/marketsource/").status_code == 302


def test_refresh_action_shows_the_result(root: Client, tenant: Any) -> None:
    with CatalogServer() as server:
        server.json("/c.json", [{"name": "alpha", "url": "https://a.example.test/mcp"}])
        source = SourceFactory(tenant=tenant, url=server.url("/c.json"))
        resp = root.post("/admin/market_app/marketsource/",
                         {"action": "refresh_sources", "_selected_action": [source.pk]}, follow=True)
    assert "added 1, updated 0, unchanged 0, removed 0, errors 0" in resp.content.decode()
    source.refresh_from_db()
    assert source.last_status == "ok"


def test_load_action_loads_into_the_admins_tenant(root: Client, tenant: Any) -> None:
    entry = EntryFactory(source=SourceFactory(tenant=None), name="io.example/thing")
    resp = root.post("/admin/market_app/marketentry/",
                     {"action": "load_into_tenant", "_selected_action": [entry.pk]}, follow=True)
    assert "loaded into acme as tool &#x27;example-thing&#x27;" in resp.content.decode()
    assert Tool.objects.get(tenant=tenant, name="example-thing").market_entry_id == entry.pk


def test_entry_admin_is_searchable(root: Client, tenant: Any) -> None:
    EntryFactory(source=SourceFactory(tenant=tenant), name="weather-srv")
    EntryFactory(source=SourceFactory(tenant=tenant), name="files-srv")
    page = root.get("/admin/market_app/marketentry/?q=weather").content.decode()
    assert "weather-srv" in page and "files-srv" not in page


def test_entry_page_loads_with_values_and_updates_a_loaded_tool(root: Client, tenant: Any) -> None:
    from tools_app.configs import mask_config

    source = SourceFactory(tenant=tenant)
    entry = EntryFactory(source=source, name="io.example/kb", kind="REMOTE",
                         install={"url": "https://kb.example.test/mcp", "transport": "streamable_http"},
                         required_headers=[{"name": "X-Api-Key", "is_secret": True, "is_required": True},
                                           {"name": "X-Team", "is_secret": False, "is_required": False}])
    page = f"/admin/market_app/marketentry/{entry.pk}/change/"
    assert 'id="toolhub-load-form"' in root.get(page).content.decode()
    missing = root.post(f"/admin/market_app/marketentry/{entry.pk}/load/",
                        {"tenant": tenant.pk, "name": "kb", "headers__X-Team": "blue"})
    assert missing.status_code == 200 and "This field is required" in missing.content.decode()
    assert 'value="blue"' in missing.content.decode()
    done = root.post(f"/admin/market_app/marketentry/{entry.pk}/load/",
                     {"tenant": tenant.pk, "name": "kb", "headers__X-Api-Key": CANARY, "headers__X-Team": "blue"})
    tool = Tool.objects.get(tenant=tenant, name="kb")
    assert done.status_code == 302 and done.url.endswith(f"/tools_app/tool/{tool.pk}/change/")  # type: ignore[attr-defined]  # a redirect; django-stubs type it as a plain response
    assert mask_config("REMOTE", tool.config)["headers"] == {"X-Api-Key": "********", "X-Team": "blue"}
    type(entry).objects.filter(pk=entry.pk).update(content_hash="newer", install={
        "url": "https://kb.example.test/mcp/v2", "transport": "streamable_http"})
    listing = root.get(page).content.decode()
    assert "update available" in listing
    asked = root.post(f"/admin/market_app/marketentry/{entry.pk}/update/", {"tool": tool.pk})
    assert asked.status_code == 200 and 'id="toolhub-update-diff"' in asked.content.decode()
    tool.refresh_from_db()
    assert tool.market_hash != "newer"  # shown, not applied
    root.post(f"/admin/market_app/marketentry/{entry.pk}/update/", {"tool": tool.pk, "confirm": "yes"})
    tool.refresh_from_db()
    assert tool.config["url"].endswith("/v2") and tool.config["headers"]["X-Api-Key"] == CANARY
    assert tool.market_hash == "newer"


def test_source_page_refresh_button_shows_counts(root: Client, tenant: Any) -> None:
    with CatalogServer() as server:
        server.json("/c.json", [{"name": "alpha", "url": "https://a.example.test/mcp"}])
        source = SourceFactory(tenant=tenant, url=server.url("/c.json"))
        page = root.get(f"/admin/market_app/marketsource/{source.pk}/change/").content.decode()
        assert 'id="toolhub-source-refresh"' in page
        resp = root.post(f"/admin/market_app/marketsource/{source.pk}/refresh/", follow=True)
    assert "added 1, updated 0, unchanged 0, removed 0, errors 0" in resp.content.decode()


def test_entry_load_page_offers_only_own_tenants(tenant: Any, other_tenant: Any) -> None:
    call_command("add_member", "acme", "tina", "--role", "admin", "--password", "pw")
    client = Client()
    assert client.login(username="tina", password="pw")
    shared = EntryFactory(source=SourceFactory(tenant=None), name="shared-entry")
    theirs = EntryFactory(source=SourceFactory(tenant=other_tenant), name="theirs-entry")
    page = client.get(f"/admin/market_app/marketentry/{shared.pk}/change/").content.decode()
    assert 'id="toolhub-load-tenant">Loads into tenant <b>acme</b>' in page and "globex" not in page.lower()
    # The header's switcher names the tenant; the Load form carries it instead of a second tenant select.
    load_form = page.split('id="toolhub-load-form"', 1)[1].split("</form>", 1)[0]
    assert '<select name="tenant"' not in load_form and 'type="hidden" name="tenant"' in load_form
    assert client.get(f"/admin/market_app/marketentry/{theirs.pk}/change/").status_code in (302, 404)
    assert client.post(f"/admin/market_app/marketentry/{theirs.pk}/load/",
                       {"tenant": other_tenant.pk, "name": "x"}).status_code == 404
    refused = client.post(f"/admin/market_app/marketentry/{shared.pk}/load/", {"tenant": other_tenant.pk, "name": "x"})
    assert refused.status_code == 200 and not Tool.objects.filter(name="x").exists()


def test_tool_page_offers_the_market_update(root: Client, tenant: Any) -> None:
    source = SourceFactory(tenant=tenant)
    entry = EntryFactory(source=source, name="io.example/kb2", kind="REMOTE",
                         install={"url": "https://kb.example.test/mcp", "transport": "streamable_http"})
    root.post(f"/admin/market_app/marketentry/{entry.pk}/load/", {"tenant": tenant.pk, "name": "kb2"})
    tool = Tool.objects.get(tenant=tenant, name="kb2")
    page = f"/admin/tools_app/tool/{tool.pk}/change/"
    assert 'id="toolhub-market-update"' not in root.get(page).content.decode()
    type(entry).objects.filter(pk=entry.pk).update(content_hash="v2", install={
        "url": "https://kb.example.test/mcp/v2", "transport": "streamable_http"})
    assert 'id="toolhub-market-update"' in root.get(page).content.decode()
    diff = root.post(f"/admin/market_app/marketentry/{entry.pk}/update/", {"tool": tool.pk, "back": "tool"})
    html = diff.content.decode()
    assert diff.status_code == 200 and 'name="back" value="tool"' in html and f'href="{page}" class="closelink"' in html
    back = root.post(f"/admin/market_app/marketentry/{entry.pk}/update/",
                     {"tool": tool.pk, "back": "tool", "confirm": "yes"})
    assert back.status_code == 302 and back.url.endswith(page)  # type: ignore[attr-defined]  # a redirect; django-stubs type it as a plain response
    tool.refresh_from_db()
    assert tool.config["url"].endswith("/v2") and tool.market_hash == "v2"


def diff_rows(html: str) -> dict[str, tuple[str, str, str]]:
    """The confirmation page's diff: key -> (now, after, change)."""
    import re

    table = html.split('id="toolhub-update-diff"', 1)[1].split("</table>", 1)[0]
    rows = {}
    for key, before, after, change in re.findall(
            r'data-key="([^"]+)">\s*<td><code>[^<]*</code></td>\s*<td class="value before">(.*?)</td>\s*'
            r'<td class="value after">(.*?)</td>\s*<td>(\w+)</td>', table, re.S):
        rows[key] = (before.strip(), after.strip(), change)
    return rows


def test_update_from_market_shows_a_diff_and_asks_before_applying(root: Client, tenant: Any) -> None:
    from market_app.catalog import EntryData

    source = SourceFactory(tenant=tenant)
    entry = EntryFactory(source=source, name="io.example/weather", kind="LOCAL",
                         install={"command": "npx", "args": ["-y", "weather@1"], "env": {}},
                         required_env=[{"name": "WEATHER_API_KEY", "is_secret": True, "is_required": True},
                                       {"name": "UNITS", "is_secret": False, "is_required": False}])
    root.post(f"/admin/market_app/marketentry/{entry.pk}/load/",
              {"tenant": tenant.pk, "name": "weather", "env__WEATHER_API_KEY": CANARY, "env__UNITS": "metric"})
    tool = Tool.objects.get(tenant=tenant, name="weather")
    version = tool.config_version
    newer = {"command": "npx", "args": ["-y", "weather@2"], "env": {}}
    type(entry).objects.filter(pk=entry.pk).update(
        install=newer, version="2.0.0", required_env=[
            {"name": "WEATHER_API_KEY", "is_secret": True, "is_required": True},
            {"name": "UNITS", "is_secret": False, "is_required": False},
            {"name": "LOG_LEVEL", "is_secret": False, "is_required": False, "default": "info"},
            {"name": "REGION_TOKEN", "is_secret": True, "is_required": True}],
        # A different hash of the same length (the column holds 64 characters; PostgreSQL enforces it).
        content_hash=EntryData.build(name=entry.name, kind="LOCAL", install=newer).content_hash[::-1])
    url = f"/admin/market_app/marketentry/{entry.pk}/update/"
    page = root.post(url, {"tool": tool.pk})
    html = page.content.decode()
    assert page.status_code == 200 and CANARY not in html
    rows = diff_rows(html)
    assert rows["args"][2] == "changed" and "weather@1" in rows["args"][0] and "weather@2" in rows["args"][1]
    assert rows["env.WEATHER_API_KEY"] == ("********", "********", "kept")  # a secret is never shown
    assert rows["env.UNITS"] == ("metric", "metric", "kept")
    assert rows["env.LOG_LEVEL"] == ("—", "info", "added")  # a new non-secret variable, unmasked
    assert rows["env.REGION_TOKEN"] == ("—", "********", "added")
    assert 'type="password" name="env__REGION_TOKEN"' in html and "Values the new version needs" in html
    tool.refresh_from_db()
    assert tool.config_version == version and tool.config["args"] == ["-y", "weather@1"]  # nothing applied yet
    # Confirming without the newly required value applies nothing and asks again.
    again = root.post(url, {"tool": tool.pk, "confirm": "yes"})
    assert again.status_code == 200 and 'name="env__REGION_TOKEN"' in again.content.decode()
    tool.refresh_from_db()
    assert tool.config_version == version
    # A value sent without confirming is previewed, never written back into the page when it is secret.
    peek = root.post(url, {"tool": tool.pk, "env__REGION_TOKEN": "rt-secret-1", "env__UNITS": "imperial"})
    html = peek.content.decode()
    assert "rt-secret-1" not in html and 'name="env__REGION_TOKEN"' not in html
    assert diff_rows(html)["env.UNITS"] == ("metric", "imperial", "changed")
    assert '<input type="hidden" name="env__UNITS" value="imperial">' in html  # a plain value rides along
    tool.refresh_from_db()
    assert tool.config_version == version
    done = root.post(url, {"tool": tool.pk, "confirm": "yes", "env__REGION_TOKEN": "rt-secret-1"}, follow=True)
    assert "Updated weather" in done.content.decode()
    tool.refresh_from_db()
    assert tool.config_version == version + 1 and tool.config["args"] == ["-y", "weather@2"]
    assert tool.config["env"] == {"WEATHER_API_KEY": CANARY, "UNITS": "metric", "LOG_LEVEL": "info",
                                  "REGION_TOKEN": "rt-secret-1"}
    assert set(tool.config["not_secret"]) == {"env.UNITS", "env.LOG_LEVEL"}  # shown on the tool's page too
    tool_page = root.get(f"/admin/tools_app/tool/{tool.pk}/change/").content.decode()
    assert "rt-secret-1" not in tool_page and CANARY not in tool_page



def test_entry_page_shows_install_and_variables_as_rows_not_json(root: Client, tenant: Any) -> None:
    source = SourceFactory(tenant=tenant)
    entry = EntryFactory(source=source, name="io.example/weather", kind="LOCAL",
                         install={"command": "npx", "args": ["-y", "weather@1"], "env": {"REGION": "eu"}},
                         required_env=[{"name": "WEATHER_API_KEY", "is_secret": True, "is_required": True,
                                        "description": "Your key"},
                                       {"name": "UNITS", "is_secret": False, "is_required": False,
                                        "default": "metric"}])
    html = root.get(f"/admin/market_app/marketentry/{entry.pk}/change/").content.decode()
    table = html.split('id="toolhub-entry-variables"', 1)[1].split("</table>", 1)[0]
    assert ("<tr><td><code>WEATHER_API_KEY</code></td><td>env</td><td>required</td><td>secret</td><td>-</td>"
            "<td>Your key</td></tr>") in table
    assert "<tr><td><code>UNITS</code></td><td>env</td><td>optional</td><td>shown</td><td>metric</td>" in table
    assert "<dt>Command</dt><dd><code>npx -y weather@1</code></dd>" in html
    assert "<dt>Environment</dt><dd><code>REGION</code></dd>" in html
    assert '"is_secret"' not in html and "[{" not in html  # no raw JSON of the catalog
    remote = EntryFactory(source=source, name="kb", kind="REMOTE",
                          install={"url": "https://kb.example.test/mcp", "transport": "sse"})
    html = root.get(f"/admin/market_app/marketentry/{remote.pk}/change/").content.decode()
    assert "<dt>URL</dt><dd><code>https://kb.example.test/mcp</code></dd>" in html
    assert "None: the entry loads without values." in html
