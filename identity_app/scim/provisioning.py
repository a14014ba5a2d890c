"""SCIM writes for one tenant: users and groups kept as rows, roles from group names, leavers off-boarded at once.

The SCIM resources themselves (parsing, PATCH, filters) are scim2-models' pydantic models; this module turns
them into rows and back."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from scim2_models import Context, GroupMember, GroupMembership, Meta, Reference
from scim2_models import Group as ScimGroupResource
from scim2_models import User as ScimUserResource

from identity_app import services
from identity_app.models import IdentityEventKind, ScimGroup, ScimUser
from tenants_app.models import Tenant

ACTOR = "scim"


class ScimProblem(Exception):
    """A refusal with its SCIM status and scimType (RFC 7644 §3.12)."""

    def __init__(self, status: int, detail: str, scim_type: str | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.scim_type = status, detail, scim_type


# --- rows -> resources ---------------------------------------------------------------------------------------


def _stored(model: Any, document: dict[str, Any]) -> Any:
    return model.model_validate(document, scim_ctx=Context.RESOURCE_REPLACEMENT_REQUEST)


def _document(resource: Any, *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    doc: dict[str, Any] = resource.model_dump(scim_ctx=Context.RESOURCE_REPLACEMENT_REQUEST)
    for key in ("id", "meta", *drop):
        doc.pop(key, None)
    return doc


def user_resource(row: ScimUser, *, base: str) -> ScimUserResource[Any]:
    resource: ScimUserResource[Any] = _stored(ScimUserResource[Any], row.document or {"userName": row.user.username})
    resource.id, resource.user_name = str(row.pk), row.user.username
    groups = [GroupMembership(value=str(g.pk), display=g.display_name, type="direct", ref=Reference(f"{base}/Groups/{g.pk}"))
              for g in row.groups.all()]
    resource.groups = groups or None
    resource.meta = Meta(resource_type="User", created=row.created_at, last_modified=row.updated_at,
                         location=f"{base}/Users/{row.pk}")
    return resource


def group_resource(row: ScimGroup, *, base: str) -> ScimGroupResource:
    stored = {k: v for k, v in (row.document or {"displayName": row.display_name}).items() if k != "members"}
    resource: ScimGroupResource = _stored(ScimGroupResource, stored)
    # The display the provider gave a member is kept (it names the person its way); else the username.
    shown = {str(m.get("value")): m.get("display") for m in (row.document or {}).get("members") or []
             if isinstance(m, dict)}
    members = [GroupMember(value=str(m.pk), display=shown.get(str(m.pk)) or m.user.username, type="User",
                           ref=Reference(f"{base}/Users/{m.pk}")) for m in row.members.all()]
    resource.id, resource.display_name, resource.members = str(row.pk), row.display_name, members or None
    resource.meta = Meta(resource_type="Group", created=row.created_at, last_modified=row.updated_at,
                         location=f"{base}/Groups/{row.pk}")
    return resource


# --- roles ---------------------------------------------------------------------------------------------------


def apply_roles(*, tenant: Tenant, rows: Iterable[ScimUser]) -> None:
    """Each active provisioned user's membership as their SCIM groups say (highest mapped role; none: no
    membership). Without a mapping, an active user keeps a hand-set role, or starts as a viewer."""
    mapping = services.role_map_of(tenant)
    for row in rows:
        if not row.active or not row.user.is_active:
            continue
        groups = [g.display_name for g in row.groups.all()]
        services.membership_from_groups(tenant=tenant, user=row.user, role=services.role_from_groups(mapping, groups),
                                        actor=ACTOR, mapped=bool(mapping))


# --- users ---------------------------------------------------------------------------------------------------


def _primary_email(resource: ScimUserResource[Any]) -> str:
    emails = resource.emails or []
    chosen = next((e for e in emails if e.primary), emails[0] if emails else None)
    return str(chosen.value or "").strip().lower() if chosen is not None else ""


def _scim_claimable(user: Any, tenant: Tenant) -> bool:
    """A Django user this tenant's SCIM may take on: no operator, and no member or SCIM user of another tenant."""
    if not services.claimable(user, tenant):
        return False
    return not ScimUser.objects.filter(user=user).exclude(tenant=tenant).exists()


def _write_user(row: ScimUser, resource: ScimUserResource[Any], *, tenant: Tenant) -> None:
    """Store what the resource says; a change of `active` to false off-boards the person in this request."""
    User = get_user_model()
    user = row.user
    username = str(resource.user_name or "").strip()
    if not username or len(username) > 150:
        raise ScimProblem(400, "userName is required (1-150 characters)", "invalidValue")
    if username != user.username:
        if User.objects.filter(username=username).exclude(pk=user.pk).exists():
            raise ScimProblem(409, f"userName {username!r} is taken", "uniqueness")
        user.username = username
    user.email = _primary_email(resource)
    name = resource.name
    user.first_name = str((name.given_name if name else None) or "")[:150]
    user.last_name = str((name.family_name if name else None) or "")[:150]
    was_active = row.active
    row.active = resource.active is not False
    row.external_id = str(resource.external_id or "")[:255]
    row.document = _document(resource, drop=("groups",))
    if row.active and not user.is_active:
        user.is_active = True
    user.save()
    row.save()
    if was_active and not row.active:
        services.member_offboard(tenant=tenant, user=user, actor=ACTOR, reason="deactivated through SCIM")
    else:
        apply_roles(tenant=tenant, rows=[row])


@transaction.atomic
def user_create(*, tenant: Tenant, resource: ScimUserResource[Any]) -> ScimUser:
    User = get_user_model()
    username = str(resource.user_name or "").strip()
    if not username:
        raise ScimProblem(400, "userName is required", "invalidValue")
    user = User.objects.filter(username=username).first()
    if user is not None:
        if ScimUser.objects.filter(tenant=tenant, user=user).exists() or not _scim_claimable(user, tenant):
            raise ScimProblem(409, f"userName {username!r} is taken", "uniqueness")
    else:
        user = User.objects.create(username=username)
        user.set_unusable_password()
        user.save(update_fields=["password"])
    row = ScimUser.objects.create(tenant=tenant, user=user, active=True)
    _write_user(row, resource, tenant=tenant)
    services.record(tenant=tenant, kind=IdentityEventKind.SCIM, actor=ACTOR, user=user,
                    message=f"user {username} created", details={"op": "create", "resource": "User", "id": row.pk})
    return row


@transaction.atomic
def user_replace(*, tenant: Tenant, row: ScimUser, resource: ScimUserResource[Any], op: str = "replace") -> ScimUser:
    row = ScimUser.objects.select_for_update().select_related("user").get(pk=row.pk)
    _write_user(row, resource, tenant=tenant)
    services.record(tenant=tenant, kind=IdentityEventKind.SCIM, actor=ACTOR, user=row.user,
                    message=f"user {row.user.username} {op}d", details={"op": op, "resource": "User", "id": row.pk,
                                                                         "active": row.active})
    return row


@transaction.atomic
def user_delete(*, tenant: Tenant, row: ScimUser) -> None:
    user = row.user
    if row.active:
        services.member_offboard(tenant=tenant, user=user, actor=ACTOR, reason="deleted through SCIM")
    services.record(tenant=tenant, kind=IdentityEventKind.SCIM, actor=ACTOR, user=user,
                    message=f"user {user.username} deleted", details={"op": "delete", "resource": "User", "id": row.pk})
    row.delete()


# --- groups --------------------------------------------------------------------------------------------------


def _members(tenant: Tenant, resource: ScimGroupResource) -> list[ScimUser]:
    ids: list[int] = []
    for member in resource.members or []:
        try:
            ids.append(int(str(member.value)))
        except (TypeError, ValueError):
            raise ScimProblem(400, f"member {str(member.value)[:64]!r} is not a user id of this tenant",
                              "invalidValue") from None
    found = list(ScimUser.objects.filter(tenant=tenant, pk__in=ids).select_related("user"))
    missing = sorted(set(ids) - {r.pk for r in found})
    if missing:
        raise ScimProblem(400, f"members name unknown users: {', '.join(map(str, missing))}", "invalidValue")
    return found


def _write_group(row: ScimGroup, resource: ScimGroupResource, *, tenant: Tenant) -> None:
    name = str(resource.display_name or "").strip()
    if not name or len(name) > 255:
        raise ScimProblem(400, "displayName is required (1-255 characters)", "invalidValue")
    if ScimGroup.objects.filter(tenant=tenant, display_name=name).exclude(pk=row.pk).exists():
        raise ScimProblem(409, f"a group named {name!r} exists", "uniqueness")
    members = _members(tenant, resource)
    before = set(row.members.all()) if row.pk else set()
    row.display_name, row.external_id = name, str(resource.external_id or "")[:255]
    row.document = _document(resource)
    row.save()
    row.members.set(members)
    apply_roles(tenant=tenant, rows=before | set(members))


@transaction.atomic
def group_create(*, tenant: Tenant, resource: ScimGroupResource) -> ScimGroup:
    row = ScimGroup(tenant=tenant)
    _write_group(row, resource, tenant=tenant)
    services.record(tenant=tenant, kind=IdentityEventKind.SCIM, actor=ACTOR, message=f"group {row.display_name} "
                    "created", details={"op": "create", "resource": "Group", "id": row.pk})
    return row


@transaction.atomic
def group_replace(*, tenant: Tenant, row: ScimGroup, resource: ScimGroupResource, op: str = "replace") -> ScimGroup:
    row = ScimGroup.objects.select_for_update().get(pk=row.pk)
    _write_group(row, resource, tenant=tenant)
    services.record(tenant=tenant, kind=IdentityEventKind.SCIM, actor=ACTOR, message=f"group {row.display_name} "
                    f"{op}d", details={"op": op, "resource": "Group", "id": row.pk})
    return row


@transaction.atomic
def group_delete(*, tenant: Tenant, row: ScimGroup) -> None:
    members = list(row.members.select_related("user"))
    name = row.display_name
    row.delete()
    apply_roles(tenant=tenant, rows=members)
    services.record(tenant=tenant, kind=IdentityEventKind.SCIM, actor=ACTOR, message=f"group {name} deleted",
                    details={"op": "delete", "resource": "Group"})
