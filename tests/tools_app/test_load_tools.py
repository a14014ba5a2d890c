"""`manage.py load_tools <dir>`: one tool per YAML file, idempotent, secrets never read from the files."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tenants_app.models import Role
from tools_app.models import Tool, ToolStatus

pytestmark = pytest.mark.django_db

INVENTORY = """\
name: inventory
description: Stock levels
type: LOCAL
safety: READ_ONLY
config:
  command: python3
  args: [-m, inventory]
  env:
    INVENTORY_TOKEN: tok-from-the-file-8812
"""

WEATHER = """\
name: weather
type: HTTP
description: Weather by city
requires_approval: false
config:
  method: GET
  url: http://127.0.0.1:9/weather?city=${input.city}
  input_schema:
    type: object
    properties: {city: {type: string}}
    required: [city]
"""


@pytest.fixture
def owner(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.OWNER)


def load(folder: Path, tenant: Any, *extra: str) -> dict[str, Any]:
    out = StringIO()
    call_command("load_tools", str(folder), "--tenant", tenant.slug, "--json", *extra, stdout=out, stderr=StringIO())
    return dict(json.loads(out.getvalue()))


def test_loads_one_tool_per_file_without_reading_secrets(tmp_path: Path, tenant: Any, owner: Any) -> None:
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    (tmp_path / "weather.yml").write_text(WEATHER)
    (tmp_path / "notes.txt").write_text("ignored: not YAML")
    report = load(tmp_path, tenant)
    assert sorted(r["name"] for r in report["created"]) == ["inventory", "weather"], report
    inventory = Tool.objects.get(tenant=tenant, name="inventory")
    assert inventory.config["env"] == {"INVENTORY_TOKEN": ""}  # the key, never the file's value
    assert inventory.status == ToolStatus.DISABLED  # until an admin sets the secret
    assert [r["needs_secrets"] for r in report["created"] if r["name"] == "inventory"] == [["env.INVENTORY_TOKEN"]]
    assert "tok-from-the-file-8812" not in json.dumps(report)
    weather = Tool.objects.get(tenant=tenant, name="weather")
    assert weather.status == ToolStatus.ENABLED and weather.config["url"].endswith("city=${input.city}")


def test_loading_again_changes_nothing_and_keeps_stored_secrets(tmp_path: Path, tenant: Any, owner: Any) -> None:
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    load(tmp_path, tenant)
    tool = Tool.objects.get(tenant=tenant, name="inventory")
    resp = owner.patch(f"/api/v1/tools/{tool.pk}/", {"config": {"command": "python3", "args": ["-m", "inventory"],
                                                                "env": {"INVENTORY_TOKEN": "set-by-admin"}},
                                                     "status": "ENABLED"}, format="json")
    assert resp.status_code == 200, resp.content
    tool.refresh_from_db()
    version = tool.config_version

    again = load(tmp_path, tenant)
    assert (again["created"], again["updated"], [r["name"] for r in again["unchanged"]]) == ([], [], ["inventory"])
    tool.refresh_from_db()
    assert tool.config_version == version and tool.config["env"] == {"INVENTORY_TOKEN": "set-by-admin"}

    (tmp_path / "inventory.yaml").write_text(INVENTORY.replace("Stock levels", "Stock levels per SKU")
                                             .replace("[-m, inventory]", "[-m, inventory, --fast]"))
    changed = load(tmp_path, tenant)
    assert [(r["name"], r["changed"]) for r in changed["updated"]] == [("inventory", ["config", "description"])]
    tool.refresh_from_db()
    assert tool.description == "Stock levels per SKU" and tool.config["args"] == ["-m", "inventory", "--fast"]
    assert tool.config["env"] == {"INVENTORY_TOKEN": "set-by-admin"}  # the file's value still never read
    assert tool.status == ToolStatus.ENABLED  # the admin's choice stays


@pytest.mark.parametrize(
    ("text", "code", "fragment"),
    [
        ("base: &b {command: x}\nname: a\ntype: LOCAL\nconfig: *b\n", "unreadable", "anchors"),
        ("name: a\ntype: BUILTIN\n", "invalid_type", "accepted: LOCAL, REMOTE, HTTP"),
        ("name: a\ntype: LOCAL\ncolour: red\nconfig: {command: x}\n", "unknown_field", "colour"),
        ("- a\n- b\n", "invalid_document", "one mapping"),
        ("name: a\ntype: LOCAL\nconfig: {}\n", "invalid_config", "command"),
    ],
)
def test_bad_files_are_named_and_the_rest_loads(tmp_path: Path, tenant: Any, owner: Any, text: str, code: str,
                                                fragment: str) -> None:
    (tmp_path / "bad.yaml").write_text(text)
    (tmp_path / "weather.yaml").write_text(WEATHER)
    err = StringIO()
    with pytest.raises(CommandError, match="1 file"):
        call_command("load_tools", str(tmp_path), "--tenant", tenant.slug, stdout=StringIO(), stderr=err)
    assert f"bad.yaml: {code}" in err.getvalue() and fragment in err.getvalue(), err.getvalue()
    assert Tool.objects.filter(tenant=tenant, name="weather").exists()
    assert not Tool.objects.filter(tenant=tenant, name="a").exists()


def test_needs_an_admin_to_act_as(tmp_path: Path, tenant: Any) -> None:
    (tmp_path / "weather.yaml").write_text(WEATHER)
    with pytest.raises(CommandError, match="no owner or admin"):
        load(tmp_path, tenant)
