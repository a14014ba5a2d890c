"""Authorization policies of the tools domain: one object per question, each with a queryset side and a
`why_not` side that a test checks agree (tests/tools_app/test_policies.py).

- CALLS ("may this user call this function of this tool now, through this agent?"): the tool's and function's
  state (tools_app.runtime.call_rules, which toolset assembly applies too), the caller's role (MEMBERS of the
  role policy), `use_tool` grants, and for a call through an agent its `use_agent` grant and link. The agent
  half is agents_app's (`TOOLHUB_AGENT_CALL_RULE`): tools import no agents.
- USE_TOOL ("which tools may this user use?"): the `use_tool` grants alone (admins all; a tool with any explicit
  grant only its grantees), the half of CALLS that toolsets, tool options and per-user keys read.
- DECIDERS ("may this user decide this approval?"): the requester; tenant owners/admins when the tenant sets
  `admins_can_approve`; under `approval_second_person` only an owner/admin other than the requester.

The approval readers (`approvals_visible`, `approvals_decidable`) are here too: who may see and who may decide.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, Protocol

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.module_loading import import_string
from guardian.shortcuts import get_objects_for_user

from core import hotcache
from core.codes import Reason
from tenants_app.models import Tenant
from tenants_app.policies import ADMINS, MEMBERS, RoleDenial
from tenants_app.selectors import is_tenant_admin
from tools_app.models import Approval, FunctionState, Tool, ToolFunction, ToolStatus
from tools_app.runtime import call_rules
from tools_app.runtime.call_rules import Refusal


class AgentRule(Protocol):
    """The agent half of CALLS, provided by agents_app: may `user` call `function` of `tool` through `agent`."""

    def why_not(self, *, tenant: Tenant, user: Any, agent: Any, tool: Tool, function: str) -> Refusal | None: ...

    def allowed(self, *, tenant: Tenant, user: Any, agent: Any) -> Q:
        """ToolFunction rows the agent offers this user (its usability and its links), as a filter."""
        ...


@cache
def _agent_rule(path: str) -> AgentRule:
    rule: AgentRule = import_string(path)
    return rule


def _role_refusal(denial: RoleDenial, tenant: Tenant) -> Refusal:
    if denial.code == "not_a_member":
        return Refusal(Reason.NOT_A_MEMBER, f"you are not a member of tenant {tenant.slug!r}")
    role = denial.details.get("role", "")
    return Refusal(Reason.ROLE_TOO_LOW,
                   f"a {role} may not call tools in tenant {tenant.slug!r}; calling needs the member role or higher")


class UseToolPolicy:
    """The `use_tool` rule: which of a tenant's tools a user may use (the grants alone, no role or state)."""

    def tools(self, *, tenant: Tenant, user: Any, any_status: bool = False) -> QuerySet[Tool]:
        """Enabled tools (any tool with `any_status`) this user may use: admins all; others all unless narrowed by
        `use_tool` grants. A tool on which any user holds an explicit `use_tool` grant is restricted to its
        grantees."""
        qs = Tool.objects.filter(tenant=tenant)
        if not any_status:
            qs = qs.filter(status=ToolStatus.ENABLED)
        if ADMINS.allows(tenant=tenant, user=user):
            return qs
        granted = get_objects_for_user(user, "tools_app.use_tool", klass=qs, accept_global_perms=False)
        return qs.exclude(pk__in=self._restricted_tool_ids(tenant)) | granted

    def why_not(self, *, tenant: Tenant, user: Any, tool: Tool, any_status: bool = False) -> Refusal | None:
        """Why `user` may not use `tool` (no use_tool grant where the tool is restricted); None when they may."""
        if not self.tools(tenant=tenant, user=user, any_status=any_status).filter(pk=tool.pk).exists():
            return Refusal(Reason.TOOL_NOT_USABLE,
                           f"you may not use tool {tool.name!r} (no use_tool permission)")
        return None

    @staticmethod
    def _restricted_tool_ids(tenant: Tenant) -> list[int]:
        """Ids of this tenant's tools that carry at least one explicit `use_tool` grant."""
        from django.contrib.contenttypes.models import ContentType
        from guardian.models import UserObjectPermission

        pks = UserObjectPermission.objects.filter(
            permission__codename="use_tool", content_type=ContentType.objects.get_for_model(Tool)
        ).values_list("object_pk", flat=True)
        ids = {int(pk) for pk in pks}
        return list(Tool.objects.filter(tenant=tenant, pk__in=ids).values_list("pk", flat=True))


class CallPolicy:
    """May a user call a function now. Warm (`warm=True`), the user's callable tools come from memory."""

    @property
    def agent_rule(self) -> AgentRule:
        return _agent_rule(settings.TOOLHUB_AGENT_CALL_RULE)

    # --- the queryset side ----------------------------------------------------------------------------

    def tools(self, *, tenant: Tenant, user: Any) -> QuerySet[Tool]:
        """Enabled tools the user may call: members and up, narrowed by `use_tool` grants (USE_TOOL)."""
        if not MEMBERS.allows(tenant=tenant, user=user):
            return Tool.objects.none()
        return USE_TOOL.tools(tenant=tenant, user=user)

    def tool_ids(self, *, tenant: Tenant, user: Any) -> frozenset[int]:
        """Ids of `tools`, kept in memory until the tenant's tools or anyone's role or grants change."""
        user_id = getattr(user, "pk", None)
        if user_id is None:
            return frozenset(self.tools(tenant=tenant, user=user).values_list("pk", flat=True))
        return hotcache.remembered(
            "callable-tools", (tenant.pk, user_id), (hotcache.AUTH, hotcache.tenant_scope(tenant.pk)),
            lambda: frozenset(self.tools(tenant=tenant, user=user).values_list("pk", flat=True)))

    def functions(self, *, tenant: Tenant, user: Any, agent: Any = None, now: datetime | None = None,
                  ) -> QuerySet[ToolFunction]:
        """Every function the user may call now (through `agent`, when given)."""
        now = now or timezone.now()
        qs = (ToolFunction.objects.filter(tool__in=self.tools(tenant=tenant, user=user), state=FunctionState.ACTIVE,
                                          enabled=True, unsupported_reason="")
              .exclude(tool__disabled_until__gt=now))
        if agent is not None:
            qs = qs.filter(self.agent_rule.allowed(tenant=tenant, user=user, agent=agent))
        return qs

    # --- the why_not side -----------------------------------------------------------------------------

    def why_not(self, *, tenant: Tenant, user: Any, tool: Tool, function: str,
                functions: Any = None, agent: Any = None, warm: bool = False,
                now: datetime | None = None) -> Refusal | None:
        """Why `user` may not call `function` of `tool` now; None when they may.

        `functions` maps names to the tool's ToolFunction rows (a snapshot's, else loaded); `warm` reads the
        user's callable tools from memory (core.hotcache) instead of the database.
        """
        refusal = call_rules.tool_refusal(tool_name=tool.name, status=tool.status, disabled_until=tool.disabled_until,
                                          now=now or timezone.now(), consecutive_failures=tool.consecutive_failures)
        if refusal is not None:
            return refusal
        callable_ids = self.tool_ids(tenant=tenant, user=user) if warm else None
        if callable_ids is None or tool.pk not in callable_ids:
            refusal = self._who(tenant=tenant, user=user, tool=tool)
            if refusal is not None:
                return refusal
        if functions is None:
            functions = {f.name: f for f in tool.functions.all()}
        fn = functions.get(function)
        refusal = call_rules.function_refusal(
            tool_name=tool.name, function=function, state=fn.state if fn is not None else None,
            enabled=fn.enabled if fn is not None else False,
            unsupported_reason=fn.unsupported_reason if fn is not None else "",
            available=lambda: sorted(n for n, f in functions.items() if f.state == FunctionState.ACTIVE))
        if refusal is not None:
            return refusal
        if agent is not None:
            return self.agent_rule.why_not(tenant=tenant, user=user, agent=agent, tool=tool, function=function)
        return None

    def why_not_rights(self, *, tenant: Tenant, user: Any, tool: Tool, function: str,
                       agent: Any = None) -> Refusal | None:
        """Only the caller's right to the call (role, use_tool, use_agent, the agent's link), whatever state the
        tool is in: what an approval re-checks before it runs a call it holds."""
        refusal = self._who(tenant=tenant, user=user, tool=tool, any_status=True)
        if refusal is None and agent is not None:
            refusal = self.agent_rule.why_not(tenant=tenant, user=user, agent=agent, tool=tool, function=function)
        return refusal

    def _who(self, *, tenant: Tenant, user: Any, tool: Tool, any_status: bool = False) -> Refusal | None:
        denial = MEMBERS.why_not(tenant=tenant, user=user)
        if denial is not None:
            return _role_refusal(denial, tenant)
        return USE_TOOL.why_not(tenant=tenant, user=user, tool=tool, any_status=any_status)


class DecidePolicy:
    """Who may decide an approval, under its tenant's policy."""

    def approvals(self, *, tenant: Tenant, user: Any, qs: QuerySet[Approval] | None = None) -> QuerySet[Approval]:
        """The tenant's approvals (or those of `qs`) the user may decide."""
        qs = Approval.objects.filter(tenant=tenant) if qs is None else qs.filter(tenant=tenant)
        user_id = getattr(user, "pk", None)
        admin = ADMINS.allows(tenant=tenant, user=user)
        if tenant.approval_second_person:
            return qs.exclude(requested_by_id=user_id) if admin else qs.none()
        if admin and tenant.admins_can_approve:
            return qs
        return qs.filter(requested_by_id=user_id)

    def denial(self, *, tenant: Tenant, user: Any, approval: Approval) -> tuple[str, str] | None:
        """Who the tenant's rule requires instead (`another_admin`, `admin`, `requester`) and why; None when the
        user may decide."""
        asker = approval.requested_by_id == getattr(user, "pk", None)
        admin = ADMINS.allows(tenant=tenant, user=user)
        if tenant.approval_second_person:
            if asker:
                return "another_admin", "this tenant requires an owner or admin other than the requester to decide"
            return None if admin else (
                "admin", "only a tenant owner or admin may decide (this tenant requires a second person)")
        if asker or (admin and tenant.admins_can_approve):
            return None
        return "requester", "only the member who made the request may decide it" + (
            "" if tenant.admins_can_approve else " (this tenant does not let admins decide)")

    def why_not(self, *, tenant: Tenant, user: Any, approval: Approval) -> str | None:
        """Why the user may not decide `approval`; None when they may."""
        denied = self.denial(tenant=tenant, user=user, approval=approval)
        return denied[1] if denied is not None else None


USE_TOOL = UseToolPolicy()
CALLS = CallPolicy()
DECIDERS = DecidePolicy()


# --- the approval readers ---------------------------------------------------------------------------


def approval_rows(tenant: Tenant) -> QuerySet[Approval]:
    """The tenant's approvals with what their pages and answers show."""
    return Approval.objects.filter(tenant=tenant).select_related(
        "tool_call", "tool_call__tool", "requested_by", "decided_by"
    )


def approvals_visible(*, tenant: Tenant, user: Any) -> QuerySet[Approval]:
    """Approvals a user may read: their own requests; all of the tenant's for its owners/admins."""
    qs = approval_rows(tenant)
    if is_tenant_admin(tenant=tenant, user=user):
        return qs
    return qs.filter(requested_by_id=getattr(user, "pk", None))


def approvals_decidable(*, tenant: Tenant, user: Any) -> QuerySet[Approval]:
    """Approvals a user may decide: the queryset side of DECIDERS."""
    return DECIDERS.approvals(tenant=tenant, user=user, qs=approval_rows(tenant))
