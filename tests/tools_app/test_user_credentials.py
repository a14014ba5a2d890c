"""Per-user credentials: a tool declares `user_secrets`; each member sets their own; calls act as them.

The servers are real (the leaky fixture over stdio and streamable HTTP); its `fingerprint` function names which
secret reached it (a hash) without echoing it, so the test can tell whose value a call carried.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tenants_app.models import Role
from tests.fixtures.mcp_servers import LEAKY, http_server
from tools_app.models import Tool, ToolCall, UserCredential

pytestmark = pytest.mark.django_db(transaction=True)

ALICE_KEY = "alice-personal-key-7Qx9"
BOB_KEY = "bob-personal-key-3Zr1"


def fingerprint_of(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def leaky_url() -> Iterator[str]:
    with http_server(LEAKY) as url:
        yield url


def make(api: Any, name: str, tool_type: str, config: dict[str, Any]) -> int:
    """Create the tool and discover it as its creator (who has not set their own keys yet)."""
    resp = api.post("/api/v1/tools/", {"name": name, "type": tool_type, "config": config}, format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    refreshed = api.post(f"/api/v1/tools/{tool_id}/refresh/").json()
    assert refreshed["ok"] and "fingerprint" in [f["name"] for f in refreshed["functions"]], refreshed
    return tool_id


def invoke(client: Any, tool_id: int, function: str) -> dict[str, Any]:
    resp = client.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": function, "arguments": {}}, format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def put(client: Any, tool_id: int, values: Any) -> Any:
    return client.put(f"/api/v1/tools/{tool_id}/my-credentials/", {"values": values}, format="json")


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
def test_each_member_calls_with_their_own_key(api: Any, member_client: Any, tenant: Any, leaky_url: str,
                                              transport: str) -> None:
    tool_id, key = personal_tool(api, transport, leaky_url)
    bob = member_client(tenant, Role.MEMBER)
    # Not set yet: a typed refusal naming the missing key, and the server's health is not blamed for it.
    missing = invoke(bob, tool_id, "fingerprint")
    assert missing["success"] is False and missing["error_code"] == "CREDENTIALS_REQUIRED", missing
    assert key in missing["error"] and "my-credentials" in missing["error"]
    assert missing["credentials"] == {"keys": [key], "set": [], "missing": [key], "complete": False,
                                      "updated_at": None}
    assert Tool.objects.get(pk=tool_id).consecutive_failures == 0

    assert put(api, tool_id, {key: ALICE_KEY}).status_code == 200
    stated = put(bob, tool_id, {key: BOB_KEY})
    assert stated.status_code == 200 and stated.json()["set"] == [key] and stated.json()["complete"] is True
    assert BOB_KEY not in stated.content.decode()
    # Each call carries its caller's own value (two sessions: one member's never serves the other).
    for _ in range(2):
        assert invoke(api, tool_id, "fingerprint")["text"] == fingerprint_of(ALICE_KEY)
        assert invoke(bob, tool_id, "fingerprint")["text"] == fingerprint_of(BOB_KEY)
    # A server that echoes it has every encoded form masked, for every member's value.
    leaked = invoke(bob, tool_id, "leak")
    assert leaked["success"] and "********" in leaked["text"] and BOB_KEY not in str(leaked)
    # A new value takes effect on the next call.
    assert put(bob, tool_id, {key: BOB_KEY + "-rotated"}).status_code == 200
    assert invoke(bob, tool_id, "fingerprint")["text"] == fingerprint_of(BOB_KEY + "-rotated")
    # Clearing it brings the refusal back.
    assert bob.delete(f"/api/v1/tools/{tool_id}/my-credentials/").status_code == 204
    assert invoke(bob, tool_id, "fingerprint")["error_code"] == "CREDENTIALS_REQUIRED"
    assert invoke(api, tool_id, "fingerprint")["text"] == fingerprint_of(ALICE_KEY)
    assert_stored_nowhere(api, tool_id, (ALICE_KEY, BOB_KEY, BOB_KEY + "-rotated"))


def personal_tool(api: Any, transport: str, leaky_url: str) -> tuple[int, str]:
    """A tool whose one key each member sets for themselves: (its id, the key)."""
    if transport == "stdio":
        return make(api, "personal", "LOCAL", {"command": sys.executable, "args": [str(LEAKY)],
                                               "user_secrets": ["LEAK"]}), "LEAK"
    return make(api, "personal", "REMOTE", {"url": leaky_url, "user_secrets": ["X-Leak"]}), "X-Leak"


def assert_stored_nowhere(api: Any, tool_id: int, values: tuple[str, ...]) -> None:
    """No value in the audit, the detail, or the stored bytes."""
    audit = str(list(ToolCall.objects.values()))
    detail = api.get(f"/api/v1/tools/{tool_id}/").content.decode()
    from django.db import connection as db

    with db.cursor() as cur:
        cur.execute("SELECT values FROM tools_app_usercredential" if db.vendor == "postgresql"
                    else "SELECT \"values\" FROM tools_app_usercredential")
        raw = str(cur.fetchall())
    for value in values:
        assert value not in audit and value not in detail and value not in raw


def test_my_credentials_state_and_bad_input(api: Any, member_client: Any, tenant: Any, other_api: Any,
                                            leaky_url: str) -> None:
    tool_id = make(api, "keyed", "REMOTE", {"url": leaky_url, "user_secrets": ["X-Leak", "X-Team"]})
    assert api.get(f"/api/v1/tools/{tool_id}/").json()["my_credentials"] == {
        "keys": ["X-Leak", "X-Team"], "set": [], "missing": ["X-Leak", "X-Team"], "complete": False,
        "updated_at": None}
    assert put(api, tool_id, {"X-Leak": ALICE_KEY}).json()["missing"] == ["X-Team"]
    # Keys left out keep their values; GET names what is set and never a value.
    assert put(api, tool_id, {"X-Team": "blue"}).json()["complete"] is True
    got = api.get(f"/api/v1/tools/{tool_id}/my-credentials/")
    assert got.json()["set"] == ["X-Leak", "X-Team"] and ALICE_KEY not in got.content.decode()

    unknown = put(api, tool_id, {"X-Other": "x"})
    assert unknown.status_code == 400
    error = unknown.json()["error"]
    assert error["code"] == "invalid"
    assert error["details"] == {"field": "values", "unknown": ["X-Other"], "accepted": ["X-Leak", "X-Team"]}
    for bad, field in ((["list"], "values"), ({}, "values"), ({"X-Leak": ""}, "values.X-Leak"),
                       ({"X-Leak": "two\nlines-" + ALICE_KEY}, "values.X-Leak")):
        resp = put(api, tool_id, bad)
        assert resp.status_code == 400 and resp.json()["error"]["details"]["field"] == field, resp.content
        assert ALICE_KEY not in resp.content.decode()
    assert UserCredential.objects.get(tool_id=tool_id).values == {"X-Leak": ALICE_KEY, "X-Team": "blue"}
    # A tool without per-user keys says so; another tenant cannot see the tool at all.
    plain = make(api, "plain", "REMOTE", {"url": leaky_url})
    refused = put(api, plain, {"X": "y"})
    assert refused.status_code == 400 and refused.json()["error"]["details"]["field"] == "config.user_secrets"
    assert put(other_api, tool_id, {"X-Leak": "z"}).status_code == 404
    # A viewer cannot call, so has no keys to set.
    viewer = member_client(tenant, Role.VIEWER)
    assert put(viewer, tool_id, {"X-Leak": "v", "X-Team": "v"}).status_code == 403


def test_config_refuses_bad_user_secrets(api: Any, leaky_url: str) -> None:
    for config, needle in (
        ({"url": leaky_url, "user_secrets": ["bad header"]}, "not a valid HTTP header name"),
        ({"url": leaky_url, "headers": {"X-Leak": "shared"}, "user_secrets": ["X-Leak"]}, "either shared or per user"),
        ({"url": leaky_url, "user_secrets": ["Host"]}, "set by the client"),
    ):
        resp = api.post("/api/v1/tools/", {"name": "bad", "type": "REMOTE", "config": config}, format="json")
        assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_config", resp.content
        assert resp.json()["error"]["details"]["field"] == "config.user_secrets"
        assert needle in resp.json()["error"]["message"]  # which of the field's rules: no code tells them apart
    local = api.post("/api/v1/tools/", {"name": "bad", "type": "LOCAL", "config": {
        "command": sys.executable, "user_secrets": ["1NOPE"]}}, format="json")
    assert local.status_code == 400 and local.json()["error"]["code"] == "invalid_config"
    assert local.json()["error"]["details"]["field"] == "config.user_secrets"
    assert "environment variable" in local.json()["error"]["message"]  # the rule: one field, several rules


def test_a_member_sets_keys_and_connects_on_their_own_page(api: Any, member_client: Any, tenant: Any,
                                                           leaky_url: str) -> None:
    from django.test import Client

    keyed = make(api, "keyed", "REMOTE", {"url": leaky_url, "user_secrets": ["X-Leak"]})
    make(api, "plain", "REMOTE", {"url": leaky_url})
    bob = member_client(tenant, Role.MEMBER)
    browser = Client()
    assert browser.get("/connections/").status_code == 302  # signed out: sign in first
    browser.force_login(bob.user)
    page = browser.get("/connections/?tenant=acme")
    html = page.content.decode()
    assert page.status_code == 200 and "keyed" in html and "missing: X-Leak" in html
    assert "plain" not in html  # a tool that needs nothing of the member is not listed
    saved = browser.post("/connections/?tenant=acme",
                         {"action": "set_keys", "tool": keyed, "value:X-Leak": BOB_KEY}, follow=True)
    html = saved.content.decode()
    assert "Saved." in html and BOB_KEY not in html and "missing: X-Leak" not in html
    assert invoke(bob, keyed, "fingerprint")["text"] == fingerprint_of(BOB_KEY)
    refused = browser.post("/connections/?tenant=acme",
                           {"action": "set_keys", "tool": keyed, "value:X-Other": "x"}, follow=True)
    assert "Not saved: X-Other is not a per-user key" in refused.content.decode()
    cleared = browser.post("/connections/?tenant=acme", {"action": "clear_keys", "tool": keyed}, follow=True)
    assert "cleared" in cleared.content.decode()
    assert invoke(bob, keyed, "fingerprint")["error_code"] == "CREDENTIALS_REQUIRED"
    assert browser.get("/connections/?tenant=globex").status_code == 404
