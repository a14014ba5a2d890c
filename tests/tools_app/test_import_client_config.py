"""`POST /tools/import/` of client config files: disabled, autoApprove (tenant policy), timeout, references."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mcp_servers import MINI
from tools_app.models import Tool
from tools_app.wiring.pool import pool

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "client_configs"


def doc(name: str) -> dict[str, Any]:
    return dict(json.loads((CONFIGS / name).read_text()))


def import_(api: Any, document: Any) -> dict[str, Any]:
    resp = api.post("/api/v1/tools/import/", document, format="json")
    assert resp.status_code in (201, 400), resp.content
    return dict(resp.json())


@pytest.mark.django_db
def test_cline_disabled_and_timeout_are_mapped(api: Any) -> None:
    result = import_(api, doc("cline.json"))
    rows = {r["name"]: r for r in result["created"]}
    assert rows["weather"]["status"] == "DISABLED" and rows["fetch"]["status"] == "ENABLED"
    weather, fetch = Tool.objects.get(name="weather"), Tool.objects.get(name="fetch")
    assert weather.config["call_timeout_s"] == 120 and fetch.config["call_timeout_s"] == 60
    assert weather.config["env"] == {"OPENWEATHER_API_KEY": "k-1"}
    assert "k-1" not in json.dumps(result)


@pytest.mark.django_db
def test_auto_approve_is_ignored_unless_the_tenant_allows_it(api: Any, tenant: Any) -> None:
    result = import_(api, doc("cline.json"))
    row = next(r for r in result["created"] if r["name"] == "weather")
    assert row["auto_approve"] == [] and "autoApprove ignored" in row["notes"][0]
    assert Tool.objects.get(name="weather").auto_approve_functions == []

    tenant.allow_imported_auto_approve = True
    tenant.save()
    Tool.objects.all().delete()
    row = next(r for r in import_(api, doc("cline.json"))["created"] if r["name"] == "weather")
    assert row["auto_approve"] == ["get_forecast", "get_alerts"] and row["notes"] == []
    assert Tool.objects.get(name="weather").auto_approve_functions == ["get_forecast", "get_alerts"]


@pytest.mark.django_db(transaction=True)
def test_auto_approved_function_skips_approval_after_discovery(api: Any, tenant: Any) -> None:
    tenant.allow_imported_auto_approve = True
    tenant.save()
    config = {"mcpServers": {"inventory": {"command": sys.executable, "args": [str(MINI)],
                                           "autoApprove": ["get_inventory"], "timeout": 20}}}
    tool_id = import_(api, config)["created"][0]["id"]
    try:
        assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"] is True
        functions = {f["name"]: f for f in api.get(f"/api/v1/tools/{tool_id}/").json()["functions"]}
        assert functions["get_inventory"]["requires_approval"] is False
        # as in the client the config came from: every function not listed asks first
        assert functions["whoami"]["requires_approval"] is True

        def invoke(function: str, arguments: dict[str, Any]) -> dict[str, Any]:
            body = {"function": function, "arguments": arguments}
            return dict(api.post(f"/api/v1/tools/{tool_id}/invoke/", body, format="json").json())

        assert invoke("get_inventory", {"sku": "DEMO-001"})["success"] is True
        assert invoke("whoami", {})["error_code"] == "APPROVAL_REQUIRED"
    finally:
        pool().close_all()


@pytest.mark.django_db
def test_vscode_inputs_are_asked_for_never_kept_as_text(api: Any) -> None:
    result = import_(api, doc("vscode.json"))
    rows = {r["name"]: r for r in result["created"]}
    assert set(rows) == {"perplexity", "files", "github", "old"}
    needs = rows["perplexity"]["needs_variables"]
    assert [(n["name"], n["source"], n["is_secret"], n["used_in"]) for n in needs] == [
        ("perplexity-key", "input", True, ["env.PERPLEXITY_API_KEY"])]
    assert rows["perplexity"]["status"] == "DISABLED" and rows["files"]["status"] == "DISABLED"
    assert rows["github"]["status"] == "ENABLED"
    assert Tool.objects.get(name="old").config["transport"] == "sse"
    stored = [t.config for t in Tool.objects.all()]
    assert "${" not in json.dumps(stored)
    assert Tool.objects.get(name="perplexity").config["env"] == {"PERPLEXITY_API_KEY": ""}


@pytest.mark.django_db
def test_values_sent_beside_the_config_fill_the_references(api: Any) -> None:
    document = {**doc("vscode.json"), "variables": {"perplexity-key": "pplx-canary-1", "workspace": "/srv/data"}}
    result = import_(api, document)
    rows = {r["name"]: r for r in result["created"]}
    assert rows["perplexity"]["status"] == "ENABLED" and rows["perplexity"]["needs_variables"] == []
    assert Tool.objects.get(name="perplexity").config["env"] == {"PERPLEXITY_API_KEY": "pplx-canary-1"}
    assert Tool.objects.get(name="files").config["args"][-1] == "/srv/data"
    assert "pplx-canary-1" not in json.dumps(result)


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["claude_desktop.json", "cursor.json", "cline.json", "windsurf.json", "vscode.json"])
def test_every_client_file_imports_without_errors(api: Any, name: str) -> None:
    result = import_(api, doc(name))
    assert result["errors"] == [] and len(result["created"]) == len(
        doc(name).get("mcpServers") or doc(name)["servers"])
    cursor_like = Tool.objects.filter(name="legacy-sse").first()
    if cursor_like is not None:
        assert cursor_like.config["transport"] == "sse"


# --- real third-party servers (PyPI / npm), installed by tests.fixtures.real_servers ---------------------

@pytest.mark.real_servers
@pytest.mark.django_db(transaction=True)
def test_real_servers_imported_from_a_cline_config_honour_auto_approve(api: Any, tenant: Any) -> None:
    from tests.fixtures import real_servers as rs

    rs.require("npm")
    tenant.allow_imported_auto_approve = True
    tenant.save()
    config = {"mcpServers": {"everything": {"command": rs.node(), "args": [rs.npm_entry(rs.EVERYTHING), "stdio"],
                                            "autoApprove": ["echo"], "timeout": 45, "disabled": False}}}
    row = import_(api, config)["created"][0]
    try:
        assert row["status"] == "ENABLED" and row["auto_approve"] == ["echo"]
        assert Tool.objects.get(pk=row["id"]).config["call_timeout_s"] == 45
        assert api.post(f"/api/v1/tools/{row['id']}/refresh/").json()["ok"] is True
        functions = {f["name"]: f["requires_approval"] for f in api.get(f"/api/v1/tools/{row['id']}/").json()["functions"]}
        assert functions.pop("echo") is False and functions and all(v is True for v in functions.values())

        def invoke(function: str, arguments: dict[str, Any]) -> dict[str, Any]:
            body = {"function": function, "arguments": arguments}
            return dict(api.post(f"/api/v1/tools/{row['id']}/invoke/", body, format="json").json())

        assert invoke("echo", {"message": "hi"})["success"] is True
        assert functions["get-tiny-image"] is True  # takes no arguments: only approval stands in its way
        assert invoke("get-tiny-image", {})["error_code"] == "APPROVAL_REQUIRED"
    finally:
        pool().close_all()


@pytest.mark.real_servers
@pytest.mark.django_db(transaction=True)
def test_real_server_from_a_vscode_config_gets_its_input_value(api: Any) -> None:
    from tests.fixtures import real_servers as rs

    rs.require("py")
    config = {"inputs": [{"type": "promptString", "id": "tz", "description": "Time zone"}],
              "servers": {"time": {"type": "stdio", "command": rs.py_bin("mcp-server-time"),
                                   "args": ["--local-timezone=${input:tz}"]}},
              "variables": {"tz": "Europe/Paris"}}
    row = import_(api, config)["created"][0]
    try:
        assert row["status"] == "ENABLED" and row["needs_variables"] == []
        assert Tool.objects.get(pk=row["id"]).config["args"] == ["--local-timezone=Europe/Paris"]
        tested = api.post(f"/api/v1/tools/{row['id']}/test/").json()
        assert tested["ok"] is True, tested
        assert "get_current_time" in {f["name"] for f in tested["functions"]}
    finally:
        pool().close_all()


@pytest.mark.django_db
def test_import_refuses_a_command_that_serves_http_with_a_typed_code(api: Any) -> None:
    document = {"mcpServers": {"listener": {"command": "node", "args": ["server.js"], "type": "sse",
                                            "url": "http://127.0.0.1:8000/sse"}}}
    body = import_(api, document)
    assert body["created"] == []
    assert [(e["name"], e["code"]) for e in body["errors"]] == [("listener", "http_listener_package")]
    assert "runs its own HTTP listener (sse at http://127.0.0.1:8000/sse)" in body["errors"][0]["message"]
    assert api.get("/api/v1/tools/?name=listener").json()["count"] == 0
