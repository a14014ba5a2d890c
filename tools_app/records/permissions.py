"""Who may do what to which rows: tenant scope, the row filter, Django model and guardian object permissions.

A model permission (user, group or superuser) covers every row of the tenant the row filter lets the user see;
without one, guardian object permissions name the rows. A user with neither for an operation has lost the model
as a whole, and that is a denial naming the operation and the model; a row they merely cannot reach is treated
by the callers exactly like a row that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Model, QuerySet
from guardian.shortcuts import get_objects_for_user

from core.codes import ApiCode
from core.errors import BusinessError
from tenants_app.models import Tenant
from tools_app.records.registry import RecordModel

VIEW, ADD, CHANGE, DELETE = "view", "add", "change", "delete"
VERBS = {VIEW: "read", ADD: "create", CHANGE: "change", DELETE: "delete"}


class PermissionRefused(BusinessError):
    code = ApiCode.PERMISSION_DENIED


def codenames(spec: RecordModel, action: str) -> list[str]:
    name = spec.model._meta.model_name
    # Whoever may change a row may read it (as in the Django admin).
    actions = [VIEW, CHANGE] if action == VIEW else [action]
    return [f"{a}_{name}" for a in actions]


def scoped(spec: RecordModel, *, tenant: Tenant, user: Any) -> QuerySet[Model]:
    """The tenant's rows the row filter leaves this user, before any permission."""
    qs = spec.model._default_manager.filter(**{spec.tenant_field: tenant})
    if spec.row_filter is not None:
        q = spec.row_filter(user, tenant)
        if q is not None:
            qs = qs.filter(q)
    return qs


@dataclass(frozen=True)
class Access:
    rows: QuerySet[Model]
    whole_model: bool  # a model permission: every scoped row, no per-row grant needed


def model_permission(spec: RecordModel, user: Any, action: str) -> bool:
    app = spec.model._meta.app_label
    return any(user.has_perm(f"{app}.{c}") for c in codenames(spec, action))


def access(spec: RecordModel, *, tenant: Tenant, user: Any, action: str) -> Access:
    """The rows this user may `action`; a denial naming the operation and model when they may touch none."""
    qs = scoped(spec, tenant=tenant, user=user)
    if model_permission(spec, user, action):
        return Access(qs, True)
    app = spec.model._meta.app_label
    perms = [f"{app}.{c}" for c in codenames(spec, action)]
    if action != ADD:
        granted = get_objects_for_user(user, perms, klass=qs, any_perm=True, accept_global_perms=False,
                                       with_superuser=False)
        # Object permissions anywhere mean the user holds the model conditionally: rows decide, not the model.
        anywhere = get_objects_for_user(user, perms, klass=spec.model._default_manager.all(), any_perm=True,
                                        accept_global_perms=False, with_superuser=False)
        if anywhere.exists():
            return Access(granted, False)
    raise PermissionRefused(
        f"you may not {VERBS[action]} {spec.name} records (no {perms[-1]} permission)",
        details={"reason": "permission_denied", "model": spec.name, "operation": VERBS[action]},
    )
