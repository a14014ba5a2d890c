"""A member's own values for the keys a tool declares per user (`user_secrets`): set, cleared, never shown.

The values reach only that member's calls (their own pooled session, ServerSpec.principal); the scrubber masks
them in everything a call answers, like the tool's own secrets.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.errors import ValidationFailed
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import selectors
from tools_app.configs.auth import declared_keys
from tools_app.errors import ToolError, ToolNotFound
from tools_app.models import Tool, ToolType, UserCredential
from tools_app.policies import USE_TOOL
from tools_app.services import discovery

MAX_VALUE_CHARS = 4096


def _declaring_tool(*, tenant: Tenant, actor: Any, tool_id: Any) -> tuple[Tool, list[str]]:
    """A tool this member may use that declares per-user keys, and those keys."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.MEMBER)
    tool = selectors.tool_get(tenant=tenant, tool_id=tool_id)
    if USE_TOOL.why_not(tenant=tenant, user=actor, tool=tool, any_status=True) is not None:
        raise ToolNotFound()
    declared = declared_keys(tool)
    if not declared:
        raise ToolError(f"tool {tool.name!r} declares no per-user keys (config.user_secrets is empty): its calls "
                        "use the tool's own configuration", details={"field": "config.user_secrets"})
    return tool, declared


def _checked(values: Any, *, declared: list[str], tool: Tool) -> dict[str, str]:
    if not isinstance(values, dict) or not values:
        raise ValidationFailed(f"values must be an object naming the keys to set; this tool's keys: {', '.join(declared)}",
                               details={"field": "values", "accepted": declared})
    unknown = sorted(str(k)[:100] for k in values if k not in declared)
    if unknown:
        raise ValidationFailed(f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a per-user key of "
                               f"this tool; accepted: {', '.join(declared)}",
                               details={"field": "values", "unknown": unknown, "accepted": declared})
    for key, value in values.items():
        # Named, never echoed: the value is a secret.
        if not isinstance(value, str) or not value.strip():
            raise ValidationFailed(f"values.{key} must be a non-empty string", details={"field": f"values.{key}"})
        if len(value) > MAX_VALUE_CHARS or any(c in value for c in "\r\n\x00"):
            raise ValidationFailed(f"values.{key} must be one line of at most {MAX_VALUE_CHARS} characters",
                                   details={"field": f"values.{key}"})
        if tool.type == ToolType.HTTP and "${" in value:
            # An HTTP tool's headers are templates: a member's value is taken literally, never expanded.
            raise ValidationFailed(f"values.{key} may not contain '${{' (placeholders are the tool's, not yours)",
                                   details={"field": f"values.{key}"})
    return {str(k): str(v) for k, v in values.items()}


def my_credentials_set(*, tenant: Tenant, actor: Any, tool_id: Any, values: Any) -> dict[str, Any]:
    """Set (or replace) some of this member's own values; keys left out keep theirs. Answers the state."""
    tool, declared = _declaring_tool(tenant=tenant, actor=actor, tool_id=tool_id)
    checked = _checked(values, declared=declared, tool=tool)
    with transaction.atomic():
        row = UserCredential.objects.select_for_update().filter(tool=tool, user=actor).first()
        if row is None:
            UserCredential.objects.create(tenant=tenant, tool=tool, user=actor, values=checked)
        else:
            # Keys the tool no longer declares are dropped with the change.
            row.values = {k: v for k, v in {**(row.values or {}), **checked}.items() if k in declared}
            row.save(update_fields=["values", "updated_at"])
    state = selectors.user_credentials_state(tool=tool, user=actor)
    assert state is not None
    if state["complete"] and tool.type != ToolType.HTTP:
        discovery.discover_if_unknown(tool, actor)
    return state


def my_credentials_clear(*, tenant: Tenant, actor: Any, tool_id: Any) -> bool:
    """Forget all of this member's own values for the tool; True when there were some."""
    tool, _declared = _declaring_tool(tenant=tenant, actor=actor, tool_id=tool_id)
    deleted, _ = UserCredential.objects.filter(tool=tool, user=actor).delete()
    return bool(deleted)


def my_credentials_get(*, tenant: Tenant, actor: Any, tool_id: Any) -> dict[str, Any]:
    """Which of the tool's per-user keys this member has set (never a value)."""
    tool, _declared = _declaring_tool(tenant=tenant, actor=actor, tool_id=tool_id)
    state = selectors.user_credentials_state(tool=tool, user=actor)
    assert state is not None
    return state
