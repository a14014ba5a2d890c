"""Which Django models agents may reach, and which of their fields: `register(Model, fields=..., ...)`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import models
from django.db.models import Q

from tenants_app.models import Tenant

# row_filter(user, tenant) -> Q narrowing what this user may see of the tenant's rows (None: all of them).
RowFilter = Callable[[Any, Tenant], Q | None]

TEXT, NUMBER, INTEGER, BOOLEAN, DATE, DATETIME, REFERENCE, OTHER = (
    "text", "number", "integer", "boolean", "date", "datetime", "reference", "other")


def kind_of(f: models.Field[Any, Any]) -> str:
    """The JSON-facing kind of a model field: decides which values and filter operators it takes."""
    if f.is_relation:
        return REFERENCE
    if isinstance(f, models.BooleanField):
        return BOOLEAN
    if isinstance(f, (models.IntegerField, models.AutoField)):
        return INTEGER
    if isinstance(f, (models.FloatField, models.DecimalField)):
        return NUMBER
    if isinstance(f, models.DateTimeField):
        return DATETIME
    if isinstance(f, models.DateField):
        return DATE
    if isinstance(f, (models.CharField, models.TextField, models.UUIDField)):
        return TEXT
    return OTHER


@dataclass(frozen=True)
class RecordModel:
    """One registered model: its public name, exposed fields, searchable fields and row filter."""

    name: str
    model: type[models.Model]
    fields: tuple[str, ...]  # readable, in order; the primary key ("id") first
    writable: tuple[str, ...]
    search_fields: tuple[str, ...]
    tenant_field: str
    row_filter: RowFilter | None = None
    label: str = ""
    _fields: dict[str, models.Field[Any, Any]] = field(default_factory=dict, compare=False, repr=False)
    # Worked out once at registration: every value of every record of a batch asks for them.
    _kinds: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    _choices: dict[str, list[Any] | None] = field(default_factory=dict, compare=False, repr=False)

    @property
    def pk_name(self) -> str:
        return "id"

    def model_field(self, name: str) -> models.Field[Any, Any]:
        return self._fields[name]

    def kind(self, name: str) -> str:
        return self._kinds[name]

    def choices(self, name: str) -> list[Any] | None:
        return self._choices[name]

    def required(self, name: str) -> bool:
        f = self._fields[name]
        return not (f.has_default() or f.null or f.blank)

    def describe(self) -> dict[str, Any]:
        """What a caller may ask of this model: every field with its kind, choices and whether it is writable."""
        out = []
        for name in self.fields:
            item: dict[str, Any] = {"name": name, "type": self.kind(name)}
            if choices := self.choices(name):
                item["choices"] = choices
            if self.kind(name) == REFERENCE:
                related: Any = self._fields[name].related_model
                target = registered_for(related)
                item["references"] = target.name if target else related._meta.label
            item["writable"] = name in self.writable
            if name in self.writable and self.required(name):
                item["required"] = True
            out.append(item)
        return {"model": self.name, "label": self.label, "fields": out, "search_fields": list(self.search_fields)}


class RecordRegistryError(ImproperlyConfigured):
    """A registration that cannot work (unknown field, no tenant field, a name taken): raised at startup."""


_REGISTRY: dict[str, RecordModel] = {}


def register(
    model: type[models.Model],
    *,
    fields: Iterable[str] | None = None,
    search_fields: Iterable[str] = (),
    row_filter: RowFilter | None = None,
    read_only: Iterable[str] = (),
    name: str | None = None,
    tenant_field: str = "tenant",
) -> RecordModel:
    """Make `model` reachable by the record tools and show_data.

    `fields`: what agents may read (default: every concrete field but the tenant); the primary key is always
    readable and never writable, as are `read_only` fields and fields Django does not let a form edit.
    `search_fields`: text fields the free-text `search` of query_records matches (case-insensitive).
    `row_filter(user, tenant) -> Q`: narrows the rows a user sees, on top of tenant scoping and permissions.
    Re-registering the same model replaces its entry (a reloaded module), another model under a taken name fails.
    """
    opts = model._meta
    public = _public_name(model, name)
    _check_tenant_field(model, tenant_field)
    concrete = {f.name: f for f in opts.concrete_fields}
    pk = opts.pk
    assert pk is not None
    wanted = list(fields) if fields is not None else [n for n in concrete if n != tenant_field]
    _check_known(model, [*wanted, *search_fields, *read_only], concrete)
    if tenant_field in wanted:
        raise RecordRegistryError(f"{opts.label}.{tenant_field} is the tenant: it cannot be exposed")
    by_name: dict[str, models.Field[Any, Any]] = {"id": pk}
    by_name.update({n: concrete[n] for n in wanted if n not in ("id", pk.name)})
    locked = set(read_only) | {"id", pk.name}
    writable = tuple(n for n, f in by_name.items() if n not in locked and _editable(f))
    _check_search_fields(model, list(search_fields), by_name, concrete)
    spec = RecordModel(name=public, model=model, fields=tuple(by_name), writable=writable,
                       search_fields=tuple(search_fields), tenant_field=tenant_field, row_filter=row_filter,
                       label=str(opts.verbose_name), _fields=by_name,
                       _kinds={n: kind_of(f) for n, f in by_name.items()},
                       _choices={n: [v for v, _ in f.flatchoices] if f.choices else None for n, f in by_name.items()})
    _REGISTRY[public] = spec
    return spec


def _public_name(model: type[models.Model], name: str | None) -> str:
    """The name agents call the model by; refuses none, or one another model has."""
    opts = model._meta
    public = (name or opts.model_name or "").lower()
    if not public:
        raise RecordRegistryError(f"{opts.label}: no name to register it under")
    taken = _REGISTRY.get(public)
    if taken is not None and taken.model is not model:
        raise RecordRegistryError(f"record name {public!r} is taken by {taken.model._meta.label}; pass name=...")
    return public


def _check_tenant_field(model: type[models.Model], tenant_field: str) -> None:
    """Record models are tenant-scoped: `tenant_field` must be a foreign key to Tenant."""
    opts = model._meta
    try:
        tenant_f = opts.get_field(tenant_field)
    except FieldDoesNotExist:
        raise RecordRegistryError(f"{opts.label} has no field {tenant_field!r}: record models are tenant-scoped "
                                  "(pass tenant_field=...)") from None
    if not (tenant_f.is_relation and tenant_f.related_model is Tenant):
        raise RecordRegistryError(f"{opts.label}.{tenant_field} must be a foreign key to Tenant")


def _check_known(model: type[models.Model], names: list[str], concrete: dict[str, models.Field[Any, Any]]) -> None:
    unknown = sorted(n for n in names if n not in concrete and n != "id")
    if unknown:
        raise RecordRegistryError(f"{model._meta.label} has no field(s) {unknown}; it has {sorted(concrete)}")


def _editable(f: models.Field[Any, Any]) -> bool:
    """A field a form may edit: not one Django fills in itself (auto_now, auto_now_add) or marks not editable."""
    return bool(f.editable) and not getattr(f, "auto_now", False) and not getattr(f, "auto_now_add", False)


def _check_search_fields(model: type[models.Model], search_fields: list[str],
                         by_name: dict[str, models.Field[Any, Any]],
                         concrete: dict[str, models.Field[Any, Any]]) -> None:
    """Search fields are exposed text fields."""
    label = model._meta.label
    not_text = [n for n in search_fields if kind_of(by_name.get(n) or concrete[n]) != TEXT]
    if not_text:
        raise RecordRegistryError(f"{label}: search_fields must be text fields; {not_text} are not")
    missing_search = [n for n in search_fields if n not in by_name]
    if missing_search:
        raise RecordRegistryError(f"{label}: search_fields {missing_search} are not among the exposed fields")


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def registered() -> list[RecordModel]:
    return sorted(_REGISTRY.values(), key=lambda s: s.name)


def registered_for(model: Any) -> RecordModel | None:
    return next((s for s in _REGISTRY.values() if s.model is model), None)


def get_record_model(name: str) -> RecordModel:
    """The registered model called `name`; refuses an unknown one naming those there are."""
    from core.errors import InvalidParams

    spec = _REGISTRY.get(str(name).lower()) if isinstance(name, str) else None
    if spec is None:
        names = sorted(_REGISTRY)
        raise InvalidParams(f"no record model named {name!r}; models: {', '.join(names) or '(none registered)'}",
                            details={"model": name, "accepted": names})
    return spec
