"""The tool admin's structured config form: generated from the spec, secrets write-only, errors at their fields."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from django.test import Client

from core.secrets import MASK
from tests.factories import TenantFactory, ToolFactory
from tests.fixtures.mcp_servers import MINI
from tools_app import configs
from tools_app.admin.config_form import config_fields
from tools_app.models import Tool, ToolFunction, ToolType

pytestmark = pytest.mark.django_db

ADD = "/admin/tools_app/tool/add/"



def rows(name: str, items: list[tuple[str, str, bool]]) -> dict[str, list[str]]:
    return {f"{name}-key": [k for k, _, _ in items], f"{name}-value": [v for _, v, _ in items],
            f"{name}-secret": ["1" if s else "0" for _, _, s in items]}


def base(tenant: Any, tool_type: str, name: str) -> dict[str, Any]:
    return {"tenant": tenant.pk, "name": name, "description": "", "type": tool_type, "status": "ENABLED",
            "safety": "WRITE", "functions-TOTAL_FORMS": "0", "functions-INITIAL_FORMS": "0"}


def test_every_spec_field_has_a_form_field() -> None:
    for tool_type in ("LOCAL", "REMOTE", "HTTP"):
        names = {d.name for d in configs.describe(tool_type)} - {"not_secret"}
        assert set(config_fields(tool_type)) == {f"{tool_type.lower()}_{n}" for n in names}


def test_create_local_with_a_shown_and_a_secret_env_row(staff: Client, tenant: Any) -> None:
    data = {**base(tenant, "LOCAL", "inv"), "local_command": sys.executable, "local_args": f"{MINI}\n--flag",
            "local_startup_timeout_s": "20", "local_call_timeout_s": "30",
            **rows("local_env", [("CURRENCY", "EUR", False), ("API_KEY", "s3cret-value", True)])}
    response = staff.post(ADD, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    tool = Tool.objects.get(name="inv")
    assert tool.config["args"] == [str(MINI), "--flag"]
    assert tool.config["env"] == {"CURRENCY": "EUR", "API_KEY": "s3cret-value"}
    assert tool.config["not_secret"] == ["env.CURRENCY"]
    assert tool.config["startup_timeout_s"] == 20
    page = staff.get(f"/admin/tools_app/tool/{tool.pk}/change/").content.decode()
    assert 'value="EUR"' in page and "s3cret-value" not in page and f'value="{MASK}"' in page


def test_keep_a_secret_while_changing_a_shown_value(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="remote", config={
        "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer keep-me-123", "X-Tenant": "acme"},
        "not_secret": ["headers.X-Tenant"]})
    data = {**base(tenant, "REMOTE", "remote"), "remote_url": "http://127.0.0.1:9/mcp",
            "remote_transport": "streamable_http", "remote_timeout_s": "30",
            **rows("remote_headers", [("Authorization", MASK, True), ("X-Tenant", "globex", False)])}
    response = staff.post(f"/admin/tools_app/tool/{tool.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    tool.refresh_from_db()
    assert tool.config["headers"] == {"Authorization": "Bearer keep-me-123", "X-Tenant": "globex"}
    assert configs.secret_values("REMOTE", tool.config) == ["Bearer keep-me-123"]


def test_marking_a_stored_secret_shown_needs_its_value_again(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="remote")
    data = {**base(tenant, "REMOTE", "remote"), "remote_url": "http://127.0.0.1:9/mcp",
            "remote_transport": "streamable_http", "remote_timeout_s": "30",
            **rows("remote_headers", [("X-Api-Key", MASK, False)])}
    page = staff.post(f"/admin/tools_app/tool/{tool.pk}/change/", data).content.decode()
    assert "marked not secret" in page and "factory-secret" not in page
    tool.refresh_from_db()
    assert tool.config["headers"] == {"X-Api-Key": "factory-secret"}


def test_failed_save_keeps_typed_values_and_puts_the_error_at_its_field(staff: Client, tenant: Any) -> None:
    data = {**base(tenant, "HTTP", "weather"), "http_method": "POST", "http_url": "ftp://example.test/x",
            "http_body": '{"city": "${input.city}"}', "http_timeout_s": "12",
            **rows("http_headers", [("X-Shown", "visible-value", False)]),
            **rows("http_secrets", [("token", "typed-token-1", True)])}
    response = staff.post(ADD, data)
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert "http_url" in form.errors and "http://" in form.errors["http_url"][0]
    page = response.content.decode()
    for typed in ('value="ftp://example.test/x"', 'value="visible-value"', "${input.city}", 'value="12"',
                  'value="weather"'):
        assert typed in page, typed
    assert not Tool.objects.filter(name="weather").exists()


def test_missing_required_field_is_named_at_the_field(staff: Client, tenant: Any) -> None:
    response = staff.post(ADD, {**base(tenant, "LOCAL", "nocmd"), "local_args": "x"})
    assert response.status_code == 200
    assert "local_command" in response.context["adminform"].form.errors


def test_raw_json_advanced_mode_keeps_masks_and_reports_errors_there(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="remote")
    url = f"/admin/tools_app/tool/{tool.pk}/change/"
    page = staff.get(url).content.decode()
    assert "factory-secret" not in page and "&quot;X-Api-Key&quot;: &quot;********&quot;" in page
    data = {**base(tenant, "REMOTE", "remote"), "config_advanced": "on",
            "config_json": '{"url": "http://127.0.0.1:9/mcp", "headers": {"X-Api-Key": "********"}, "timeout_s": 5}'}
    assert staff.post(url, data).status_code == 302
    tool.refresh_from_db()
    assert tool.config["headers"] == {"X-Api-Key": "factory-secret"} and tool.config["timeout_s"] == 5
    bad = staff.post(url, {**data, "config_json": '{"url": "http://127.0.0.1:9/mcp", "nope": 1}'})
    assert "nope" in bad.context["adminform"].form.errors["config_json"][0]


def test_builtin_tools_show_no_config_form(staff: Client, tenant: Any) -> None:
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="read_file")
    page = staff.get(f"/admin/tools_app/tool/{tool.pk}/change/").content.decode()
    assert "Configured by the built-in registry" in page and 'name="local_command"' not in page


def test_other_tenants_tool_pages_are_404(staff: Client, tenant: Any) -> None:
    theirs = ToolFactory(tenant=TenantFactory(slug="globex"), name="theirs")
    for suffix in ("change/", "try/", "changes/"):
        assert staff.get(f"/admin/tools_app/tool/{theirs.pk}/{suffix}").status_code in (302, 404), suffix
    for suffix in ("test/", "refresh/", "status/"):
        assert staff.post(f"/admin/tools_app/tool/{theirs.pk}/{suffix}", {"status": "DISABLED"}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == "ENABLED"


@pytest.mark.django_db(transaction=True)
def test_page_actions_test_refresh_try_and_approve_with_diff(staff: Client, tenant: Any) -> None:
    from tests.fixtures.mcp_servers import CHANGING
    from tools_app.wiring.pool import pool
    from tools_app.wiring.workspaces import workspace_for

    state = workspace_for(tenant) / "state"  # the sandboxed server writes only in its workspace
    data = {**base(tenant, "LOCAL", "changing"), "local_command": sys.executable, "local_args": str(CHANGING),
            **rows("local_env", [("TOOLHUB_FIXTURE_STATE", str(state), False)])}
    try:
        assert staff.post(ADD, data).status_code == 302
        tool = Tool.objects.get(tenant=tenant, name="changing")
        page = f"/admin/tools_app/tool/{tool.pk}/change/"
        tested = staff.post(f"/admin/tools_app/tool/{tool.pk}/test/", follow=True).content.decode()
        assert "Test OK in" in tested and "lookup" in tested
        staff.post(f"/admin/tools_app/tool/{tool.pk}/refresh/")  # generation 2 (first discovery: trusted)
        refreshed = staff.post(f"/admin/tools_app/tool/{tool.pk}/refresh/", follow=True).content.decode()
        assert "changed 1" in refreshed  # generation 3: lookup gains `warehouse`
        body = staff.get(page).content.decode()
        assert "awaiting approval" in body and "Review 1 change" in body
        tried = staff.post(f"/admin/tools_app/tool/{tool.pk}/try/", {"function": "lookup", "arg:sku": "A-1"})
        assert tried.context["result"]["error_code"] == "DISABLED" or not tried.context["result"]["success"]
        review = staff.get(f"/admin/tools_app/tool/{tool.pk}/changes/").content.decode()
        assert 'class="diff-add">+' in review and "warehouse" in review
        approved = staff.post(f"/admin/tools_app/tool/{tool.pk}/changes/", {"function": "lookup"}, follow=True)
        assert "Approved changing.lookup" in approved.content.decode()
        ok = staff.post(f"/admin/tools_app/tool/{tool.pk}/try/", {"function": "lookup", "arg:sku": "A-1"})
        assert ok.context["result"]["success"], ok.context["result"]
        assert ok.context["result"]["cost_ms"] >= 0 and ok.context["result"]["call_id"]
    finally:
        pool().close_all()


def test_changelist_queries_do_not_grow_with_tools(staff: Client, tenant: Any) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert staff.get("/admin/tools_app/tool/").status_code == 200
        return len(ctx.captured_queries)

    def add(n: int, start: int) -> None:
        Tool.objects.bulk_create([Tool(tenant=tenant, name=f"bulk-{i}", type=ToolType.REMOTE, config={
            "url": "http://127.0.0.1:9/mcp"}) for i in range(start, start + n)], batch_size=1000)

    def add_copies(n: int, start: int) -> None:
        """n rows like `bulk-0` but for their name (bulk-<start>...), in one INSERT ... SELECT: building 10,000 ORM
        objects to bulk_create took most of this module's CPU (~4 s), and what is counted here is the changelist's
        queries over the rows, not how the rows were written. The write drops the tenant's snapshots as
        bulk_create does."""
        from core import hotcache

        q = connection.ops.quote_name
        table, pk = q(Tool._meta.db_table), q(str(Tool._meta.pk.column))  # the stubs allow None; a concrete field has one
        columns = [q(str(f.column)) for f in Tool._meta.concrete_fields if not f.primary_key and f.name != "name"]
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH RECURSIVE n(i) AS (SELECT %s UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
                f"INSERT INTO {table} ({q('name')}, {', '.join(columns)}) "
                f"SELECT 'bulk-' || n.i, {', '.join(f'{table}.{c}' for c in columns)} FROM {table}, n "
                f"WHERE {table}.{pk} = %s",
                [start, start + n - 1, Tool.objects.get(tenant=tenant, name="bulk-0").pk])
        hotcache.bump_tenant(tenant.pk)

    add(10, 0)
    small = count()
    add_copies(9_990, 10)
    assert Tool.objects.get(tenant=tenant, name="bulk-9999").config == {"url": "http://127.0.0.1:9/mcp"}
    assert Tool.objects.filter(tenant=tenant).count() >= 10_000
    assert count() == small


def test_tenant_admin_sees_nothing_of_another_tenant(tenant: Any) -> None:
    from django.core.management import call_command

    other = TenantFactory(slug="globex")
    mine = ToolFactory(tenant=tenant, name="mine-tool")
    theirs = ToolFactory(tenant=other, name="theirs-tool", description="globex-only")
    ToolFunction.objects.create(tool=mine, name="mine_fn", schema_hash="a", input_schema={})
    ToolFunction.objects.create(tool=theirs, name="theirs_fn", schema_hash="b", input_schema={})
    call_command("add_member", "acme", "tina2", "--role", "admin", "--password", "pw")
    client = Client()
    assert client.login(username="tina2", password="pw")
    pages = {
        "/admin/tools_app/tool/": "mine-tool",
        "/admin/tools_app/tool/?q=tool": "mine-tool",
        "/admin/tools_app/toolfunction/": "mine_fn",
        f"/admin/tools_app/tool/{mine.pk}/try/": "mine_fn",
        f"/admin/tools_app/tool/{mine.pk}/change/": "mine_fn",
        "/admin/autocomplete/?app_label=tools_app&model_name=toolfunction&field_name=tool&term=tool": "mine-tool",
    }
    for url, expected in pages.items():
        resp = client.get(url)
        body = resp.content.decode()
        assert resp.status_code == 200, url
        assert expected in body, url
        for leak in ("theirs", "globex"):
            assert leak not in body, (url, leak)
    # Filter parameters naming the other tenant or its tool show nothing of it.
    for url in (f"/admin/tools_app/tool/?tenant__id__exact={other.pk}",
                f"/admin/tools_app/toolfunction/?tool__tenant__id__exact={other.pk}",
                f"/admin/tools_app/toolfunction/?tool__id__exact={theirs.pk}"):
        body = client.get(url, follow=True).content.decode()
        assert "theirs" not in body, url


def test_function_switch_on_the_tool_page(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="remote")
    fn = ToolFunction.objects.create(tool=tool, name="lookup", schema_hash="a", approved_hash="a", input_schema={})
    page = staff.get(f"/admin/tools_app/tool/{tool.pk}/change/").content.decode()
    assert 'form="toolhub-fn-form" name="toggle" value="lookup:0"' in page and 'id="toolhub-fn-form"' in page
    done = staff.post(f"/admin/tools_app/tool/{tool.pk}/function/", {"toggle": "lookup:0"}, follow=True)
    assert "lookup is now disabled" in done.content.decode()
    fn.refresh_from_db()
    assert fn.enabled is False
    assert 'value="lookup:1"' in done.content.decode()
    missing = staff.post(f"/admin/tools_app/tool/{tool.pk}/function/", {"toggle": "nope:1"}, follow=True)
    assert "has no function" in missing.content.decode()


def test_help_texts_keep_their_placeholders_and_timeouts_read_as_typed(staff: Client, tenant: Any) -> None:
    page = staff.get(ADD).content.decode()
    # Spec help is text: `<command>` is shown, never swallowed as an HTML tag.
    assert "<code>&lt;command&gt; --version</code>" in page and "Run ` --version`" not in page
    tool = ToolFactory(tenant=tenant, name="local-tool", type="LOCAL", config={
        "command": sys.executable, "args": [str(MINI)], "startup_timeout_s": 20, "call_timeout_s": 7.5})
    page = staff.get(f"/admin/tools_app/tool/{tool.pk}/change/").content.decode()
    assert 'name="local_startup_timeout_s" value="20"' in page and 'value="20.0"' not in page
    assert 'name="local_call_timeout_s" value="7.5"' in page


def test_enable_messages_name_the_tool(staff: Client, tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="execute_thing", status="DISABLED")
    done = staff.post(f"/admin/tools_app/tool/{tool.pk}/status/", {"status": "ENABLED"}, follow=True)
    assert "Tool execute_thing is now enabled." in done.content.decode()
