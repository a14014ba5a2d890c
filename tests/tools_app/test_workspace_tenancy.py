"""Workspaces are keyed by tenant id: a renamed tenant's files never reach a new tenant with the old slug."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tenants_app.models import Role, Tenant
from tools_app.models import Tool, ToolType
from tools_app.wiring.workspaces import workspace_for

pytestmark = pytest.mark.django_db


def _call(client: Any, tenant: Tenant, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name=name)
    if tool.status != "ENABLED":
        resp = client.put(f"/api/v1/tools/{tool.pk}/status/", {"status": "ENABLED"}, format="json")
        assert resp.status_code == 200, resp.content
    resp = client.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": name, "arguments": arguments}, format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def test_renamed_tenant_files_are_not_seen_by_a_new_tenant_with_the_old_slug(
    tenant: Tenant, member_client: Any
) -> None:
    owner = member_client(tenant, Role.OWNER)
    wrote = _call(owner, tenant, "write_file", {"path": "private/plan.txt", "content": "acme secret plan"})
    assert wrote["success"], wrote

    Tenant.objects.filter(pk=tenant.pk).update(slug="acme-renamed")
    renamed = Tenant.objects.get(pk=tenant.pk)
    newcomer = Tenant.objects.create(slug="acme", name="Someone else")
    from tools_app.services.builtins_sync import sync_builtin_tools

    sync_builtin_tools(tenant=newcomer)
    new_owner = member_client(newcomer, Role.OWNER)

    listing = _call(new_owner, newcomer, "list_directory", {"path": ".", "recursive": True, "depth": 3})
    assert listing["success"], listing
    assert "plan.txt" not in json.dumps(listing["data"]) and "private" not in json.dumps(listing["data"])
    read = _call(new_owner, newcomer, "read_file", {"path": "private/plan.txt"})
    assert read["success"] is False and "acme secret plan" not in json.dumps(read)

    # The renamed tenant still has its files, under its id.
    renamed_owner = member_client(renamed, Role.OWNER)
    again = _call(renamed_owner, renamed, "read_file", {"path": "private/plan.txt"})
    assert again["success"] and "acme secret plan" in again["text"], again
    assert workspace_for(renamed) != workspace_for(newcomer)
    assert workspace_for(renamed).name == f"tenant.{renamed.pk}"


def test_migrate_workspaces_moves_the_slug_layout_once(tenant: Tenant, settings: Any) -> None:
    from django.core.management import call_command

    root = settings.TOOLHUB_WORKSPACE_ROOT
    (root / tenant.slug).mkdir()
    (root / tenant.slug / "old.txt").write_text("kept")
    (root / "unknown-slug").mkdir()
    call_command("migrate_workspaces")
    assert (root / f"tenant.{tenant.pk}" / "old.txt").read_text() == "kept"
    assert not (root / tenant.slug).exists() and (root / "unknown-slug").is_dir()
