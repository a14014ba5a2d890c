"""Tenant and membership writes go through the services, in the real Django admin and from code."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from core.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from tenants_app import services
from tenants_app.models import Membership, Role, Tenant
from tests.factories import MembershipFactory, TenantFactory, UserFactory
from tools_app.models import Tool

pytestmark = pytest.mark.django_db


def staff(tenant: Tenant, role: str, username: str) -> Any:
    user = UserFactory(username=username, is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=role)
    return user


@pytest.fixture
def acme(db: Any) -> Tenant:
    return TenantFactory(slug="acme")


@pytest.fixture
def globex(db: Any) -> Tenant:
    return TenantFactory(slug="globex")


@pytest.fixture
def boss(acme: Tenant) -> Any:
    return staff(acme, Role.OWNER, "boss")


@pytest.fixture
def admin_user(acme: Tenant, boss: Any) -> Any:
    return staff(acme, Role.ADMIN, "adam")


def browser(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def membership(tenant: Tenant, user: Any) -> Membership:
    return Membership.objects.get(tenant=tenant, user=user)


def messages_of(resp: Any) -> list[str]:
    """What the page says: its messages, and the errors of a form the service refused (shown at their fields)."""
    if not resp.context:
        return []
    said = [str(m) for m in resp.context["messages"]]
    if "adminform" in resp.context:
        said += [str(e) for errors in resp.context["adminform"].form.errors.values() for e in errors]
    return said


# --- through the Django admin ----------------------------------------------------------------------


def test_admin_cannot_make_themselves_owner(acme: Tenant, admin_user: Any) -> None:
    own = membership(acme, admin_user)
    resp = browser(admin_user).post(f"/admin/tenants_app/membership/{own.pk}/change/", {"role": "owner"},
                                    follow=True)
    assert membership(acme, admin_user).role == Role.ADMIN
    assert any("owner" in m for m in messages_of(resp))


def test_admin_cannot_demote_or_remove_the_owner(acme: Tenant, boss: Any, admin_user: Any) -> None:
    owner = membership(acme, boss)
    client = browser(admin_user)
    client.post(f"/admin/tenants_app/membership/{owner.pk}/change/", {"role": "member"}, follow=True)
    assert membership(acme, boss).role == Role.OWNER
    client.post(f"/admin/tenants_app/membership/{owner.pk}/delete/", {"post": "yes"}, follow=True)
    client.post("/admin/tenants_app/membership/", {"action": "delete_selected", "_selected_action": [owner.pk],
                                                   "post": "yes"}, follow=True)
    assert membership(acme, boss).role == Role.OWNER


def test_admin_adds_members_by_username_only(acme: Tenant, globex: Tenant, admin_user: Any) -> None:
    outsider = staff(globex, Role.MEMBER, "outsider")
    client = browser(admin_user)
    # The old user-id picker: a posted id is ignored, nothing is added.
    resp = client.post("/admin/tenants_app/membership/add/", {"tenant": acme.pk, "user": outsider.pk, "role": "member"})
    assert resp.status_code == 200 and not Membership.objects.filter(tenant=acme, user=outsider).exists()
    page = client.get("/admin/tenants_app/membership/add/").content.decode()
    assert 'name="username"' in page and "outsider" not in page and "globex" not in page
    # Named by username, an existing account can be added (as member, not as owner).
    client.post("/admin/tenants_app/membership/add/", {"tenant": acme.pk, "username": "outsider", "role": "owner"},
                follow=True)
    assert not Membership.objects.filter(tenant=acme, user=outsider).exists()
    client.post("/admin/tenants_app/membership/add/", {"tenant": acme.pk, "username": "outsider", "role": "member"},
                follow=True)
    assert membership(acme, outsider).role == Role.MEMBER


def test_unknown_and_unaddable_users_answer_alike(acme: Tenant, admin_user: Any) -> None:
    UserFactory(username="sleeper", is_active=False)
    UserFactory(username="root", is_superuser=True)
    client = browser(admin_user)
    answers = []
    for name in ("nobody-here", "sleeper", "root"):
        resp = client.post("/admin/tenants_app/membership/add/", {"tenant": acme.pk, "username": name,
                                                                  "role": "member"}, follow=True)
        answers.append(messages_of(resp))
    assert answers[0] == answers[1] == answers[2] and answers[0]
    assert Membership.objects.filter(tenant=acme).count() == 2


def test_admin_cannot_add_to_a_foreign_tenant(acme: Tenant, globex: Tenant, admin_user: Any) -> None:
    UserFactory(username="newbie")
    browser(admin_user).post("/admin/tenants_app/membership/add/",
                             {"tenant": globex.pk, "username": "newbie", "role": "member"}, follow=True)
    assert not Membership.objects.filter(tenant=globex).exists()


def tenant_form(tenant: Tenant, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"slug": tenant.slug, "name": tenant.name, "is_active": "on",
                            "command_interpreters": "", "sql_allowed_tables": "", "tool_screen": tenant.tool_screen}
    for flag in ("admins_can_approve", "approval_second_person", "allow_imported_auto_approve",
                 "approve_after_flagged_result"):
        if getattr(tenant, flag):
            data[flag] = "on"
    data.update(changes)
    return data


def test_admin_cannot_change_tenant_policy_or_slug(acme: Tenant, admin_user: Any) -> None:
    browser(admin_user).post(f"/admin/tenants_app/tenant/{acme.pk}/change/", tenant_form(
        acme, slug="hijacked", name="Hijacked", admins_can_approve="on", approval_second_person="",
        command_interpreters="python3", sql_allowed_tables="auth_user"), follow=True)
    acme.refresh_from_db()
    assert (acme.slug, acme.name, acme.admins_can_approve, acme.command_interpreters, acme.sql_allowed_tables) == (
        "acme", "Acme", False, [], None)


def test_owner_changes_tenant_policy(acme: Tenant, boss: Any) -> None:
    resp = browser(boss).post(f"/admin/tenants_app/tenant/{acme.pk}/change/", tenant_form(
        acme, name="Acme Corp", admins_can_approve="on", approval_second_person="on",
        command_interpreters="python3\nnode\n", sql_allowed_tables=" orders \ncustomers"), follow=True)
    assert resp.status_code == 200
    acme.refresh_from_db()
    assert acme.name == "Acme Corp" and acme.admins_can_approve and acme.approval_second_person
    assert acme.command_interpreters == ["python3", "node"] and acme.is_active
    assert acme.sql_allowed_tables == ["orders", "customers"]
    page = browser(boss).get(f"/admin/tenants_app/tenant/{acme.pk}/change/").content.decode()
    assert "python3\nnode</textarea>" in page and '["python3"' not in page  # one per line, no JSON
    browser(boss).post(f"/admin/tenants_app/tenant/{acme.pk}/change/", tenant_form(acme, sql_allowed_tables=""))
    acme.refresh_from_db()
    assert acme.sql_allowed_tables is None  # empty: back to the platform's default tables


def test_owner_cannot_deactivate(acme: Tenant, boss: Any) -> None:
    browser(boss).post(f"/admin/tenants_app/tenant/{acme.pk}/change/",
                       {**tenant_form(acme), "is_active": ""}, follow=True)
    acme.refresh_from_db()
    assert acme.is_active


def test_by_tenant_filter_lists_only_the_viewers_tenants(acme: Tenant, globex: Tenant, admin_user: Any) -> None:
    TenantFactory(slug="initech")
    client = browser(admin_user)
    for url in ("/admin/tenants_app/membership/", "/admin/tools_app/tool/", "/admin/tools_app/toolcall/",
                "/admin/tools_app/toolfunction/", "/admin/agents_app/agent/", "/admin/agents_app/chatmodel/"):
        resp = client.get(url)
        assert resp.status_code == 200, url
        page = resp.content.decode()
        assert "globex" not in page and "initech" not in page, url
    assert Tool.objects.filter(tenant=globex).exists()
    foreign = client.get(f"/admin/tools_app/tool/?tenant__id__exact={globex.pk}")
    assert "globex" not in foreign.content.decode()


# --- the services ----------------------------------------------------------------------------------


def test_services_enforce_the_owner_rules(acme: Tenant, boss: Any, admin_user: Any) -> None:
    own = membership(acme, admin_user)
    with pytest.raises(PermissionDenied):
        services.membership_set_role(tenant=acme, actor=admin_user, membership_id=own.pk, role=Role.OWNER)
    with pytest.raises(PermissionDenied):
        services.membership_set_role(tenant=acme, actor=admin_user, membership_id=membership(acme, boss).pk,
                                     role=Role.ADMIN)
    with pytest.raises(PermissionDenied):
        services.membership_remove(tenant=acme, actor=admin_user, membership_id=membership(acme, boss).pk)
    with pytest.raises(PermissionDenied):
        services.tenant_update(tenant=acme, actor=admin_user, changes={"approval_second_person": True})
    with pytest.raises(Conflict):  # the last owner stays
        services.membership_set_role(tenant=acme, actor=boss, membership_id=membership(acme, boss).pk,
                                     role=Role.ADMIN)
    promoted = services.membership_set_role(tenant=acme, actor=boss, membership_id=own.pk, role=Role.OWNER)
    assert promoted.role == Role.OWNER
    services.membership_set_role(tenant=acme, actor=admin_user, membership_id=membership(acme, boss).pk,
                                 role=Role.ADMIN)  # now an owner, adam may
    assert membership(acme, boss).role == Role.ADMIN


def test_services_hide_who_exists_and_other_tenants(acme: Tenant, globex: Tenant, admin_user: Any) -> None:
    member = staff(acme, Role.MEMBER, "mel")
    with pytest.raises(PermissionDenied):
        services.membership_add(tenant=acme, actor=member, username="adam", role=Role.MEMBER)
    with pytest.raises(NotFound):  # not a member of globex: the tenant is missing
        services.membership_add(tenant=globex, actor=admin_user, username="mel", role=Role.MEMBER)
    with pytest.raises(ValidationFailed) as unknown:
        services.membership_add(tenant=acme, actor=admin_user, username="ghost", role=Role.MEMBER)
    with pytest.raises(PermissionDenied):
        services.membership_add(tenant=acme, actor=admin_user, username="ghost", role=Role.MEMBER, create_user=True)
    assert unknown.value.message == services.NO_SUCH_USER
    assert not get_user_model().objects.filter(username="ghost").exists()


def test_commands_go_through_the_services(acme: Tenant) -> None:
    call_command("create_tenant", "initech", "--name", "Initech")
    call_command("add_member", "initech", "peter", "--role", "owner", "--password", "pw12345!")
    initech = Tenant.objects.get(slug="initech")
    peter = membership(initech, get_user_model().objects.get(username="peter"))
    assert peter.role == Role.OWNER and peter.user.is_staff and peter.user.check_password("pw12345!")
    with pytest.raises(CommandError, match="at least one owner"):  # the command prints the Conflict's message
        call_command("add_member", "initech", "peter", "--role", "member")
    call_command("add_member", "initech", "mike", "--role", "owner")
    call_command("add_member", "initech", "peter", "--role", "member")  # the operator re-roles
    assert membership(initech, peter.user).role == Role.MEMBER


def test_the_local_network_is_an_operators_choice_and_host_is_shown_in_red(acme: Tenant, boss: Any) -> None:
    operator = UserFactory(is_superuser=True, is_staff=True)
    for network in ("public", "host"):
        with pytest.raises(PermissionDenied):
            services.tenant_update(tenant=acme, actor=boss, changes={"local_network": network})
    with pytest.raises(ValidationFailed) as bad:
        services.tenant_update(tenant=acme, actor=operator, changes={"local_network": "internet"})
    assert "'internet'" in bad.value.message and "none, public, host" in bad.value.message
    acme = services.tenant_update(tenant=acme, actor=operator, changes={"local_network": "public"})
    page = browser(operator).get(f"/admin/tenants_app/tenant/{acme.pk}/change/").content.decode()
    assert "The internet only" in page and "toolhub-host-network" not in page
    acme = services.tenant_update(tenant=acme, actor=operator, changes={"local_network": "host"})
    page = browser(operator).get(f"/admin/tenants_app/tenant/{acme.pk}/change/").content.decode()
    assert 'class="toolhub-host-network" style="color: #ba2121"' in page
    assert "Redis, PostgreSQL, the LOCAL server runners, the web processes" in page
    # The owner sees what it exposes, and cannot change it.
    owner_page = browser(boss).get(f"/admin/tenants_app/tenant/{acme.pk}/change/").content.decode()
    assert "toolhub-host-network" in owner_page and 'name="local_network"' not in owner_page
