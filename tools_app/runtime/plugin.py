"""The tool plugin contract: a tool is a class with typed arguments, a safety level and `execute(args, ctx)`.

Built-ins, record tools and third-party plugins (the `toolhub.tools` entry-point group) all implement it
and live in one registry (tools_app.runtime.registry). Django-free: `ctx.tenant` and `ctx.user` are
whatever the host passes (model rows on the Django side), opaque here.
"""

from __future__ import annotations

import enum
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from tools_app.runtime.errors import InvalidParams, ToolRefused
from tools_app.runtime.result import ToolResult

__all__ = [
    "ApprovalCard",
    "NoArgs",
    "Safety",
    "ToolArgs",
    "ToolContext",
    "ToolPlugin",
    "input_schema_of",
    "parse_arguments",
]


class Safety(enum.StrEnum):
    READ_ONLY = "READ_ONLY"
    WRITE = "WRITE"
    DESTRUCTIVE = "DESTRUCTIVE"


class ToolArgs(BaseModel):
    """Base of every argument model (and of nested ones): closed (unknown keys refused) and strictly typed.

    Strict means no coercion ("3" is not 3, "yes" is not true); arguments are read in JSON mode, so an
    enum is given by its value and a date as an ISO string.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class NoArgs(ToolArgs):
    pass


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What one call may know: the tenant, the user who asked, the tenant's workspace and a logger.

    `tenant` and `user` are the host's objects (a Tenant and a User on the Django side), `None` when the
    host has none; `require_user()` is Ragent's requireUserId. `dry_run` is set during a trial run.
    """

    tenant_slug: str
    workspace: Path
    tenant_id: Any = None
    tenant: Any = None
    user_id: Any = None
    user: Any = None
    logger: logging.Logger | logging.LoggerAdapter[Any] = field(
        default_factory=lambda: logging.getLogger("toolhub.tools"), compare=False, repr=False
    )
    dry_run: bool = False

    def require_user(self) -> Any:
        """The calling user, or a typed refusal when the call has none (e.g. a system run)."""
        if self.user is None or self.user_id is None:
            raise ToolRefused("this tool needs a signed-in user and the call has none")
        return self.user


@dataclass(frozen=True)
class ApprovalCard:
    """What `before_approval` answers: the text the approval card shows, or a refusal before asking."""

    text: str = ""
    refuse: str = ""

    @classmethod
    def show(cls, text: str) -> ApprovalCard:
        return cls(text=text)

    @classmethod
    def refused(cls, reason: str) -> ApprovalCard:
        return cls(refuse=reason)


class ToolPlugin:
    """Subclass, set the class attributes, implement `execute`; every hook below is optional.

    - `args_model`: a ToolArgs subclass; its JSON Schema (enums, defaults, required, nested and
      self-referencing `$defs`) is the tool's input schema, closed unless a field is a free-form map.
    - `safety`: READ_ONLY tools start enabled; WRITE and DESTRUCTIVE ones start disabled for a new
      tenant, and DESTRUCTIVE ones need approval (override with `default_enabled`, `requires_approval`).
    - `requires_user`: refuse calls without a user (Ragent's requireUserId).
    - `runs_outside_transaction`: False (the default) runs `execute` inside one database transaction on
      the host, so a failure leaves nothing half-written; True for tools that call out (files, processes,
      networks) or manage their own transactions.
    - `undone_by_rollback`: True when everything `execute` changes lives in the host's database, so a
      trial run (rolled back) is possible; False refuses a trial run.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    args_model: ClassVar[type[BaseModel]] = NoArgs
    safety: ClassVar[Safety] = Safety.READ_ONLY
    function_name: ClassVar[str | None] = None
    requires_approval: ClassVar[bool | None] = None
    default_enabled: ClassVar[bool | None] = None
    requires_user: ClassVar[bool] = False
    runs_outside_transaction: ClassVar[bool] = False
    undone_by_rollback: ClassVar[bool] = True

    def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        raise NotImplementedError(f"{type(self).__name__}.execute")

    # --- optional hooks ---

    def provide_context(self, ctx: ToolContext) -> str | None:
        """Text added to an agent's system prompt before each model call (None: nothing)."""
        return None

    def call_title(self, args: Any, configured_name: str) -> str | None:
        """How one call is named in chat events and its audit row (None: the configured name)."""
        return None

    def refusal(self, ctx: ToolContext) -> str | None:
        """A reason to refuse every call of this tool for this user, checked before anything else."""
        return None

    def before_approval(self, args: Any, ctx: ToolContext) -> ApprovalCard | None:
        """Before a call is held for approval: refuse it, or say what the approval card shows."""
        return None


def input_schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema as a tool input schema: an object at the root, closed at every level.

    A self-referencing root model comes out of pydantic as a bare `$ref`; it is inlined so the root is
    an object (what MCP clients and models expect) while the `$defs` keep serving the recursion. An
    object that declares its own `additionalProperties` (a free-form map, an `extra="allow"` model)
    keeps it.
    """
    schema = model.model_json_schema()
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and "properties" not in schema:
        root = dict(schema["$defs"][ref.rsplit("/", 1)[1]])
        schema = {**root, "$defs": schema["$defs"]}
    schema.pop("title", None)
    _close(schema)
    for sub in schema.get("$defs", {}).values():
        _close(sub)
    return schema


def _close(schema: dict[str, Any]) -> None:
    if schema.get("type") == "object" and "properties" in schema:
        schema.setdefault("additionalProperties", False)
    elif schema.get("type") == "object" and "additionalProperties" not in schema:
        schema["additionalProperties"] = False
        schema["properties"] = {}


def parse_arguments(name: str, model: type[BaseModel], arguments: Any) -> Any:
    """Validate strictly; raise InvalidParams naming unknown, missing and mistyped arguments and the accepted ones."""
    accepted = sorted(model.model_fields)
    if not isinstance(arguments, dict):
        raise InvalidParams(f"arguments must be a JSON object; accepted: {', '.join(accepted) or '(none)'}")
    unknown = sorted(set(arguments) - set(accepted))
    if unknown and model.model_config.get("extra") != "allow":
        raise InvalidParams(
            f"unknown argument(s) {', '.join(map(repr, unknown))} for {name}; "
            f"accepted: {', '.join(accepted) or '(none)'}",
            details={"unknown": unknown, "accepted": accepted},
        )
    try:
        # JSON mode: arguments arrive as JSON, so enums by value and dates as strings, still without coercion.
        return model.model_validate_json(json.dumps(arguments, default=str))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            got = _json_type(err.get("input")) if err["type"] != "missing" else "nothing"
            problems.append(f"argument {where!r}: {err['msg']} (got {got})")
        raise InvalidParams(
            f"invalid arguments for {name}: " + "; ".join(problems),
            details={"errors": problems, "accepted": accepted},
        ) from None


def _json_type(value: Any) -> str:
    return type(value).__name__
