"""Tool schemas: strict argument validation and the canonical schema hash of a function."""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, best_match

from tools_app.runtime.errors import InvalidParams


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON: equal values give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def schema_hash(
    *,
    name: str,
    description: str | None,
    input_schema: dict[str, Any] | None,
    output_schema: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
) -> str:
    """sha256 of the canonical JSON of what a caller trusts about a function (DESIGN §3)."""
    payload = {
        "name": name,
        "description": description or "",
        "input_schema": input_schema or {},
        "output_schema": output_schema or None,
        "annotations": annotations or None,
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=1024)
def _compiled(schema_json: str) -> Any:
    """A checked, compiled validator per distinct schema: compiling costs far more than validating."""
    schema = json.loads(schema_json)
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    return validator_cls(schema)


def validate_arguments(schema: dict[str, Any] | None, arguments: dict[str, Any]) -> None:
    """Raise InvalidParams unless `arguments` fit `schema`; unknown names always fail, naming the accepted ones."""
    schema = schema or {"type": "object"}
    if not isinstance(arguments, dict):
        raise InvalidParams("arguments must be a JSON object")
    properties = schema.get("properties") or {}
    accepted = sorted(properties)
    unknown = sorted(set(arguments) - set(properties))
    # Strict even without additionalProperties:false: a typo must not silently drop an argument.
    if unknown and not (schema.get("additionalProperties") not in (None, False) and properties == {}):
        listed = ", ".join(accepted) if accepted else "(none)"
        raise InvalidParams(
            f"unknown argument(s) {', '.join(unknown)}; accepted: {listed}",
            details={"unknown": unknown, "accepted": accepted},
        )
    try:
        validator = _compiled(canonical_json(schema))
    except SchemaError as exc:
        raise InvalidParams(f"the tool's input schema is invalid: {exc.message}") from None
    error = best_match(validator.iter_errors(arguments))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
        raise InvalidParams(
            f"invalid argument {where}: {error.message}",
            details={"path": list(error.absolute_path), "accepted": accepted},
        )
