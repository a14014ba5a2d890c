"""REMOTE config `auth`: oauth2 with a write-only, masked, scrubbed client secret; bad input named by field."""

from __future__ import annotations

from typing import Any

import pytest

from core.secrets import MASK
from tools_app.configs import mask_config, merge_masked, parse_config, secret_values, validate_config
from tools_app.errors import InvalidConfig

CLIENT_SECRET = "cs-must-never-be-shown-0123456789"
BASE = {"url": "https://mcp.example.com/mcp", "transport": "streamable_http"}


def test_auth_defaults_to_none_and_takes_oauth2() -> None:
    assert parse_config("REMOTE", BASE).auth.type == "none"  # type: ignore[attr-defined]
    stored = validate_config("REMOTE", {**BASE, "auth": {"type": "oauth2", "per_user": True, "scopes": ["read"],
                                                         "client_id": "abc", "client_secret": CLIENT_SECRET}})
    assert stored["auth"] == {"type": "oauth2", "per_user": True, "scopes": ["read"], "client_id": "abc",
                              "client_secret": CLIENT_SECRET}


def test_a_config_without_auth_is_stored_as_before_and_loads_typed() -> None:
    from tools_app.configs import load_config

    assert "auth" not in validate_config("REMOTE", BASE)
    stored = validate_config("REMOTE", {**BASE, "auth": {"type": "oauth2", "per_user": True}})
    loaded = load_config("REMOTE", stored)
    assert loaded.auth.type == "oauth2" and loaded.auth.per_user is True
    assert load_config("REMOTE", validate_config("REMOTE", BASE)).auth.type == "none"


def test_client_secret_is_masked_kept_and_scrubbed() -> None:
    stored = validate_config("REMOTE", {**BASE, "auth": {"type": "oauth2", "client_id": "abc",
                                                         "client_secret": CLIENT_SECRET}})
    shown = mask_config("REMOTE", stored)
    assert shown["auth"]["client_secret"] == MASK and shown["auth"]["client_id"] == "abc"
    assert CLIENT_SECRET not in str(shown)
    kept = merge_masked("REMOTE", stored=stored, incoming={**BASE, "auth": {"type": "oauth2", "client_id": "abc",
                                                                            "client_secret": MASK}})
    assert kept["auth"]["client_secret"] == CLIENT_SECRET
    assert CLIENT_SECRET in secret_values("REMOTE", stored)
    with pytest.raises(InvalidConfig) as nothing_stored:
        merge_masked("REMOTE", stored=BASE, incoming={**BASE, "auth": {"type": "oauth2", "client_secret": MASK}})
    assert nothing_stored.value.details["field"] == "config.auth.client_secret"


@pytest.mark.parametrize("auth,field", [
    ({"type": "basic"}, "auth.type"),
    ({"type": "oauth2", "extra": 1}, "auth.extra"),
    ({"type": "oauth2", "scopes": "read"}, "auth.scopes"),
    ({"type": "none", "client_secret": CLIENT_SECRET}, "auth"),
])
def test_bad_auth_is_named_without_its_value(auth: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidConfig) as refused:
        validate_config("REMOTE", {**BASE, "auth": auth})
    assert str(refused.value.details.get("field", "")).startswith(f"config.{field}")
    assert CLIENT_SECRET not in str(refused.value) and CLIENT_SECRET not in str(refused.value.details)


@pytest.mark.django_db
def test_client_secret_stays_out_of_detail_export_and_admin(api: Any, tenant: Any) -> None:
    from django.test import Client

    from tenants_app.models import Role
    from tests.factories import MembershipFactory, UserFactory

    resp = api.post("/api/v1/tools/", {"name": "linear", "type": "REMOTE", "config": {
        **BASE, "auth": {"type": "oauth2", "client_id": "abc", "client_secret": CLIENT_SECRET}}}, format="json")
    assert resp.status_code == 201, resp.content
    tool_id = resp.json()["id"]
    detail = api.get(f"/api/v1/tools/{tool_id}/")
    assert detail.json()["config_summary"]["auth"]["client_secret"] == MASK
    exported = api.post("/api/v1/tools/export/", {"ids": [tool_id]}, format="json")
    admin: Any = UserFactory(is_staff=True, is_superuser=True)
    MembershipFactory(tenant=tenant, user=admin, role=Role.OWNER)
    browser = Client()
    browser.force_login(admin)
    page = browser.get(f"/admin/tools_app/tool/{tool_id}/change/")
    assert page.status_code == 200
    for answer in (resp, detail, exported, page):
        assert CLIENT_SECRET not in answer.content.decode()
    # Saving with the mask keeps the stored secret.
    kept = api.patch(f"/api/v1/tools/{tool_id}/", {"config": {**BASE, "auth": {
        "type": "oauth2", "client_id": "abc", "client_secret": MASK}}}, format="json")
    assert kept.status_code == 200, kept.content
    from tools_app.models import Tool

    assert Tool.objects.get(pk=tool_id).config["auth"]["client_secret"] == CLIENT_SECRET



@pytest.mark.django_db
def test_a_kept_client_secret_does_not_follow_the_url_to_another_origin(api: Any) -> None:
    auth = {"type": "oauth2", "client_id": "abc", "client_secret": CLIENT_SECRET}
    tool_id = api.post("/api/v1/tools/", {"name": "linear", "type": "REMOTE", "config": {**BASE, "auth": auth}},
                       format="json").json()["id"]
    moved = api.patch(f"/api/v1/tools/{tool_id}/", {"config": {"url": "https://evil.example.net/mcp", "auth": {
        **auth, "client_secret": MASK}}}, format="json")
    assert moved.status_code == 400, moved.content
    assert moved.json()["error"]["details"]["secrets_required"] == ["config.auth.client_secret"]
    assert CLIENT_SECRET not in moved.content.decode()
