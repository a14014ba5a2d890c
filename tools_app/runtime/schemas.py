"""Tool schemas: strict argument validation and the canonical schema hash of a function."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from contextvars import ContextVar
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
    """sha256 of the canonical JSON of what a caller trusts about a function (name, description, schemas,
    annotations): a changed hash holds the function for review."""
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


# The last arguments this context found fitting a schema: (the schema's canonical JSON, the arguments object, their
# JSON). A call's arguments are checked twice against the same schema, as a rule: by the invoke service against the
# stored function, then by the runtime (the MCP pool, an HTTP tool) against the live listing, which is that stored
# schema whenever the tool has not changed. The second check of the same content is the same verdict (a pure function
# of the two), so it is not run again. The arguments must be the very object checked and still the same JSON; a worker
# thread's job runs in a copy of its caller's context, so nothing is carried from one call to the next.
_FITTED: ContextVar[tuple[str, Any, str] | None] = ContextVar("toolhub_arguments_fitted", default=None)


_SMALL_KEYS = 32
_SMALL_TEXT = 256


def _as_json(arguments: dict[str, Any]) -> str | None:
    """The arguments' exact JSON when they are small and flat (at most _SMALL_KEYS names, each value a number, a bool,
    null or a string of at most _SMALL_TEXT characters: the usual call, whose JSON costs a microsecond or two), else
    None: large or nested arguments are simply checked each time (their JSON could cost more than the check)."""
    if len(arguments) > _SMALL_KEYS:
        return None
    for value in arguments.values():
        kind = type(value)
        if not (kind in (int, float, bool) or value is None or (kind is str and len(value) <= _SMALL_TEXT)):
            return None
    try:
        return json.dumps(arguments, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):  # a key JSON cannot hold, nan and the like: no memo
        return None


def validate_arguments(schema: dict[str, Any] | None, arguments: dict[str, Any]) -> None:
    """Raise InvalidParams unless `arguments` fit `schema`; unknown names always fail, naming the accepted ones."""
    schema = schema or {"type": "object"}
    if not isinstance(arguments, dict):
        raise InvalidParams("arguments must be a JSON object")
    key = canonical_json(schema)
    fitted = _FITTED.get()
    text = _as_json(arguments)
    if fitted is not None and fitted[1] is arguments and fitted[0] == key and text is not None and fitted[2] == text:
        return  # these arguments, unchanged, were found to fit this very schema in this context
    _check(schema, key, arguments)
    if text is not None:
        _FITTED.set((key, arguments, text))


def _check(schema: dict[str, Any], key: str, arguments: dict[str, Any]) -> None:
    properties = schema.get("properties") or {}
    accepted = sorted(properties)
    unknown = sorted(set(arguments) - set(properties))
    patterns = [p for p in (schema.get("patternProperties") or {}) if isinstance(p, str)]
    unknown = [name for name in unknown if not any(_matches(p, name) for p in patterns)]
    # Strict even without additionalProperties:false: a typo must not silently drop an argument. A schema
    # that allows extras (additionalProperties: true or a schema) gets them; the validator checks a schema.
    extras_allowed = schema.get("additionalProperties") is True or isinstance(schema.get("additionalProperties"), dict)
    if unknown and not extras_allowed:
        listed = ", ".join(accepted) if accepted else "(none)"
        raise InvalidParams(
            f"unknown argument(s) {', '.join(unknown)}; accepted: {listed}",
            details={"unknown": unknown, "accepted": accepted},
        )
    try:
        validator = _compiled(key)
    except SchemaError as exc:
        raise InvalidParams(f"the tool's input schema is invalid: {exc.message}") from None
    error = best_match(validator.iter_errors(arguments))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
        raise InvalidParams(
            f"invalid argument {where}: {error.message}",
            details={"path": list(error.absolute_path), "accepted": accepted},
        )


def _matches(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


def normalize_for_openai(schema: dict[str, Any] | None) -> dict[str, Any]:
    """An input schema as OpenAI function calling accepts it, meaning unchanged.

    The top level is an object; every object schema without `properties` gets `properties: {}`; `$schema`
    (and `$id`) are dropped; `$defs`/`definitions` stay at the top so `$ref`s keep resolving, and a `$ref`
    that resolves nowhere becomes an unconstrained schema instead of an error at the model's endpoint.
    """
    source = copy.deepcopy(schema) if isinstance(schema, dict) else {}
    root = source

    def resolves(ref: str) -> bool:
        if not ref.startswith("#"):
            return False
        node: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return False
        return True

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$schema", "$id"):
                continue
            if key == "$ref" and isinstance(value, str) and not resolves(value):
                out.setdefault("description", f"(unresolved reference {value})")
                continue
            if key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(value, dict):
                out[key] = {name: walk(sub) for name, sub in value.items()}
            else:
                out[key] = walk(value)
        kind = out.get("type")
        if (kind == "object" or (isinstance(kind, list) and "object" in kind)) and "properties" not in out:
            out["properties"] = {}
        return out

    result: dict[str, Any] = walk(root)
    if result.get("type") != "object":
        result = {"type": "object", "properties": {}, **{k: v for k, v in result.items() if k != "type"}}
    result.setdefault("properties", {})
    return result
