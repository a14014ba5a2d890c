"""A save the service refuses keeps everything typed and puts the error at its field (every service admin)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from agents_app.models import IntentExample, IntentNode
from tenants_app.models import Membership, Role
from tenants_app.services import NO_SUCH_USER
from tests.factories import MembershipFactory, ToolFactory, UserFactory
from tools_app.models import ToolFunction

pytestmark = pytest.mark.django_db

INTENT_ADD = "/admin/agents_app/intentnode/add/"
MEMBER_ADD = "/admin/tenants_app/membership/add/"


def signed_in(tenant: Any, role: str = Role.ADMIN, username: str = "tina") -> Client:
    user = UserFactory(username=username, is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


def form_errors(resp: Any) -> dict[str, list[str]]:
    return {k: list(v) for k, v in resp.context["adminform"].form.errors.items()}


def intent_form(tenant: Any, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tenant": tenant.pk, "code": "ops-weather", "name": "Weather questions", "level": "TOPIC", "kind": "MCP",
        "description": "Forecasts, typed with care", "parent": "", "status": "ENABLED",
        "function_refs": ["weather__forecast", "weather__forcast"],
        "examples-TOTAL_FORMS": "2", "examples-INITIAL_FORMS": "0", "examples-MIN_NUM_FORMS": "0",
        "examples-MAX_NUM_FORMS": "1000",
        "examples-0-text": "will it rain in Paris tomorrow", "examples-0-position": "0",
        "examples-1-text": "is it sunny in Lyon", "examples-1-position": "1",
    }
    data.update(changes)
    return data


def test_intent_add_refused_keeps_input_and_names_the_field(tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, name="weather")
    ToolFunction.objects.create(tool=tool, name="forecast", input_schema={"type": "object"})
    client = signed_in(tenant)
    resp = client.post(INTENT_ADD, intent_form(tenant))
    assert resp.status_code == 200, resp.get("Location")
    errors = form_errors(resp)
    assert list(errors) == ["function_refs"] and "weather__forcast" in errors["function_refs"][0]
    html = resp.content.decode()
    for typed in ("Weather questions", "Forecasts, typed with care", "will it rain in Paris tomorrow",
                  "is it sunny in Lyon"):
        assert typed in html, typed
    ticked = re.findall(r'<input type="checkbox" name="function_refs" value="([\w_]+)"[^>]*checked', html)
    assert ticked == ["weather__forecast", "weather__forcast"]  # the misspelt one stays, shown as unknown
    assert "Not saved" not in html  # the error sits at its field, not in a banner over an empty form
    assert not IntentNode.objects.filter(tenant=tenant).exists() and not IntentExample.objects.exists()
    # Fixed, the same form saves.
    resp = client.post(INTENT_ADD, intent_form(tenant, function_refs=["weather__forecast"]))
    assert resp.status_code == 302
    node = IntentNode.objects.get(tenant=tenant, code="ops-weather")
    assert [f.name for f in node.functions.all()] == ["forecast"] and node.examples.count() == 2


def test_intent_change_refused_at_parent_keeps_the_other_edits(tenant: Any) -> None:
    root = IntentNode.objects.create(tenant=tenant, code="info", name="Info", level="DOMAIN", kind="MCP")
    node = IntentNode.objects.create(tenant=tenant, code="ops-weather", name="Weather", level="TOPIC", kind="MCP")
    client = signed_in(tenant)
    # A DOMAIN node cannot have a parent: the service says so, at "parent".
    resp = client.post(f"/admin/agents_app/intentnode/{node.pk}/change/", intent_form(
        tenant, name="Renamed but refused", level="DOMAIN", parent=str(root.pk), function_refs=[]))
    assert resp.status_code == 200
    assert form_errors(resp) == {"parent": ["a DOMAIN node has no parent"]}
    assert "Renamed but refused" in resp.content.decode()
    node.refresh_from_db()
    assert (node.name, node.level, node.parent_id, node.version) == ("Weather", "TOPIC", None, 1)


def test_membership_add_refused_keeps_input_at_username(tenant: Any) -> None:
    client = signed_in(tenant)
    resp = client.post(MEMBER_ADD, {"tenant": tenant.pk, "username": "nobody-here", "role": "viewer"})
    assert resp.status_code == 200
    assert form_errors(resp) == {"username": [NO_SUCH_USER]}
    html = resp.content.decode()
    assert 'value="nobody-here"' in html and '<option value="viewer" selected>' in html
    assert Membership.objects.filter(tenant=tenant).count() == 1


def test_membership_role_refused_is_shown_at_role(tenant: Any) -> None:
    client = signed_in(tenant)
    own = Membership.objects.get(tenant=tenant, user__username="tina")
    resp = client.post(f"/admin/tenants_app/membership/{own.pk}/change/", {"role": "owner"})
    assert resp.status_code == 200
    errors = form_errors(resp)
    assert list(errors) == ["role"] and "owner" in errors["role"][0]
    assert '<option value="owner" selected>' in resp.content.decode()
    own.refresh_from_db()
    assert own.role == Role.ADMIN


def test_a_refused_delete_still_says_why(tenant: Any) -> None:
    owner = UserFactory(username="boss", is_staff=True)
    MembershipFactory(tenant=tenant, user=owner, role=Role.OWNER)
    client = Client()
    client.force_login(owner)
    own = Membership.objects.get(tenant=tenant, user=owner)
    resp = client.post(f"/admin/tenants_app/membership/{own.pk}/delete/", {"post": "yes"}, follow=True)
    assert any("at least one owner" in str(m) for m in resp.context["messages"])
    assert Membership.objects.filter(pk=own.pk).exists()
