"""The admin's identity providers: added through the service, the secret never shown again; the audit list."""

from __future__ import annotations

import json
from typing import Any

from identity_app.models import IdentityEvent, IdentityEventKind, IdentityProvider


def test_an_admin_adds_a_provider_and_the_secret_is_write_only(staff: Any, tenant: Any) -> None:
    resp = staff.post("/admin/identity_app/identityprovider/add/", {
        "tenant": tenant.pk, "name": "Keycloak", "issuer": "https://sso.acme.example/realms/acme",
        "client_id": "toolhub", "client_secret": "kc-secret-9", "email_domains": "acme.example, acme.dev",
        "groups_claim": "groups", "role_map": json.dumps({"toolhub-admins": "admin"}), "enforced": "on"})
    assert resp.status_code == 302, resp.content.decode()[:2000]
    provider = IdentityProvider.objects.get(name="Keycloak")
    assert provider.email_domains == ["acme.example", "acme.dev"] and provider.enforced
    assert provider.client_secret == {"value": "kc-secret-9"}
    page = staff.get(f"/admin/identity_app/identityprovider/{provider.pk}/change/").content.decode()
    assert "kc-secret-9" not in page and "/accounts/sso/callback/" in page


def test_a_bad_role_map_comes_back_as_a_form_error(staff: Any, tenant: Any) -> None:
    resp = staff.post("/admin/identity_app/identityprovider/add/", {
        "tenant": tenant.pk, "name": "Okta", "issuer": "https://acme.okta.example", "client_id": "x",
        "email_domains": "acme.example", "groups_claim": "groups", "role_map": json.dumps({"g": "boss"})})
    assert resp.status_code == 200 and "is not a role" in resp.content.decode()
    assert not IdentityProvider.objects.exists()


def test_the_audit_lists_the_tenants_events(staff: Any, tenant: Any) -> None:
    IdentityEvent.objects.create(tenant=tenant, kind=IdentityEventKind.SIGNIN, username="dana", role="admin",
                                 subject="u-1", actor="provider:Okta")
    page = staff.get("/admin/identity_app/identityevent/")
    assert page.status_code == 200 and "dana" in page.content.decode()
