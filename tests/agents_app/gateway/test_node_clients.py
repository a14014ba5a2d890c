"""The TypeScript SDK client (node) and the MCP Inspector CLI against the gateway on a real uvicorn server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.agents_app.gateway.node_clients import TsClient, ensure_installed, inspector, node_available
from tests.waiting import PROCESS_BOUND_S
from tools_app.models import Approval, ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.real_clients,
    pytest.mark.skipif(not node_available(), reason="node and npm are not installed on this machine"),
]


@pytest.fixture(scope="session")
def node_folder() -> Path:
    return ensure_installed()


@pytest.fixture
def ts(node_folder: Path) -> Iterator[Any]:
    started: list[TsClient] = []

    def start(url: str, token: str, **kw: Any) -> TsClient:
        client = TsClient(node_folder, url, token, **kw)
        started.append(client)
        return client

    yield start
    for client in started:
        client.close()


def _needs_approval(setup: Any) -> None:
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/get_inventory/", {"requires_approval": True},
                           format="json")
    assert resp.status_code == 200, resp.content


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_typescript_client_lists_calls_gets_list_changed_and_hits_an_approval(served: Any, setup: Any, ts: Any,
                                                                               transport: str) -> None:
    """One client process (a node start) and one setup for the checks of a client without elicitation, in order:
    the listing, a call, list_changed, then an approval (held with its id, run once approved)."""
    client = ts(served.endpoint("acme", setup.agent_id), setup.token, transport=transport)
    init = client.next("initialized")
    assert init["server"]["name"] == "toolhub/helper"
    assert init["instructions"] == "Answers stock questions for the warehouse team."
    assert init["capabilities"]["tools"]["listChanged"] is True
    client.send(op="list")
    tools = {t["name"]: t for t in client.next("tools")["tools"]}
    assert set(tools["inventory__get_inventory"]["annotations"]) >= {"title", "readOnlyHint", "destructiveHint"}
    assert "inventory__echo_env" in tools
    client.send(op="call", name="inventory__get_inventory", arguments={"sku": "DEMO-001"})
    result = client.next("result")["result"]
    assert not result.get("isError") and "DEMO-001" in result["content"][0]["text"]
    assert ToolCall.objects.get(function="get_inventory").via == "gateway"

    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/echo_env/", {"enabled": False}, format="json")
    assert resp.status_code == 200
    client.send(op="wait_changed")
    assert client.next("waited")["changed"] is True
    client.send(op="list")
    assert "inventory__echo_env" not in {t["name"] for t in client.next("tools")["tools"]}

    _needs_approval(setup)
    client.send(op="call", name="inventory__get_inventory", arguments={"sku": "DEMO-001"})
    held = client.next("result")["result"]
    assert held["isError"] is True
    approval_id = held["_meta"]["toolhub/refusal"]["approval_id"]
    assert f"approval id {approval_id}" in held["content"][0]["text"]
    assert setup.api.post(f"/api/v1/approvals/{approval_id}/approve/").status_code == 200
    client.send(op="call", name="inventory__get_inventory", arguments={"sku": "DEMO-001"})
    ran = client.next("result")["result"]
    assert not ran.get("isError") and "DEMO-001" in ran["content"][0]["text"]


def test_typescript_client_approves_through_elicitation(served: Any, setup: Any, ts: Any) -> None:
    _needs_approval(setup)
    client = ts(served.endpoint("acme", setup.agent_id), setup.token, elicit=True)
    client.next("initialized")
    client.send(op="call", name="inventory__get_inventory", arguments={"sku": "DEMO-001"})
    asked = client.next("elicit")
    assert "inventory.get_inventory" in asked["message"] and "DEMO-001" in asked["message"]
    result = client.next("result")["result"]
    assert not result.get("isError") and "DEMO-001" in result["content"][0]["text"]
    assert Approval.objects.get().status == "approved"


def test_typescript_client_is_refused_across_tenants(served: Any, setup_undiscovered: Any, ts: Any,
                                                     other_tenant: Any, member_client: Any) -> None:
    stranger = member_client(other_tenant, Role.ADMIN)  # refused before any tool runs: no server started for it
    client = ts(served.endpoint("acme", setup_undiscovered.agent_id), token_for_user(user=stranger.user))
    refused = client.next("initialized")
    assert refused["event"] == "error" and "not_found" in refused["message"]


def test_inspector_cli_lists_calls_hits_an_approval_and_is_refused_across_tenants(
    served: Any, setup: Any, node_folder: Path, other_tenant: Any, member_client: Any
) -> None:
    url = served.endpoint("acme", setup.agent_id)
    listed = inspector(node_folder, url, setup.token, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    names = [t["name"] for t in json.loads(listed.stdout)["tools"]]
    assert "inventory__get_inventory" in names

    called = inspector(node_folder, url, setup.token, "--method", "tools/call", "--tool-name",
                       "inventory__get_inventory", "--tool-arg", "sku=DEMO-001")
    assert called.returncode == 0, called.stderr
    assert "DEMO-001" in json.loads(called.stdout)["content"][0]["text"]

    _needs_approval(setup)
    held = inspector(node_folder, url, setup.token, "--method", "tools/call", "--tool-name",
                     "inventory__get_inventory", "--tool-arg", "sku=DEMO-002")
    assert held.stdout, held.stderr[-3000:]
    body = json.loads(held.stdout)
    assert body["isError"] is True and body["_meta"]["toolhub/refusal"]["approval_id"] == Approval.objects.get().pk

    stranger = token_for_user(user=member_client(other_tenant, Role.ADMIN).user)
    refused = inspector(node_folder, url, stranger, "--method", "tools/list")
    assert refused.returncode != 0
    assert "404" in refused.stdout + refused.stderr


def test_inspector_cli_signs_in_through_toolhubs_authorization_server(
    served: Any, setup: Any, node_folder: Path, tmp_path: Path
) -> None:
    """No token given: the Inspector CLI meets the gateway's 401, discovers Toolhub's authorization server,
    registers, opens "the browser" (a scripted person who signs in and allows), takes the code on its loopback
    callback and calls the agent as that member; the audit row names the Inspector as the client."""
    log = tmp_path / "consents.log"
    opener = tmp_path / "browser.sh"
    opener.write_text(f'#!/bin/sh\nexec {sys.executable} -m tests.agents_app.gateway.consent_browser "$1"\n')
    opener.chmod(0o755)
    env = {**os.environ, "MCP_AUTO_OPEN_ENABLED": "true", "BROWSER": str(opener), "HOME": str(tmp_path),
           "PYTHONPATH": str(settings.BASE_DIR), "TOOLHUB_TEST_MEMBER": setup.api.user.username,
           "TOOLHUB_TEST_CONSENT_LOG": str(log)}
    env.pop("DISPLAY", None)
    called = subprocess.run(
        [str(node_folder / "node_modules" / ".bin" / "mcp-inspector"), "--cli", served.endpoint("acme", setup.agent_id),
         "--transport", "http", "--method", "tools/call", "--tool-name", "inventory__get_inventory",
         "--tool-arg", "sku=DEMO-001"],
        cwd=node_folder, capture_output=True, text=True, timeout=PROCESS_BOUND_S, env=env, stdin=subprocess.DEVNULL)
    assert called.returncode == 0, called.stdout[-2000:] + called.stderr[-3000:]
    assert "DEMO-001" in json.loads(called.stdout)["content"][0]["text"]
    assert log.read_text().split() == ["1", "302"]  # the member was asked once, and allowed
    call = ToolCall.objects.get(function="get_inventory")
    assert (call.actor_id, call.via, call.client) == (setup.api.user.pk, "gateway", "MCP Inspector")
