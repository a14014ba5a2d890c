"""The TypeScript SDK's OAuth client (node) against a real Toolhub: discovery from the 401, registration, the
scripted person's sign-in and consent, the code exchanged, then a listing and a call as that member."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests import loopback
from tests.agents_app.gateway.node_clients import ensure_installed, node_available
from tests.agents_app.gateway.oauth_support import REDIRECT_URI, consent_as, redirect_params
from tools_app.models import ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.real_clients,
    pytest.mark.skipif(not node_available(), reason="node and npm are not installed on this machine"),
]


def _next(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"the client ended: {proc.stderr.read() if proc.stderr else ''}"
    event: dict[str, Any] = json.loads(line)
    return event


def test_the_typescript_sdk_signs_in_and_calls_as_the_member(served: Any, setup: Any) -> None:
    folder = ensure_installed()
    url = served.endpoint("acme", setup.agent_id)
    proc = subprocess.Popen(["node", str(folder / "oauth_client.mjs"), url, REDIRECT_URI], cwd=folder,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    try:
        asked = _next(proc)
        assert asked["event"] == "authorize", asked
        assert asked["url"].startswith(f"{served.base_url}/oauth/authorize/")
        resp, browser = consent_as(asked["url"], setup.api.user.username)
        assert browser.consent_pages
        proc.stdin.write(json.dumps({"code": redirect_params(resp)["code"]}) + "\n")
        proc.stdin.flush()
        proc.stdin.write(json.dumps({"name": "inventory__get_inventory", "arguments": {"sku": "DEMO-001"}}) + "\n")
        proc.stdin.flush()
        done = _next(proc)
        assert done["event"] == "done", done
    finally:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert "inventory__get_inventory" in done["tools"]
    assert not done["result"].get("isError") and "DEMO-001" in done["result"]["content"][0]["text"]
    call = ToolCall.objects.get(function="get_inventory")
    assert (call.via, call.client, call.actor_id) == ("gateway", "TypeScript SDK test client", setup.api.user.pk)
    # Its token is bound to this agent: refused at the management API.
    api = loopback.get(f"{served.base_url}/api/v1/agents/",
                       headers={"Authorization": f"Bearer {done['access_token']}", "X-Tenant": "acme"})
    assert api.status_code in (401, 403)
