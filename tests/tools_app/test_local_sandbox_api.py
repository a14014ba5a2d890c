"""A tenant admin's LOCAL server is tenant code: through the API it runs sandboxed, and the platform decides who may
register which command. The attack this closes: a short script registered as a LOCAL tool, Test pressed, and the
server's environment (database URL, Fernet keys) and every tenant's secrets read from /proc/$PPID/environ."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tenants_app.models import Role
from tests.factories import UserFactory
from tests.fixtures.mcp_servers import ESCAPE_PROBE, MINI
from tests.market_app.factories import EntryFactory, SourceFactory
from tests.tools_app.discovered import Discovered
from tools_app.models import Tool
from tools_app.runtime.sandbox import SandboxPolicy
from tools_app.wiring.pool import pool
from tools_app.wiring.workspaces import workspace_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.access(SandboxPolicy().bwrap, os.X_OK), reason="bubblewrap not installed"),
]


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    yield
    pool().close_all()


def create(api: Any, name: str, config: dict[str, Any], **extra: Any) -> Any:
    body = {"name": name, "type": "LOCAL", "config": {"startup_timeout_s": 20, "call_timeout_s": 20, **config}, **extra}
    return api.post("/api/v1/tools/", body, format="json")


def probe(api: Any, name: str = "probe", **config: Any) -> int:
    resp = create(api, name, {"command": sys.executable, "args": [str(ESCAPE_PROBE)], **config})
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    discovered = Discovered()  # the refresh lists what the Test found (one server start, not two)
    with discovered.probes():
        tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert tested["ok"], tested
    discovered.refresh(api, tool_id)
    return tool_id


def run(api: Any, tool_id: int, function: str, **arguments: Any) -> Any:
    body = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": function, "arguments": arguments},
                    format="json").json()
    assert body["success"], body
    return body["data"] if body["data"] is not None else json.loads(body["text"])


def test_a_tenant_admins_server_cannot_read_toolhubs_secrets_files_or_network(
        api: Any, tenant: Any, other_tenant: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLHUB_SECRET_KEYS", "canary-fernet-key")
    monkeypatch.setenv("DATABASE_URL", "postgres://canary:canary@db/toolhub")
    theirs = workspace_for(other_tenant)
    (theirs / "contract.txt").write_text("globex only")
    tool_id = probe(api)

    me = run(api, tool_id, "whoami")
    assert me["uid"] == settings.TOOLHUB_LOCAL_SANDBOX_UID_BASE + tenant.pk
    assert me["cwd"] == str(workspace_for(tenant))  # the workspace by default, not the project folder
    assert os.getpid() not in me["visible_pids"]
    assert "canary" not in json.dumps(run(api, tool_id, "environs"))  # /proc/1/environ is bwrap's clean one
    database = settings.DATABASES["default"]
    files = [settings.TOOLHUB_DEV_KEY_FILE, Path(settings.BASE_DIR) / "config" / "settings" / "base.py",
             theirs / "contract.txt"]
    if database["ENGINE"].endswith("sqlite3"):
        files.append(Path(database.get("TEST", {}).get("NAME") or database["NAME"]))
    for path in files:
        got = run(api, tool_id, "read", path=str(path))
        assert got["ok"] is False, (path, got)
    assert run(api, tool_id, "listdir", path=str(theirs))["ok"] is False
    # var/ holds the database, the keys and the audit spool: the sandbox shows only what tests mount from it.
    var = run(api, tool_id, "listdir", path=str(settings.VAR_DIR))
    assert var["ok"] is False or var["value"] == ["test-servers"], var
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:  # loopback: the web server, PostgreSQL with trust auth, Redis; none is reachable
        assert run(api, tool_id, "connect", host="127.0.0.1", port=listener.getsockname()[1])["ok"] is False
    finally:
        listener.close()


def test_cwd_and_roots_must_stay_in_the_workspace(api: Any, other_tenant: Any) -> None:
    theirs = str(workspace_for(other_tenant))
    for config, field in (({"cwd": theirs}, "config.cwd"), ({"cwd": "../"}, "config.cwd"),
                          ({"roots": [theirs]}, "config.roots"), ({"roots": ["/"]}, "config.roots")):
        resp = create(api, "escape", {"command": sys.executable, "args": [str(MINI)], **config})
        assert resp.status_code == 400, (config, resp.content)
        error = resp.json()["error"]
        assert error["code"] == "invalid_config" and error["details"]["field"] == field, error
        assert "outside the tenant workspace" in error["message"]


def test_only_a_platform_operator_runs_a_server_unsandboxed(api: Any, tenant: Any, member_client: Any) -> None:
    refused = create(api, "host", {"command": sys.executable, "args": [str(ESCAPE_PROBE)]}, unsandboxed=True)
    assert refused.status_code == 403 and refused.json()["error"]["details"]["field"] == "unsandboxed"
    tool_id = probe(api, "boxed")
    flip = api.patch(f"/api/v1/tools/{tool_id}/", {"unsandboxed": True}, format="json")
    assert flip.status_code == 403

    operator = member_client(tenant, Role.OWNER, user=UserFactory(is_superuser=True, is_staff=True))
    resp = create(operator, "host", {"command": sys.executable, "args": [str(ESCAPE_PROBE)]}, unsandboxed=True)
    assert resp.status_code == 201 and resp.json()["unsandboxed"] is True
    assert operator.post(f"/api/v1/tools/{resp.json()['id']}/refresh/").json()["ok"]
    assert os.getpid() in run(operator, int(resp.json()["id"]), "whoami")["visible_pids"]  # the host's processes
    # Switching back recycles the running server into the sandbox at once.
    back = operator.patch(f"/api/v1/tools/{resp.json()['id']}/", {"unsandboxed": False}, format="json")
    assert back.status_code == 200 and back.json()["config_version"] == 2
    assert os.getpid() not in run(operator, int(resp.json()["id"]), "whoami")["visible_pids"]


def test_the_platform_decides_who_registers_local_commands(
        api: Any, tenant: Any, settings: Any, member_client: Any) -> None:
    settings.TOOLHUB_LOCAL_COMMANDS = "off"
    off = create(api, "a", {"command": sys.executable, "args": [str(MINI)]})
    assert off.status_code == 403 and off.json()["error"]["details"]["policy"] == "off"

    settings.TOOLHUB_LOCAL_COMMANDS = "approved"
    settings.TOOLHUB_LOCAL_APPROVED_COMMANDS = [f"{sys.executable} {MINI}"]
    assert create(api, "b", {"command": sys.executable, "args": [str(MINI)]}).status_code == 201
    other = create(api, "c", {"command": sys.executable, "args": [str(ESCAPE_PROBE)]})
    assert other.status_code == 403
    error = other.json()["error"]
    assert error["code"] == "permission_denied" and error["details"]["policy"] == "approved"
    assert error["details"]["accepted"] == [f"{sys.executable} {MINI}"]  # names what is accepted

    # An operator's (global) market source is approved as listed; a tenant's own source is not.
    listed = {"command": sys.executable, "args": [str(ESCAPE_PROBE)], "env": {}}
    global_entry = EntryFactory(source=SourceFactory(tenant=None), install=listed)
    tenant_entry = EntryFactory(source=SourceFactory(tenant=tenant), install=listed)
    assert api.post(f"/api/v1/market/entries/{global_entry.pk}/load/", {"name": "fromglobal"},
                    format="json").status_code in (200, 201)
    refused = api.post(f"/api/v1/market/entries/{tenant_entry.pk}/load/", {"name": "fromtenant"}, format="json")
    assert refused.status_code == 403, refused.content

    operator = member_client(tenant, Role.OWNER, user=UserFactory(is_superuser=True, is_staff=True))
    assert create(operator, "d", {"command": sys.executable, "args": [str(ESCAPE_PROBE)]}).status_code == 201


def test_a_changed_tenant_policy_applies_to_the_running_server(api: Any, tenant: Any) -> None:
    tool_id = probe(api)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    try:
        assert run(api, tool_id, "connect", host="127.0.0.1", port=port)["ok"] is False
        tenant.local_network = "host"  # an operator grants the host network (the tenants admin, superusers only)
        tenant.save()
        assert run(api, tool_id, "connect", host="127.0.0.1", port=port)["ok"] is True
    finally:
        listener.close()


def test_the_tool_page_says_where_it_runs_and_only_operators_may_unsandbox(api: Any, tenant: Any) -> None:
    from django.test import Client

    from tests.factories import MembershipFactory

    tool_id = probe(api)
    page = f"/admin/tools_app/tool/{tool_id}/change/"
    admin_user = UserFactory(is_staff=True)
    MembershipFactory(tenant=tenant, user=admin_user, role=Role.ADMIN)
    browser = Client()
    browser.force_login(admin_user)
    html = browser.get(page).content.decode()
    assert "In the tenant sandbox: uid" in html and 'name="unsandboxed"' not in html

    operator = Client()
    operator.force_login(UserFactory(is_staff=True, is_superuser=True))
    assert 'name="unsandboxed"' in operator.get(page).content.decode()
    Tool.objects.filter(pk=tool_id).update(unsandboxed=True)  # as an operator's save leaves it
    assert "UNSANDBOXED" in browser.get(page).content.decode()
