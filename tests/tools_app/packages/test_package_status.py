"""The tool detail's `package` block and Test's typed errors where no registry is needed (no network)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def create(api: Any, name: str, command: str, args: list[str]) -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": "LOCAL", "config": {"command": command, "args": args}},
                    format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def test_a_package_runner_tool_shows_its_package_before_the_install(api: Any) -> None:
    tool_id = create(api, "mem", "npx", ["-y", "@modelcontextprotocol/server-memory@2026.8.31"])
    package = api.get(f"/api/v1/tools/{tool_id}/").json()["package"]
    assert package == {"manager": "npm", "name": "@modelcontextprotocol/server-memory", "version": None,
                       "requested": "2026.8.31", "status": "pending", "size": None, "installed_at": None,
                       "error": None, "serving": None}


def test_a_plain_command_has_no_package(api: Any) -> None:
    tool_id = create(api, "plain", "python3", ["-m", "server"])
    assert api.get(f"/api/v1/tools/{tool_id}/").json()["package"] is None


def test_an_uninstallable_runner_line_fails_test_at_once_saying_why(api: Any) -> None:
    tool_id = create(api, "shell", "npx", ["-c", "echo hi"])
    package = api.get(f"/api/v1/tools/{tool_id}/").json()["package"]
    assert package["status"] == "failed" and package["error"]["code"] == "package_not_installable"
    tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert not tested["ok"] and tested["error"]["code"] == "package_not_installable", tested
    assert "sandbox without network" in tested["error"]["message"]


def test_a_registry_the_operator_refused_fails_test_before_any_request(api: Any, settings: Any) -> None:
    settings.TOOLHUB_PACKAGE_REGISTRY_HOSTS = ["mirror.internal.invalid"]
    tool_id = create(api, "time", "uvx", ["mcp-server-time"])
    tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert tested["error"]["code"] == "package_registry_refused", tested
    assert "pypi.org" in tested["error"]["message"] and "mirror.internal.invalid" in tested["error"]["message"]
    package = api.get(f"/api/v1/tools/{tool_id}/").json()["package"]
    assert package["status"] == "failed" and package["error"]["code"] == "package_registry_refused"
