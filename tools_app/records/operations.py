"""Read, create, update and delete registered records as the user: one transaction per call, all or nothing.

A write batch either lands whole or not at all, and a failure names the item's index. A row the user cannot
read is reported exactly like an id that does not exist; one they can read but not change is refused by name.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Model, ProtectedError, RestrictedError

from core.codes import ApiCode, ResultCode
from core.errors import BusinessError, InvalidParams, RuntimeToolError
from tenants_app.models import Tenant
from tools_app.records.args import MAX_BATCH
from tools_app.records.permissions import ADD, CHANGE, DELETE, VIEW, PermissionRefused, access, scoped
from tools_app.records.query import check_fields
from tools_app.records.registry import REFERENCE, RecordModel, get_record_model, registered_for
from tools_app.records.values import check_writable, field_value, row, validation_message


class RecordNotFound(RuntimeToolError):
    code = ApiCode.RECORD_NOT_FOUND
    result_code = ResultCode.NOT_FOUND


def one_or_many(single: Any, many: Any, names: tuple[str, str]) -> tuple[list[Any], bool]:
    """The call's items and whether it was a batch; the singular form or the plural one, never both."""
    one, plural = names
    if single is not None and many is not None:
        raise InvalidParams(f"pass {one!r} or {plural!r}, not both", details={"conflicting": [one, plural]})
    if single is None and many is None:
        raise InvalidParams(f"pass {one!r} (one) or {plural!r} (a list of up to {MAX_BATCH})",
                            details={"required": [one, plural]})
    if many is None:
        return [single], False
    if not many:
        raise InvalidParams(f"{plural!r} is empty")
    if len(many) > MAX_BATCH:
        raise InvalidParams(f"at most {MAX_BATCH} {plural} per call; got {len(many)}: split the batch",
                            details={"max": MAX_BATCH, "got": len(many)})
    return list(many), True


def _where(batch: bool, plural: str, index: int) -> str:
    return f"{plural}[{index}]" if batch else plural.rstrip("s")


def _named(spec: RecordModel, obj: Model) -> str:
    """'order 5 (…)': the record's id and how the model names it (once, if its own name already says the id)."""
    head, text = f"{spec.name} {obj.pk}", str(obj)[:80]
    return text if text.startswith(head) else f"{head} ({text})" if text else head


def _unique(ids: list[Any], plural: str, batch: bool) -> None:
    seen: set[Any] = set()
    for i, pk in enumerate(ids):
        if pk in seen:
            raise InvalidParams(f"{_where(batch, plural, i)}: id {pk} appears more than once in the call")
        seen.add(pk)


# --- references -----------------------------------------------------------------------------------


def _reference_targets(spec: RecordModel, *, tenant: Tenant, user: Any,
                       items: list[dict[str, Any]]) -> dict[str, set[Any]]:
    """For each reference field the items set: the ids among them the user may see (one query per field).

    A registered target is read as the user (permissions, row filter); any other is scoped to the tenant
    when it has a tenant field. An id outside is refused like one that does not exist.
    """
    out: dict[str, set[Any]] = {}
    for name in spec.writable:
        if spec.kind(name) != REFERENCE:
            continue
        wanted = {item[name] for item in items if isinstance(item.get(name), int) and not isinstance(item[name], bool)}
        if not wanted:
            continue
        related = spec.model_field(name).related_model
        target = registered_for(related)
        if target is not None:
            qs = access(target, tenant=tenant, user=user, action=VIEW).rows
        else:
            qs = related._default_manager.all()  # type: ignore[union-attr]
            if any(f.name == "tenant" and f.related_model is Tenant for f in related._meta.concrete_fields):  # type: ignore[union-attr]
                qs = qs.filter(tenant=tenant)
        out[name] = set(qs.filter(pk__in=wanted).values_list("pk", flat=True))
    return out


def _apply(spec: RecordModel, obj: Model, values: dict[str, Any], targets: dict[str, set[Any]], where: str) -> None:
    for name, raw in values.items():
        value = field_value(spec, name, raw, where=where, convert=False)  # _clean converts and validates
        f = spec.model_field(name)
        if spec.kind(name) == REFERENCE and value is not None and value not in targets.get(name, set()):
            label = getattr(registered_for(f.related_model), "name", None) or f.related_model._meta.model_name  # type: ignore[union-attr]
            raise InvalidParams(f"{where}: field {name!r}: no {label} record with id {value}",
                                details={"field": name, "id": value})
        setattr(obj, f.attname, value)


def _clean(spec: RecordModel, obj: Model, where: str, index: int) -> None:
    references = [f.name for f in obj._meta.concrete_fields if f.is_relation]
    try:
        # References were checked above as the user; uniqueness and constraints are the database's to enforce.
        obj.full_clean(exclude=references, validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        raise InvalidParams(f"{where}: {validation_message(exc)}; nothing was written",
                            details={"index": index}) from None


def _save(obj: Model, where: str, index: int, **kwargs: Any) -> None:
    try:
        obj.save(**kwargs)
    except IntegrityError as exc:
        raise BusinessError(f"{where}: the database refused it ({exc}); nothing was written",
                            details={"index": index}) from None


def _outside(spec: RecordModel, *, tenant: Tenant, user: Any, ids: list[Any]) -> set[Any]:
    """Of these saved ids, those the row filter no longer lets the user see (nothing to check without one)."""
    if spec.row_filter is None:
        return set()
    seen = set(scoped(spec, tenant=tenant, user=user).filter(pk__in=ids).values_list("pk", flat=True))
    return set(ids) - seen


# --- the operations -------------------------------------------------------------------------------


def read_records(*, tenant: Tenant, user: Any, model: str, id: Any = None, ids: Any = None,
                 fields: list[str] | None = None) -> dict[str, Any]:
    spec = get_record_model(model)
    wanted, batch = one_or_many(id, ids, ("id", "ids"))
    columns = check_fields(spec, list(fields or spec.fields), where="fields")
    rows = access(spec, tenant=tenant, user=user, action=VIEW).rows.filter(pk__in=wanted)
    found = {obj.pk: obj for obj in rows}
    records = [row(spec, found[pk], columns) for pk in dict.fromkeys(wanted) if pk in found]
    missing = [pk for pk in dict.fromkeys(wanted) if pk not in found]
    if not batch:
        return {"model": spec.name, "record": records[0] if records else None, "missing": missing}
    return {"model": spec.name, "records": records, "missing": missing}


@transaction.atomic
def create_records(*, tenant: Tenant, user: Any, model: str, record: Any = None,
                   records: Any = None) -> dict[str, Any]:
    spec = get_record_model(model)
    items, batch = one_or_many(record, records, ("record", "records"))
    access(spec, tenant=tenant, user=user, action=ADD)
    for i, values in enumerate(items):
        check_writable(spec, values, where=_where(batch, "records", i))
    targets = _reference_targets(spec, tenant=tenant, user=user, items=items)
    objs: list[Model] = []
    for i, values in enumerate(items):
        where = _where(batch, "records", i)
        obj = spec.model(**{spec.tenant_field: tenant})
        _apply(spec, obj, values, targets, where)
        _clean(spec, obj, where, i)
        objs.append(obj)
    for i, obj in enumerate(objs):
        _save(obj, _where(batch, "records", i), i, force_insert=True)
    outside = _outside(spec, tenant=tenant, user=user, ids=[o.pk for o in objs])
    for i, obj in enumerate(objs):
        if obj.pk in outside:
            raise PermissionRefused(f"{_where(batch, 'records', i)}: the new record would fall outside the "
                                    f"{spec.name} records you may see; nothing was written", details={"index": i})
    out = [row(spec, obj) for obj in objs]
    if not batch:
        return {"model": spec.name, "record": out[0]}
    return {"model": spec.name, "created": len(out), "records": out}


@transaction.atomic
def update_records(*, tenant: Tenant, user: Any, model: str, record: Any = None,
                   records: Any = None) -> dict[str, Any]:
    spec = get_record_model(model)
    items, batch = one_or_many(record, records, ("record", "records"))
    ids: list[Any] = []
    changes: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        where = _where(batch, "records", i)
        pk = item.get("id")
        if not isinstance(pk, int) or isinstance(pk, bool):
            raise InvalidParams(f"{where}: 'id' (an integer) names the record to update")
        values = {k: v for k, v in item.items() if k != "id"}
        if not values:
            raise InvalidParams(f"{where}: nothing to set; writable fields: {', '.join(spec.writable)}")
        check_writable(spec, values, where=where)
        ids.append(pk)
        changes.append(values)
    _unique(ids, "records", batch)
    changeable = set(access(spec, tenant=tenant, user=user, action=CHANGE).rows.filter(pk__in=ids)
                     .values_list("pk", flat=True))
    readable = {o.pk: o for o in access(spec, tenant=tenant, user=user, action=VIEW).rows
                .filter(pk__in=ids).select_for_update()}
    targets = _reference_targets(spec, tenant=tenant, user=user, items=changes)
    before: list[dict[str, Any]] = []
    for i, (pk, values) in enumerate(zip(ids, changes, strict=True)):
        where = _where(batch, "records", i)
        obj = readable.get(pk)
        if obj is None:
            raise RecordNotFound(f"{where}: no {spec.name} record found with id {pk}; nothing was written",
                                 details={"index": i, "id": pk})
        if pk not in changeable:
            raise PermissionRefused(f"{where}: you may not change {_named(spec, obj)}; nothing was written",
                                    details={"index": i, "id": pk, "reason": "permission_denied"})
        before.append(row(spec, obj, list(values)))
        _apply(spec, obj, values, targets, where)
        _clean(spec, obj, where, i)
        _save(obj, where, i)
    outside = _outside(spec, tenant=tenant, user=user, ids=ids)
    # Read back what was stored: a value the save adjusted or did not take shows as it is now.
    after = {o.pk: o for o in spec.model._default_manager.filter(pk__in=ids)}
    out = []
    for i, (pk, values) in enumerate(zip(ids, changes, strict=True)):
        if pk in outside:
            raise PermissionRefused(f"{_where(batch, 'records', i)}: the change would take {spec.name} {pk} outside "
                                    f"the records you may see; nothing was written", details={"index": i, "id": pk})
        now = row(spec, after[pk], list(values))
        out.append({"id": pk, "changes": {name: {"before": before[i][name], "after": now[name]} for name in values}})
    if not batch:
        return {"model": spec.name, "record": out[0]}
    return {"model": spec.name, "updated": len(out), "records": out}


def _delete_plan(spec: RecordModel, *, tenant: Tenant, user: Any,
                 wanted: list[Any]) -> tuple[dict[Any, Model], list[Any]]:
    """(the records to delete by id, the ids that matched nothing visible); refuses if any may not be deleted."""
    deletable = {o.pk: o for o in access(spec, tenant=tenant, user=user, action=DELETE).rows.filter(pk__in=wanted)}
    try:
        readable = {o.pk: o for o in access(spec, tenant=tenant, user=user, action=VIEW).rows.filter(pk__in=wanted)}
    except PermissionRefused:
        readable = {}
    # Every id is settled before anything is removed: one the user may read but not delete stops the batch.
    refused = [readable[pk] for pk in dict.fromkeys(wanted) if pk in readable and pk not in deletable]
    if refused:
        names = ", ".join(_named(spec, o) for o in refused)
        raise PermissionRefused(f"you may not delete {names}; nothing was deleted",
                                details={"ids": [o.pk for o in refused], "reason": "permission_denied"})
    missing = [pk for pk in dict.fromkeys(wanted) if pk not in deletable]
    return deletable, missing


@transaction.atomic
def delete_records(*, tenant: Tenant, user: Any, model: str, id: Any = None, ids: Any = None) -> dict[str, Any]:
    spec = get_record_model(model)
    wanted, batch = one_or_many(id, ids, ("id", "ids"))
    deletable, missing = _delete_plan(spec, tenant=tenant, user=user, wanted=wanted)
    gone = [pk for pk in dict.fromkeys(wanted) if pk in deletable]
    also: dict[str, int] = {}
    if gone:
        try:
            _, per_model = spec.model._default_manager.filter(pk__in=gone).delete()
        except (ProtectedError, RestrictedError) as exc:
            kinds = sorted({o._meta.verbose_name_plural for o in exc.args[1]})
            raise BusinessError(f"cannot delete: other records ({', '.join(map(str, kinds))}) refer to "
                                f"{'them' if len(gone) > 1 else 'it'}; nothing was deleted",
                                details={"reason": "referenced"}) from None
        also = {label: n for label, n in per_model.items() if label != spec.model._meta.label and n}
    out: dict[str, Any] = {"model": spec.name, "deleted": len(gone), "ids": gone, "missing": missing}
    if also:
        out["also_deleted"] = also
    return out


def describe_delete(*, tenant: Tenant, user: Any, model: str, id: Any = None, ids: Any = None) -> str:
    """What a delete's approval card says: the records it would remove and their count."""
    spec = get_record_model(model)
    wanted, _ = one_or_many(id, ids, ("id", "ids"))
    deletable, missing = _delete_plan(spec, tenant=tenant, user=user, wanted=wanted)
    shown = [_named(spec, deletable[pk]) for pk in dict.fromkeys(wanted) if pk in deletable]
    head = f"Delete {len(shown)} {spec.name} record{'s' if len(shown) != 1 else ''}"
    listed = "; ".join(shown[:5]) + (f"; and {len(shown) - 5} more" if len(shown) > 5 else "")
    tail = f" ({len(missing)} id(s) match nothing and are skipped: {missing[:10]})" if missing else ""
    # The card holds 500 characters: the count and the skipped ids come first to survive a cut.
    return f"{head}{tail}: {listed}" if shown else f"{head}{tail}"
