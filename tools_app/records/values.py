"""Field values between JSON and a model: strict reading of input, the JSON shape of a row."""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Model

from core.errors import InvalidParams
from tools_app.records.registry import (
    BOOLEAN,
    DATE,
    DATETIME,
    INTEGER,
    NUMBER,
    REFERENCE,
    TEXT,
    RecordModel,
)

EXPECTED = {TEXT: "a string", INTEGER: "an integer", NUMBER: "a number", BOOLEAN: "true or false",
            DATE: "a date string (YYYY-MM-DD)", DATETIME: "a date-time string (ISO 8601)",
            REFERENCE: "the id (an integer) of the record it refers to"}


def json_value(value: Any) -> Any:
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def row(spec: RecordModel, obj: Model, fields: tuple[str, ...] | list[str] | None = None) -> dict[str, Any]:
    """The record as the caller may read it: its exposed fields (references as ids)."""
    out: dict[str, Any] = {}
    for name in fields or spec.fields:
        f = spec.model_field(name)
        out[name] = json_value(getattr(obj, f.attname))
    return out


def _json_type_ok(kind: str, value: Any) -> bool:
    if value is None:
        return True
    if kind in (TEXT, DATE, DATETIME):
        return isinstance(value, str)
    if kind in (INTEGER, REFERENCE):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == BOOLEAN:
        return isinstance(value, bool)
    return True


def field_value(spec: RecordModel, name: str, value: Any, *, where: str, convert: bool = True) -> Any:
    """One input value read strictly: its JSON type, its choices, then Django's own conversion.

    `convert=False` leaves the conversion to the model's full_clean, which a write runs anyway.
    """
    kind = spec.kind(name)
    f = spec.model_field(name)
    if not _json_type_ok(kind, value):
        raise InvalidParams(f"{where}: field {name!r} takes {EXPECTED.get(kind, 'a JSON value')}; "
                            f"got {type(value).__name__}",
                            details={"field": name, "expected": kind})
    if value is None:
        if not f.null:
            raise InvalidParams(f"{where}: field {name!r} cannot be null", details={"field": name})
        return None
    choices = spec.choices(name)
    if choices is not None and value not in choices:
        raise InvalidParams(f"{where}: {value!r} is not a choice of field {name!r}; choices: {choices}",
                            details={"field": name, "choices": choices})
    if kind == REFERENCE or not convert:
        return value
    try:
        return f.to_python(value)
    except ValidationError as exc:
        raise InvalidParams(f"{where}: field {name!r}: {' '.join(exc.messages)}", details={"field": name}) from None


def check_writable(spec: RecordModel, values: dict[str, Any], *, where: str) -> None:
    unknown = sorted(k for k in values if k not in spec.fields)
    if unknown:
        raise InvalidParams(
            f"{where}: {spec.name} has no field(s) {', '.join(map(repr, unknown))}; "
            f"writable fields: {', '.join(spec.writable)}",
            details={"unknown": unknown, "accepted": list(spec.writable)},
        )
    locked = sorted(k for k in values if k not in spec.writable)
    if locked:
        raise InvalidParams(
            f"{where}: field(s) {', '.join(map(repr, locked))} of {spec.name} cannot be written; "
            f"writable fields: {', '.join(spec.writable)}",
            details={"read_only": locked, "accepted": list(spec.writable)},
        )


def validation_message(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(f"field {k!r}: {' '.join(v)}" if k != "__all__" else " ".join(v)
                         for k, v in exc.message_dict.items())
    return " ".join(exc.messages)
