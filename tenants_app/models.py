"""Tenant and Membership: who belongs where, with which role."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.roles import ROLE_RANK, Role, role_at_least

__all__ = ["ROLE_RANK", "Membership", "Role", "Tenant"]


# The network a tenant's LOCAL servers get (docs/security.md says what each exposes).
LOCAL_NETWORKS = [
    ("none", "No network"),
    ("public", "The internet only (user-mode network; no loopback, host, private or metadata addresses)"),
    ("host", "The host's network: loopback, Redis, PostgreSQL, runners and every service the host reaches"),
]


class Tenant(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    is_active = models.BooleanField(default=True)
    # Per-tenant policy knobs (None/empty = the setting's default).
    sql_allowed_tables = models.JSONField(null=True, blank=True, help_text="Overrides TOOLHUB_SQL_ALLOWED_TABLES")
    command_interpreters = models.JSONField(
        default=list, blank=True, help_text="Interpreters execute_command may run (explicit opt-in)"
    )
    admins_can_approve = models.BooleanField(
        default=False, help_text="Tenant admins may decide approvals requested by other members"
    )
    approval_second_person = models.BooleanField(
        default=False,
        help_text="Every approval needs an owner/admin other than the requester (four-eyes rule)",
    )
    gateway_approvals_in_toolhub_only = models.BooleanField(
        default=False,
        help_text="Approvals asked through the MCP gateway are decided only in Toolhub, never by the AI client "
                  "(no elicitation)",
    )
    allow_imported_auto_approve = models.BooleanField(
        default=False,
        help_text="Client configs imported into this tenant may mark functions (autoApprove) that skip approval",
    )
    # The LOCAL server sandbox (set by platform operators only): network and the tenant's total memory.
    local_network = models.CharField(
        max_length=16, choices=LOCAL_NETWORKS, default="none",
        help_text="Network of this tenant's LOCAL servers: none; public (the internet only: never loopback, the "
                  "host, private, link-local or metadata addresses); or host (the host's own network: its loopback "
                  "services, Redis, PostgreSQL, runners and web processes included)",
    )
    local_memory_mb = models.PositiveIntegerField(
        null=True, blank=True, help_text="Memory of all this tenant's sandboxed processes together (MiB); "
                                         "empty = TOOLHUB_SANDBOX_TENANT_MEMORY_MB",
    )
    tool_screen = models.CharField(
        max_length=8, choices=[("hold", "Hold"), ("flag", "Flag"), ("off", "Off")], default="hold",
        help_text="The screen on what tool servers tell the model: hold a function with a high finding until an "
                  "admin approves it, only flag it, or do not screen",
    )
    approve_after_flagged_result = models.BooleanField(
        default=True,
        help_text="After a tool result carrying injection markers, the next WRITE or DESTRUCTIVE call in the same "
                  "conversation needs approval even where its link would not",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the member last chose to work in this tenant (the admin's switcher, the playground): a user of
    # several tenants lands in the one used last at the next sign-in, in any browser.
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="uniq_membership")]
        ordering = ["tenant__slug", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant} ({self.role})"

    def has_role(self, at_least: Role | str) -> bool:
        return role_at_least(self.role, at_least)

