"""A leaver deprovisioned through SCIM (scim2-client) loses everything in the same request: API token, gateway
OAuth token, per-user OAuth connection (revoked upstream), personal keys, sessions, pending approvals."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agents_app.gateway.tokens import grantee_for
from identity_app.models import IdentityEvent, IdentityEventKind
from tenants_app.models import Membership, Role
from tests.agents_app.support import make_agent
from tests.factories import ToolFactory
from tests.fixtures.oidc_provider import OIDCProvider
from tests.identity_app.support import scim_client, scim_token
from tools_app.models import (
    Approval,
    ApprovalStatus,
    CallStatus,
    OAuthConnection,
    OAuthRegistration,
    ToolCall,
    UserCredential,
)

ROLE_MAP = {"toolhub-users": "member", "toolhub-admins": "admin"}


def _provider(api: Any, role_map: dict[str, str]) -> None:
    resp = api.post("/api/v1/identity-providers/", {
        "name": "Acme", "issuer": "https://login.acme.test", "client_id": "toolhub", "client_secret": "s",
        "email_domains": ["acme.example.com"], "role_map": role_map}, format="json")
    assert resp.status_code == 201, resp.content


def _gateway_token(user: Any, tenant: Any, agent_id: int) -> str:
    app = get_application_model().objects.create(name="Desktop client", client_type="public",
                                                 authorization_grant_type="authorization-code",
                                                 redirect_uris="http://127.0.0.1:1/cb")
    token = secrets.token_urlsafe(24)
    get_access_token_model().objects.create(
        user=user, application=app, token=token, token_checksum=hashlib.sha256(token.encode()).hexdigest(),
        expires=timezone.now() + timedelta(hours=1), scope="mcp",
        resource=[f"http://testserver/mcp/{tenant.slug}/agents/{agent_id}/"])
    return token


def _connection(user: Any, tenant: Any, upstream: OIDCProvider) -> OAuthConnection:
    tool = ToolFactory(tenant=tenant, name="crm")
    registration = OAuthRegistration.objects.create(tenant=tenant, issuer=upstream.issuer, redirect_uri="http://x/cb",
                                                    client_id="toolhub", secret={"client_secret": "",
                                                                                 "auth_method": "none"})
    metadata = {"issuer": upstream.issuer, "authorization_endpoint": f"{upstream.issuer}/authorize",
                "token_endpoint": f"{upstream.issuer}/token", "revocation_endpoint": f"{upstream.issuer}/revoke",
                "response_types_supported": ["code"]}
    return OAuthConnection.objects.create(
        tenant=tenant, tool=tool, user=user, tokens={"access_token": "up-access", "refresh_token": "up-refresh"},
        discovery={"resource": "http://127.0.0.1:9/mcp", "issuer": upstream.issuer, "metadata": metadata},
        registration=registration)


def test_a_deactivated_user_loses_everything_at_once(api: Any, tenant: Any, settings: Any,
                                                     django_capture_on_commit_callbacks: Any) -> None:
    from scim2_models import Group, PatchOp, User  # here, not at the top: see tests/identity_app/support.py

    settings.TOOLHUB_PUBLIC_URL = "http://testserver"
    _provider(api, ROLE_MAP)
    scim = scim_client(scim_token(api))
    created = scim.create(User.model_validate(
        {"userName": "lee", "emails": [{"value": "lee@acme.example.com", "primary": True}], "active": True}))
    scim.create(Group.model_validate({"displayName": "toolhub-users", "members": [{"value": created.id}]}))
    user = get_user_model().objects.get(username="lee")
    assert Membership.objects.get(tenant=tenant, user=user).role == Role.MEMBER  # from the group

    api_token = Token.objects.create(user=user).key
    agent_id = make_agent(api, model=None, name="helper")
    gateway = _gateway_token(user, tenant, agent_id)
    UserCredential.objects.create(tenant=tenant, tool=ToolFactory(tenant=tenant, name="keys"), user=user,
                                  values={"API_KEY": "personal"})
    call = ToolCall.objects.create(tenant=tenant, tool_name="keys", function="f", actor=user,
                                   status=CallStatus.AWAITING_APPROVAL)
    approval = Approval.objects.create(tenant=tenant, tool_call=call, requested_by=user,
                                       expires_at=timezone.now() + timedelta(hours=1))
    browser = Client()
    browser.force_login(user)
    member_api = APIClient()
    member_api.credentials(HTTP_AUTHORIZATION=f"Token {api_token}", HTTP_X_TENANT=tenant.slug)
    assert member_api.get("/api/v1/tools/").status_code == 200
    assert grantee_for(token=gateway, tenant_slug=tenant.slug, agent_id=str(agent_id)) is not None

    with OIDCProvider() as upstream:
        connection = _connection(user, tenant, upstream)
        with django_capture_on_commit_callbacks(execute=True):  # the request's commit: revocation upstream
            scim.modify(User, created.id, PatchOp[User].model_validate(
                {"Operations": [{"op": "replace", "path": "active", "value": False}]}))
        assert sorted(upstream.revoked) == ["up-access", "up-refresh"]  # revoked upstream, in the request

    assert member_api.get("/api/v1/tools/").status_code == 401
    assert grantee_for(token=gateway, tenant_slug=tenant.slug, agent_id=str(agent_id)) is None
    assert not OAuthConnection.objects.filter(pk=connection.pk).exists()
    assert not UserCredential.objects.filter(user=user).exists()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXPIRED and approval.expired_reason == "requester_removed"
    assert "left the tenant" in approval.expired_message
    assert not Membership.objects.filter(tenant=tenant, user=user).exists()
    assert browser.get("/playground/").status_code == 302  # the browser session is gone
    user.refresh_from_db()
    assert not user.is_active
    event = IdentityEvent.objects.get(kind=IdentityEventKind.OFFBOARDED, user=user)
    assert event.details["api_tokens"] == 1 and event.details["gateway_grants"] >= 1
    assert event.details["oauth_connections"] == 1 and event.details["approvals"] == 1


def test_deleting_a_user_through_scim_ends_their_access_too(api: Any, tenant: Any, settings: Any) -> None:
    from scim2_models import User  # here, not at the top: see tests/identity_app/support.py

    settings.TOOLHUB_PUBLIC_URL = "http://testserver"
    scim = scim_client(scim_token(api))
    created = scim.create(User.model_validate({"userName": "max", "active": True}))
    user = get_user_model().objects.get(username="max")
    assert Membership.objects.get(tenant=tenant, user=user).role == Role.VIEWER  # no mapping: a viewer
    key = Token.objects.create(user=user).key
    scim.delete(User, created.id)
    assert not Token.objects.filter(key=key).exists()
    assert not Membership.objects.filter(tenant=tenant, user=user).exists()
    assert scim_client(scim_token(api)).query(User).total_results == 0


def test_a_group_whose_name_is_in_the_role_map_gives_its_role(api: Any, tenant: Any, settings: Any) -> None:
    from scim2_models import Group, PatchOp, User  # here, not at the top: see tests/identity_app/support.py

    settings.TOOLHUB_PUBLIC_URL = "http://testserver"
    _provider(api, ROLE_MAP)
    scim = scim_client(scim_token(api))
    one = scim.create(User.model_validate({"userName": "nia", "active": True}))
    user = get_user_model().objects.get(username="nia")
    assert not Membership.objects.filter(tenant=tenant, user=user).exists()  # mapped tenant, no group yet
    admins = scim.create(Group.model_validate({"displayName": "toolhub-admins", "members": [{"value": one.id}]}))
    assert Membership.objects.get(tenant=tenant, user=user).role == Role.ADMIN
    scim.modify(Group, admins.id, PatchOp[Group].model_validate(
        {"Operations": [{"op": "remove", "path": f'members[value eq "{one.id}"]'}]}))
    assert not Membership.objects.filter(tenant=tenant, user=user).exists()


def test_scim_needs_its_tenants_token_and_sees_only_that_tenant(api: Any, other_api: Any, settings: Any) -> None:
    from scim2_models import User  # here, not at the top: see tests/identity_app/support.py

    settings.TOOLHUB_PUBLIC_URL = "http://testserver"
    mine = scim_client(scim_token(api))
    created = mine.create(User.model_validate({"userName": "oli", "active": True}))
    theirs = scim_client(scim_token(other_api))
    assert theirs.query(User).total_results == 0
    resp = Client().get(f"/scim/v2/Users/{created.id}", HTTP_AUTHORIZATION="Bearer nope")
    assert resp.status_code == 401 and resp.json()["status"] == "401"
    foreign = Client().get(f"/scim/v2/Users/{created.id}", HTTP_AUTHORIZATION=f"Bearer {scim_token(other_api)}")
    assert foreign.status_code == 404
