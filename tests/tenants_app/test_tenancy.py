"""Tenant resolution and isolation: a foreign object is indistinguishable from a missing one."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from tenants_app.models import Membership, Role
from tests.conftest import make_client
from tests.factories import MembershipFactory, TenantFactory, UserFactory
from tools_app.models import Tool

pytestmark = pytest.mark.django_db

REMOTE = {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Api-Key": "k"}}


def test_foreign_tool_is_indistinguishable_from_missing(api: Any, other_api: Any) -> None:
    tool_id = other_api.post("/api/v1/tools/", {"name": "t", "type": "REMOTE", "config": REMOTE}, format="json").json()["id"]
    for method, suffix in (("get", ""), ("patch", ""), ("delete", ""), ("put", "status/")):
        foreign = getattr(api, method)(f"/api/v1/tools/{tool_id}/{suffix}", {"status": "DISABLED"}, format="json")
        missing = getattr(api, method)(f"/api/v1/tools/999999/{suffix}", {"status": "DISABLED"}, format="json")
        assert foreign.status_code == missing.status_code == 404, method
        assert foreign.json() == missing.json()


def test_lists_and_counts_show_nothing_of_another_tenant(api: Any, other_api: Any) -> None:
    for i in range(3):
        other_api.post("/api/v1/tools/", {"name": f"t{i}", "type": "REMOTE", "config": REMOTE}, format="json")
    own = Tool.objects.filter(tenant__slug="acme")
    listed = api.get("/api/v1/tools/?page_size=100").json()
    assert listed["count"] == own.count()
    assert {t["id"] for t in listed["results"]} == set(own.values_list("pk", flat=True))
    assert {t["id"] for t in api.get("/api/v1/tools/all/").json()} == set(own.values_list("pk", flat=True))
    option_ids = {t["id"] for t in api.get("/api/v1/tools/options/").json()}
    assert option_ids <= set(own.values_list("pk", flat=True))
    assert api.get("/api/v1/tools/?name=t1").json()["count"] == 0


def test_single_membership_may_omit_header(tenant: Any, member_client: Any) -> None:
    client = member_client(tenant, Role.ADMIN, header=False)
    assert client.get("/api/v1/tools/").status_code == 200


def test_several_memberships_need_the_header(tenant: Any, other_tenant: Any) -> None:
    user = UserFactory()
    MembershipFactory(tenant=tenant, user=user)
    MembershipFactory(tenant=other_tenant, user=user)
    resp = make_client(user, None).get("/api/v1/tools/")
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "tenant_required"
    assert make_client(user, "globex").get("/api/v1/tools/").status_code == 200


def test_unknown_and_foreign_tenant_are_the_same_404(tenant: Any, other_tenant: Any) -> None:
    user = UserFactory()
    MembershipFactory(tenant=tenant, user=user)
    foreign = make_client(user, "globex").get("/api/v1/tools/")
    unknown = make_client(user, "nope").get("/api/v1/tools/")
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json() == unknown.json()


def test_token_of_user_without_membership_is_404(db: Any, tenant: Any) -> None:
    loner = UserFactory()
    assert make_client(loner, "acme").get("/api/v1/tools/").status_code == 404
    assert make_client(loner, None).get("/api/v1/tools/").status_code == 404


def test_anonymous_is_401(db: Any) -> None:
    resp = APIClient().get("/api/v1/tools/")
    assert resp.status_code == 401
    assert resp.json()["error"]["code"] == "not_authenticated"


def test_inactive_tenant_is_404(tenant: Any, member_client: Any) -> None:
    client = member_client(tenant)
    tenant.is_active = False
    tenant.save()
    assert client.get("/api/v1/tools/").status_code == 404


def test_viewset_base_refuses_get_queryset_override() -> None:
    from core.api import TenantViewSet

    with pytest.raises(TypeError, match="scoped_queryset"):
        type("Sneaky", (TenantViewSet,), {"get_queryset": lambda self: None})


def test_management_commands(db: Any, capsys: Any) -> None:
    call_command("create_tenant", "initech", "--name", "Initech")
    call_command("add_member", "initech", "peter", "--role", "viewer", "--password", "pw")
    assert Membership.objects.get(user__username="peter").role == Role.VIEWER
    capsys.readouterr()
    call_command("create_token", "peter")
    key = capsys.readouterr().out
    assert key.count("\n") == 1 and len(key.strip()) == 40
    assert make_client(Membership.objects.get().user, None).get("/api/v1/tools/").status_code == 200


def test_create_tenant_rejects_bad_slug_and_duplicates(db: Any) -> None:
    from django.core.management.base import CommandError

    TenantFactory(slug="dupe")
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_tenant", "dupe")
    with pytest.raises(CommandError, match="invalid"):
        call_command("create_tenant", "Bad Slug")
