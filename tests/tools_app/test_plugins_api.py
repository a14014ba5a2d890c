"""Tool plugins through the real API: entry-point discovery, every hook, trial runs, transactions, removal."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group

from agents_app.models import Agent, Conversation
from tenants_app.models import Role
from tests.factories import UserFactory
from tools_app.models import Approval, CallStatus, Tool, ToolCall, ToolStatus, ToolType
from tools_app.runtime import registry
from tools_app.runtime.plugin import ToolArgs, ToolContext, ToolPlugin
from tools_app.runtime.result import ToolResult
from tools_app.services.builtins_sync import sync_builtin_tools

pytestmark = pytest.mark.django_db

SAMPLE = "toolhub-sample-plugin"


def sample_installed() -> bool:
    names = {ep.name for ep in metadata.entry_points(group=registry.ENTRY_POINT_GROUP)}
    return {"sample_retitle", "sample_word_count"} <= names


@pytest.fixture
def plugins_on(settings: Any, tenant: Any) -> Any:
    """The sample plugin offered, and the tenant synced as `manage.py sync_builtin_tools` would."""
    assert sample_installed(), "the sample plugin is not installed: run `make test-plugins`"
    settings.TOOLHUB_TOOL_PLUGINS = [SAMPLE]
    sync_builtin_tools(tenant=tenant, refresh=True)
    return tenant


@pytest.fixture
def owner(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.OWNER)


def tool(tenant: Any, name: str, *, enable: bool = False) -> Tool:
    row = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name=name)
    if enable:
        row.status = ToolStatus.ENABLED
        row.save(update_fields=["status"])
    return row


def invoke(client: Any, row: Tool, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    resp = client.post(f"/api/v1/tools/{row.pk}/invoke/", {"function": row.name, "arguments": arguments, **extra},
                       format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def conversations(tenant: Any, user: Any, *titles: str) -> list[Conversation]:
    agent = Agent.objects.get_or_create(tenant=tenant, name="plain")[0]
    return [Conversation.objects.create(tenant=tenant, agent=agent, user=user, title=t) for t in titles]


# --- discovery ------------------------------------------------------------------------------------


def test_installed_plugins_get_builtin_rows_off_unless_read_only(plugins_on: Any) -> None:
    word = tool(plugins_on, "sample_word_count")
    retitle = tool(plugins_on, "sample_retitle")
    assert (word.status, word.safety, word.requires_approval) == (ToolStatus.ENABLED, "READ_ONLY", False)
    assert (retitle.status, retitle.safety, retitle.requires_approval) == (ToolStatus.DISABLED, "WRITE", True)
    fn = retitle.functions.get()
    assert fn.input_schema["additionalProperties"] is False
    assert fn.input_schema["$defs"]["Mode"]["enum"] == ["prefix", "replace"]
    assert fn.input_schema["required"] == ["match", "text"]
    assert registry.get_tool("sample_retitle").source == f"plugin:{SAMPLE}"


def test_the_api_says_where_a_registered_tool_comes_from(plugins_on: Any, api: Any) -> None:
    shown = api.get(f"/api/v1/tools/{tool(plugins_on, 'sample_retitle').pk}/").json()
    assert shown["registered"] == {"source": f"plugin:{SAMPLE}", "dry_run": True, "runs_outside_transaction": False,
                                   "requires_user": True,
                                   "hooks": ["before_approval", "call_title", "provide_context", "refusal"]}
    builtin = api.get(f"/api/v1/tools/{tool(plugins_on, 'read_file').pk}/").json()["registered"]
    assert (builtin["source"], builtin["dry_run"], builtin["hooks"]) == ("builtin", False, [])


def test_plugins_are_offered_only_when_the_setting_allows(tenant: Any) -> None:
    # Test settings offer none: a tenant gets the nine built-ins whatever the venv holds.
    names = set(Tool.objects.filter(tenant=tenant, type=ToolType.BUILTIN).values_list("name", flat=True))
    assert not {n for n in names if n.startswith("sample_")}


def test_a_read_only_plugin_tool_runs_through_invoke(plugins_on: Any, api: Any) -> None:
    body = invoke(api, tool(plugins_on, "sample_word_count"), {"text": "one two three"})
    assert body["success"] and body["data"] == {"words": 3, "characters": 13}, body
    bad = invoke(api, tool(plugins_on, "sample_word_count"), {"txt": "x"})
    assert bad["error_code"] == "INVALID_PARAMS" and "text" in bad["error"]


# --- every hook of the sample's retitle tool ------------------------------------------------------


def test_refusal_refuses_every_call_for_the_user_up_front(plugins_on: Any, member_client: Any) -> None:
    row = tool(plugins_on, "sample_retitle", enable=True)
    guest = member_client(plugins_on, Role.MEMBER, user=UserFactory(username="guest-7"))
    conversations(plugins_on, guest.user, "trip to Rome")
    body = invoke(guest, row, {"match": "trip", "text": "[old]"})
    assert (body["error_code"], body["error"]) == ("REFUSED", "guest accounts may not rename conversations")
    assert not Approval.objects.exists()  # refused before anyone was asked
    audit = ToolCall.objects.get(pk=body["call_id"])
    assert (audit.status, audit.error_code) == (CallStatus.DENIED, "REFUSED")
    assert Conversation.objects.get(user=guest.user).title == "trip to Rome"


def test_before_approval_refuses_before_asking(plugins_on: Any, member_client: Any) -> None:
    row = tool(plugins_on, "sample_retitle", enable=True)
    member = member_client(plugins_on, Role.MEMBER)
    body = invoke(member, row, {"match": "nothing-like-this", "text": "x"})
    assert body["error_code"] == "REFUSED" and "nothing to rename" in body["error"], body
    assert not Approval.objects.exists()


def test_approval_card_title_and_a_shown_result_kept_whole(plugins_on: Any, member_client: Any,
                                                           settings: Any) -> None:
    settings.TOOLHUB_AUDIT_RESULT_CHARS = 50
    row = tool(plugins_on, "sample_retitle", enable=True)
    member = member_client(plugins_on, Role.MEMBER)
    mine = conversations(plugins_on, member.user, "trip to Rome", "trip to Oslo", "trip to Lima", "groceries")
    someone_else = conversations(plugins_on, UserFactory(), "trip to Bern")[0]
    held = invoke(member, row, {"match": "trip", "text": "[old]"})
    assert held["error_code"] == "APPROVAL_REQUIRED", held
    assert held["summary"] == "rename 3 conversation(s) matching 'trip'"
    assert held["title"] == "Rename conversations matching 'trip'"
    approval = Approval.objects.get(pk=held["approval_id"])
    assert approval.summary == held["summary"] and approval.tool_call.title == held["title"]
    listed = member.get("/api/v1/approvals/?status=pending").json()["results"][0]
    assert (listed["summary"], listed["title"]) == (held["summary"], held["title"])

    done = member.post(f"/api/v1/approvals/{approval.pk}/approve/").json()
    assert done["success"] and done["shown"] is True, done
    assert [r["after"] for r in done["data"]["rows"]] == ["[old] trip to Rome", "[old] trip to Oslo",
                                                          "[old] trip to Lima"]
    assert [c.title for c in Conversation.objects.filter(pk__in=[c.pk for c in mine]).order_by("pk")] == [
        "[old] trip to Rome", "[old] trip to Oslo", "[old] trip to Lima", "groceries"]
    someone_else.refresh_from_db()
    assert someone_else.title == "trip to Bern"  # ctx.user is the asker: another user's rows are out of reach
    audit = ToolCall.objects.get(pk=done["call_id"])
    assert audit.title == "Rename conversations matching 'trip'"
    # shown: kept whole in the audit though the excerpt cap is 50 characters
    assert audit.result_size > 50 and len(audit.result_excerpt) == audit.result_size
    assert "[old] trip to Lima" in audit.result_excerpt


# --- trial runs -------------------------------------------------------------------------------------


def test_dry_run_rolls_back_and_says_what_would_change(plugins_on: Any, member_client: Any) -> None:
    row = tool(plugins_on, "sample_retitle", enable=True)
    member = member_client(plugins_on, Role.MEMBER)
    rows = conversations(plugins_on, member.user, "trip A", "trip B")
    body = invoke(member, row, {"match": "trip", "text": "X", "mode": "replace"}, dry_run=True)
    assert body["success"] and body["dry_run"] is True, body
    # The tool asks for approval, so a trial run withholds its result (the rows' titles): only what would change.
    assert body["result_withheld"] is True and body["data"] is None and "trip A" not in str(body)
    assert "would rename" not in body["text"] and "need a person's approval" in body["text"]
    changes = body["changes"]
    assert sorted((o["model"], o["pk"], o["action"]) for o in changes["objects"]) == sorted(
        ("agents_app.conversation", c.pk, "updated") for c in rows)
    assert changes["statements"]["agents_app_conversation"]["UPDATE"] == 2
    assert [c.title for c in Conversation.objects.filter(pk__in=[c.pk for c in rows]).order_by("pk")] == [
        "trip A", "trip B"]  # nothing kept
    assert not Approval.objects.exists()  # a trial run keeps nothing, so it asks no one
    audit = ToolCall.objects.get(pk=body["call_id"])
    assert audit.dry_run and audit.status == CallStatus.OK


def test_dry_run_is_refused_for_tools_a_rollback_cannot_undo(plugins_on: Any, api: Any, owner: Any) -> None:
    body = invoke(api, tool(plugins_on, "read_file"), {"path": "x"}, dry_run=True)
    assert body["error_code"] == "DRY_RUN_UNSUPPORTED", body
    assert "trial run (dry_run) is not possible for 'read_file'" in body["error"]
    assert ToolCall.objects.get(pk=body["call_id"]).dry_run
    http = owner.post("/api/v1/tools/", {"name": "web", "type": "HTTP", "config": {
        "method": "GET", "url": "http://127.0.0.1:9/x"}}, format="json")
    assert http.status_code == 201, http.content
    resp = owner.post(f"/api/v1/tools/{http.json()['id']}/invoke/", {"function": "call", "arguments": {},
                                                                       "dry_run": True}, format="json")
    body = resp.json()
    assert body["error_code"] == "DRY_RUN_UNSUPPORTED" and "an HTTP tool" in body["error"], body


# --- transactions -----------------------------------------------------------------------------------


class GroupArgs(ToolArgs):
    name: str


class _MakesGroupThenFails(ToolPlugin):
    description = "Creates a group, then fails."
    args_model = GroupArgs

    def execute(self, args: GroupArgs, ctx: ToolContext) -> ToolResult:
        Group.objects.create(name=args.name)
        return ToolResult.fail("BUSINESS_ERROR", "failed after writing")


class InTransaction(_MakesGroupThenFails):
    name = "test_in_transaction"


class OutsideTransaction(_MakesGroupThenFails):
    name = "test_outside_transaction"
    runs_outside_transaction = True


@pytest.fixture
def host_tools(tenant: Any) -> Iterator[None]:
    for cls in (InTransaction, OutsideTransaction):
        registry.register(cls)
    sync_builtin_tools(tenant=tenant)
    yield
    for cls in (InTransaction, OutsideTransaction):
        registry.unregister(cls.name)


def test_a_failed_call_leaves_nothing_half_written_unless_the_tool_opts_out(host_tools: Any, tenant: Any,
                                                                            api: Any) -> None:
    assert invoke(api, tool(tenant, "test_in_transaction"), {"name": "g-in"})["error_code"] == "BUSINESS_ERROR"
    assert not Group.objects.filter(name="g-in").exists()
    assert invoke(api, tool(tenant, "test_outside_transaction"), {"name": "g-out"})["error_code"] == "BUSINESS_ERROR"
    assert Group.objects.filter(name="g-out").exists()


# --- removal: an uninstalled package's tools lose their rows, never their audit --------------------

PLUGIN_MODULE = '''
from tools_app.runtime.plugin import NoArgs, ToolContext, ToolPlugin
from tools_app.runtime.result import ToolResult


class Ping(ToolPlugin):
    name = "transient_ping"
    description = "Answer pong."

    def execute(self, args: NoArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult.ok(text="pong")
'''


def install_dist(site: Path, dist: str, module: str, entry_points: str) -> None:
    """What pip leaves behind for a package: its module and a dist-info with its entry points."""
    (site / f"{module}.py").write_text(PLUGIN_MODULE)
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture
def site(tmp_path: Path, settings: Any) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    settings.TOOLHUB_TOOL_PLUGINS = ["*"]
    yield tmp_path
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))
    sys.modules.pop("transient_plugin", None)
    importlib.invalidate_caches()
    registry.discover(refresh=True)


def test_removing_the_package_removes_the_row_and_keeps_the_audit(site: Path, tenant: Any, api: Any) -> None:
    install_dist(site, "transient-plugin", "transient_plugin",
                 "[toolhub.tools]\nping = transient_plugin:Ping\n")
    assert sync_builtin_tools(tenant=tenant, refresh=True)["added"] >= 1
    row = tool(tenant, "transient_ping")
    assert row.status == ToolStatus.ENABLED  # READ_ONLY: on by default
    body = invoke(api, row, {})
    assert body["text"] == "pong"

    sys.path.remove(str(site))  # pip uninstall
    importlib.invalidate_caches()
    counts = sync_builtin_tools(tenant=tenant, refresh=True)
    assert counts["removed"] == 1, counts
    assert not Tool.objects.filter(tenant=tenant, name="transient_ping").exists()
    audit = ToolCall.objects.get(pk=body["call_id"])
    assert (audit.tool_id, audit.tool_name, audit.status) == (None, "transient_ping", CallStatus.OK)


def test_a_broken_plugin_retires_rather_than_removes(site: Path, tenant: Any) -> None:
    install_dist(site, "transient-plugin", "transient_plugin", "[toolhub.tools]\nping = transient_plugin:Ping\n")
    sync_builtin_tools(tenant=tenant, refresh=True)
    (site / "transient_plugin.py").write_text("raise ImportError('broken on purpose')\n")
    sys.modules.pop("transient_plugin", None)
    importlib.invalidate_caches()
    counts = sync_builtin_tools(tenant=tenant, refresh=True)
    assert (counts["retired"], counts["removed"]) == (1, 0), counts
    row = tool(tenant, "transient_ping")
    assert row.status == ToolStatus.DISABLED
    errors = registry.plugin_errors()
    assert [e.distribution for e in errors] == ["transient-plugin"] and "broken on purpose" in errors[0].error
