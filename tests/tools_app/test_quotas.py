"""Quotas: the API (owners and admins, typed refusals of bad input) and their enforcement on the call path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tenants_app.models import Role
from tests.factories import TenantFactory, ToolFactory
from tools_app.models import CallStatus, Tool, ToolCall, ToolType
from tools_app.services import quotas

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    """Each test counts from zero (test databases give tenants and tools the same ids again)."""
    quotas._store.forget()
    yield
    quotas._store.forget()


@pytest.fixture
def owner(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.OWNER)


def lister(tenant: Any) -> Tool:
    return Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")


def invoke(client: Any, tool: Tool) -> Any:
    return client.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": "list_directory", "arguments": {"path": "."}},
                       format="json")


def create(client: Any, **body: Any) -> Any:
    return client.post("/api/v1/quotas/", body, format="json")


# --- the API ------------------------------------------------------------------------------------------------


def test_owner_creates_lists_patches_and_deletes_a_quota(tenant: Any, owner: Any) -> None:
    made = create(owner, scope="tenant", per_minute=5)
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["scope"] == "tenant" and body["target"] == "" and body["per_minute"] == 5
    assert body["per_day"] is None and body["concurrent"] is None
    listed = owner.get("/api/v1/quotas/").json()
    assert [q["id"] for q in listed["results"]] == [body["id"]]
    patched = owner.patch(f"/api/v1/quotas/{body['id']}/", {"per_day": 100, "per_minute": None}, format="json")
    assert patched.status_code == 200, patched.content
    assert patched.json()["per_day"] == 100 and patched.json()["per_minute"] is None
    assert owner.delete(f"/api/v1/quotas/{body['id']}/").status_code == 204
    assert owner.get("/api/v1/quotas/").json()["count"] == 0


def test_targets_are_usernames_and_ids_of_this_tenant(tenant: Any, owner: Any, member_client: Any) -> None:
    member = member_client(tenant, Role.MEMBER)
    tool = lister(tenant)
    by_member = create(owner, scope="member", target=member.user.username, concurrent=1)
    assert by_member.status_code == 201, by_member.content
    assert by_member.json()["target"] == member.user.username
    by_tool = create(owner, scope="tool", target=str(tool.pk), per_day=3)
    assert by_tool.status_code == 201 and by_tool.json()["target"] == str(tool.pk)
    default = create(owner, scope="agent", per_minute=2)  # empty target: each agent's default
    assert default.status_code == 201 and default.json()["target"] == ""
    again = create(owner, scope="tool", target=str(tool.pk), per_day=4)
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"


@pytest.mark.parametrize(("body", "code", "field"), [
    ({"scope": "planet", "per_minute": 1}, "invalid_quota", "scope"),
    ({"per_minute": 1}, "invalid_quota", "scope"),
    ({"scope": "tenant", "per_minute": -1}, "invalid_quota", "per_minute"),
    ({"scope": "tenant", "per_day": "ten"}, "invalid_quota", "per_day"),
    ({"scope": "tenant", "concurrent": True}, "invalid_quota", "concurrent"),
    ({"scope": "tenant", "target": "someone", "per_minute": 1}, "invalid_quota", "target"),
    ({"scope": "member", "target": "nobody-here", "per_minute": 1}, "not_found", "target"),
    ({"scope": "tool", "target": "999999", "per_minute": 1}, "not_found", "target"),
    ({"scope": "agent", "target": "abc", "per_minute": 1}, "not_found", "target"),
])
def test_bad_input_is_a_typed_error_naming_the_field(owner: Any, body: dict[str, Any], code: str,
                                                     field: str) -> None:
    resp = create(owner, **body)
    assert resp.status_code in (400, 404), resp.content
    error = resp.json()["error"]
    assert error["code"] == code and error["details"]["field"] == field, error


def test_a_quota_without_any_limit_is_refused(owner: Any) -> None:
    resp = create(owner, scope="tenant")
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "invalid_quota"
    assert resp.json()["error"]["details"]["fields"] == ["per_minute", "per_day", "concurrent"]
    made = create(owner, scope="tenant", per_minute=1).json()
    cleared = owner.patch(f"/api/v1/quotas/{made['id']}/", {"per_minute": None}, format="json")
    assert cleared.status_code == 400 and cleared.json()["error"]["code"] == "invalid_quota"


def test_another_tenants_targets_and_quotas_are_missing(tenant: Any, owner: Any, member_client: Any) -> None:
    other = TenantFactory(slug="other")
    foreign_tool = ToolFactory(tenant=other)
    stranger = member_client(other, Role.OWNER)
    resp = create(owner, scope="tool", target=str(foreign_tool.pk), per_minute=1)
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"
    resp = create(owner, scope="member", target=stranger.user.username, per_minute=1)
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"
    theirs = create(stranger, scope="tenant", per_minute=1).json()
    assert owner.get(f"/api/v1/quotas/{theirs['id']}/").status_code == 404
    assert owner.patch(f"/api/v1/quotas/{theirs['id']}/", {"per_minute": 9}, format="json").status_code == 404
    assert owner.delete(f"/api/v1/quotas/{theirs['id']}/").status_code == 404


def test_members_may_not_read_or_set_quotas(tenant: Any, member_client: Any) -> None:
    member = member_client(tenant, Role.MEMBER)
    assert member.get("/api/v1/quotas/").status_code == 403
    assert create(member, scope="tenant", per_minute=1).status_code == 403


# --- enforcement --------------------------------------------------------------------------------------------


def test_a_spent_tenant_quota_answers_429_with_retry_after_and_details(tenant: Any, owner: Any) -> None:
    create(owner, scope="tenant", per_minute=2)
    tool = lister(tenant)
    assert [invoke(owner, tool).status_code for _ in range(2)] == [200, 200]
    refused = invoke(owner, tool)
    assert refused.status_code == 429, refused.content
    body = refused.json()
    assert body["success"] is False and body["error_code"] == "QUOTA_EXCEEDED"
    assert body["details"]["scope"] == "tenant" and body["details"]["limit"] == "per_minute"
    assert body["details"]["allowed"] == 2 and body["details"]["reset_at"].endswith(":00Z")
    assert 1 <= int(refused["Retry-After"]) <= 60
    # Audited as a refusal: the usage report counts it.
    row = ToolCall.objects.get(pk=body["call_id"])
    assert row.status == CallStatus.DENIED and row.error_code == "QUOTA_EXCEEDED"


def test_a_quota_refusal_writes_no_request_warning_line(tenant: Any, owner: Any, caplog: Any) -> None:
    """A tenant hammering past its quota must not write a "Too Many Requests" log line per refused call (it is audited
    and counted in the metrics); other 4xx answers are still logged as Django logs them."""
    create(owner, scope="tenant", per_minute=1)
    tool = lister(tenant)
    assert invoke(owner, tool).status_code == 200
    with caplog.at_level("WARNING", logger="django.request"):
        refused = [invoke(owner, tool) for _ in range(3)]
        missing = owner.post("/api/v1/tools/999999/invoke/", {"function": "x", "arguments": {}}, format="json")
    assert [r.status_code for r in refused] == [429, 429, 429] and missing.status_code == 404
    logged = [r.getMessage() for r in caplog.records if r.name == "django.request"]
    assert any("Not Found" in m for m in logged), logged  # the logger is heard here
    assert not any("Too Many Requests" in m for m in logged), logged


def test_a_member_quota_counts_that_member_only(tenant: Any, owner: Any, member_client: Any) -> None:
    member = member_client(tenant, Role.MEMBER)
    create(owner, scope="member", target=member.user.username, per_day=1)
    tool = lister(tenant)
    assert invoke(member, tool).status_code == 200
    refused = invoke(member, tool)
    assert refused.status_code == 429 and refused.json()["details"]["scope"] == "member"
    assert refused.json()["details"]["target"] == member.user.username
    assert refused.json()["details"]["limit"] == "per_day"
    assert invoke(owner, tool).status_code == 200  # the owner has no quota of their own


def test_a_named_target_overrides_its_scopes_default(tenant: Any, owner: Any, member_client: Any) -> None:
    generous = member_client(tenant, Role.MEMBER)
    create(owner, scope="member", per_minute=1)  # every member: one call a minute
    create(owner, scope="member", target=generous.user.username, per_minute=3)
    tool = lister(tenant)
    assert [invoke(generous, tool).status_code for _ in range(4)] == [200, 200, 200, 429]
    assert [invoke(owner, tool).status_code for _ in range(2)] == [200, 429]


def test_a_tool_quota_counts_every_caller_of_that_tool(tenant: Any, owner: Any, member_client: Any) -> None:
    member = member_client(tenant, Role.MEMBER)
    tool = lister(tenant)
    create(owner, scope="tool", target=str(tool.pk), per_minute=2)
    assert invoke(owner, tool).status_code == 200
    assert invoke(member, tool).status_code == 200
    refused = invoke(member, tool)
    assert refused.status_code == 429 and refused.json()["details"]["scope"] == "tool"
    reader = Tool.objects.get(tenant=tenant, name="read_file")
    other = owner.post(f"/api/v1/tools/{reader.pk}/invoke/", {"function": "read_file", "arguments": {"path": "x"}},
                       format="json")
    assert other.status_code == 200 and other.json()["error_code"] != "QUOTA_EXCEEDED"


def test_a_refused_call_is_not_counted(tenant: Any, owner: Any) -> None:
    """One spent limit refuses the call whole: the other quotas it counts against are not charged for it."""
    tool = lister(tenant)
    create(owner, scope="tool", target=str(tool.pk), per_minute=1)
    create(owner, scope="tenant", per_minute=2)
    assert invoke(owner, tool).status_code == 200
    assert invoke(owner, tool).status_code == 429  # the tool's quota, not charged to the tenant's
    reader = Tool.objects.get(tenant=tenant, name="read_file")
    answer = owner.post(f"/api/v1/tools/{reader.pk}/invoke/", {"function": "read_file", "arguments": {"path": "x"}},
                        format="json")
    assert answer.status_code == 200, answer.content  # the tenant's second call of the minute


def test_a_concurrent_limit_holds_while_a_call_runs(tenant: Any, owner: Any) -> None:
    create(owner, scope="member", target=owner.user.username, concurrent=1)
    tool = lister(tenant)
    with quotas.admitted(tenant=tenant, actor=owner.user, tool=tool, agent=None):  # a call of theirs still running
        refused = invoke(owner, tool)
        assert refused.status_code == 429
        assert refused.json()["details"]["limit"] == "concurrent" and refused["Retry-After"] == "1"
    assert invoke(owner, tool).status_code == 200  # released when it ended
    assert invoke(owner, tool).status_code == 200  # and by each call that ran


def test_a_quota_change_applies_at_once(tenant: Any, owner: Any) -> None:
    tool = lister(tenant)
    made = create(owner, scope="tenant", per_minute=1).json()
    assert invoke(owner, tool).status_code == 200
    assert invoke(owner, tool).status_code == 429
    owner.patch(f"/api/v1/quotas/{made['id']}/", {"per_minute": 5}, format="json")
    assert invoke(owner, tool).status_code == 200
    owner.delete(f"/api/v1/quotas/{made['id']}/")
    assert all(invoke(owner, tool).status_code == 200 for _ in range(6))
