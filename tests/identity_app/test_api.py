"""The identity-providers and scim-tokens API: the contract's fields, write-only secrets, typed errors, roles."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from identity_app.models import IdentityProvider, ScimToken
from tenants_app.models import Role

BODY = {"name": "Okta", "issuer": "https://acme.okta.example/", "client_id": "0oa123", "client_secret": "cs-secret-1",
        "email_domains": ["Acme.example", "@corp.acme.example"], "role_map": {"Toolhub Admins": "admin"}}


def test_create_shows_the_contract_fields_and_never_the_secret(api: Any, settings: Any) -> None:
    settings.TOOLHUB_PUBLIC_URL = "https://toolhub.acme.example"
    resp = api.post("/api/v1/identity-providers/", BODY, format="json")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert {"name", "issuer", "client_id", "email_domains", "groups_claim", "role_map", "enforced",
            "redirect_uri"} <= set(body)
    assert "client_secret" not in body and "cs-secret-1" not in resp.content.decode()
    assert body["issuer"] == "https://acme.okta.example" and body["groups_claim"] == "groups"
    assert body["email_domains"] == ["acme.example", "corp.acme.example"] and body["enforced"] is False
    assert body["redirect_uri"] == "https://toolhub.acme.example/accounts/sso/callback/"
    stored = IdentityProvider.objects.get(pk=body["id"])
    assert stored.client_secret == {"value": "cs-secret-1"}
    listed = api.get("/api/v1/identity-providers/").json()
    assert listed["count"] == 1 and "cs-secret-1" not in str(listed)


def test_patch_keeps_the_secret_unless_given(api: Any) -> None:
    pid = api.post("/api/v1/identity-providers/", BODY, format="json").json()["id"]
    resp = api.patch(f"/api/v1/identity-providers/{pid}/", {"enforced": True, "client_secret": ""}, format="json")
    assert resp.status_code == 200 and resp.json()["enforced"] is True
    assert IdentityProvider.objects.get(pk=pid).client_secret == {"value": "cs-secret-1"}
    api.patch(f"/api/v1/identity-providers/{pid}/", {"client_secret": "rotated"}, format="json")
    assert IdentityProvider.objects.get(pk=pid).client_secret == {"value": "rotated"}
    assert api.delete(f"/api/v1/identity-providers/{pid}/").status_code == 204
    assert not IdentityProvider.objects.filter(pk=pid).exists()


def test_bad_input_gets_typed_errors_naming_what_is_accepted(api: Any) -> None:
    bad_role = api.post("/api/v1/identity-providers/", {**BODY, "role_map": {"g": "boss"}}, format="json")
    assert bad_role.status_code == 400
    assert bad_role.json()["error"]["code"] == "invalid" and "owner, admin, member, viewer" in bad_role.json()["error"]["message"]
    bad_domain = api.post("/api/v1/identity-providers/", {**BODY, "email_domains": "acme.example"}, format="json")
    assert bad_domain.status_code == 400 and bad_domain.json()["error"]["details"]["field"] == "email_domains"
    bad_issuer = api.post("/api/v1/identity-providers/", {**BODY, "issuer": "ftp://x"}, format="json")
    assert bad_issuer.status_code == 400 and bad_issuer.json()["error"]["details"]["field"] == "issuer"
    unknown = api.post("/api/v1/identity-providers/", {**BODY, "secret": "x"}, format="json")
    assert unknown.status_code == 400 and "accepted" in unknown.content.decode()
    enforced_alone = api.post("/api/v1/identity-providers/", {**BODY, "email_domains": [], "enforced": True},
                              format="json")
    assert enforced_alone.status_code == 400


def test_a_domain_belongs_to_one_provider_across_tenants(api: Any, other_api: Any) -> None:
    assert api.post("/api/v1/identity-providers/", BODY, format="json").status_code == 201
    taken = other_api.post("/api/v1/identity-providers/", {**BODY, "email_domains": ["acme.example"]}, format="json")
    assert taken.status_code == 409 and taken.json()["error"]["details"]["domains"] == ["acme.example"]


def test_members_and_other_tenants_cannot_see_providers(api: Any, other_api: Any, tenant: Any,
                                                         member_client: Any) -> None:
    pid = api.post("/api/v1/identity-providers/", BODY, format="json").json()["id"]
    member = member_client(tenant, Role.MEMBER)
    assert member.get("/api/v1/identity-providers/").status_code == 403
    assert member.post("/api/v1/scim-tokens/", {}, format="json").status_code == 403
    foreign = other_api.get(f"/api/v1/identity-providers/{pid}/")
    missing = other_api.get("/api/v1/identity-providers/999999/")
    assert foreign.status_code == missing.status_code == 404 and foreign.json() == missing.json()


def test_scim_token_is_shown_once_and_stored_hashed(api: Any) -> None:
    resp = api.post("/api/v1/scim-tokens/", {}, format="json")
    assert resp.status_code == 201 and set(resp.json()) == {"id", "token"}
    token = resp.json()["token"]
    row = ScimToken.objects.get(pk=resp.json()["id"])
    assert token not in row.token_hash and row.token_hash != token
    assert token not in api.get("/api/v1/scim-tokens/").content.decode()
    assert api.delete(f"/api/v1/scim-tokens/{row.pk}/").status_code == 204
    from django.test import Client
    assert Client().get("/scim/v2/Users", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401
    assert get_user_model().objects.count() >= 1
