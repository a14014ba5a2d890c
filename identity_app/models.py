"""Company sign-in per tenant: identity providers, SCIM tokens and provisioned users/groups, the audit of both."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.fields import EncryptedJSONField
from tenants_app.models import Tenant


class IdentityProvider(models.Model):
    """One tenant's OpenID Connect provider: who may sign in through it, and which groups give which role."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="identity_providers")
    name = models.CharField(max_length=100)
    issuer = models.URLField(max_length=500)
    client_id = models.CharField(max_length=255)
    # {"value": <client secret>}: encrypted, write-only.
    client_secret = EncryptedJSONField(null=True, blank=True)
    email_domains = models.JSONField(default=list, blank=True)
    groups_claim = models.CharField(max_length=100, default="groups")
    role_map = models.JSONField(default=dict, blank=True)
    enforced = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="identity_provider_name_per_tenant")]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"


class IdentityLink(models.Model):
    """A provider's subject (`sub`) bound to the Django user it signed in as: the next sign-in finds the same user."""

    provider = models.ForeignKey(IdentityProvider, on_delete=models.CASCADE, related_name="links")
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["provider", "subject"], name="identity_link_per_subject")]

    def __str__(self) -> str:
        return f"{self.provider.name}:{self.subject} -> {self.user_id}"


class ScimToken(models.Model):
    """A tenant's SCIM bearer token: only its SHA-256 is kept; the token is shown once."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="scim_tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"SCIM token {self.prefix}… ({self.tenant})"


class ScimUser(models.Model):
    """A user the tenant's provider provisioned through SCIM (the SCIM id is this row's id)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    external_id = models.CharField(max_length=255, blank=True, default="")
    active = models.BooleanField(default=True)
    # The resource as the provider last wrote it (no id, meta or groups): what SCIM reads answer.
    document = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="scim_user_per_tenant")]

    def __str__(self) -> str:
        return f"SCIM user {self.user_id} ({self.tenant})"


class ScimGroup(models.Model):
    """A provider group pushed through SCIM; a displayName that is a role_map key gives its members that role."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    display_name = models.CharField(max_length=255)
    external_id = models.CharField(max_length=255, blank=True, default="")
    members = models.ManyToManyField(ScimUser, related_name="groups", blank=True)
    # The resource as the provider last wrote it (no id, meta or members).
    document = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "display_name"], name="scim_group_name_per_tenant")]

    def __str__(self) -> str:
        return f"SCIM group {self.display_name} ({self.tenant})"


class IdentityEventKind(models.TextChoices):
    SIGNIN = "signin", "Sign-in"
    SIGNIN_FAILED = "signin_failed", "Failed sign-in"
    ROLE_CHANGED = "role_changed", "Role changed from groups"
    SCIM = "scim", "SCIM operation"
    OFFBOARDED = "offboarded", "Access ended"


class IdentityEvent(models.Model):
    """The audit of company sign-in and provisioning: who, through what, and what came of it. Never a secret."""

    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=IdentityEventKind.choices)
    provider = models.ForeignKey(IdentityProvider, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    subject = models.CharField(max_length=255, blank=True, default="")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    username = models.CharField(max_length=150, blank=True, default="")
    actor = models.CharField(max_length=150, blank=True, default="", help_text="who did it: a user, scim, a provider")
    role = models.CharField(max_length=16, blank=True, default="", help_text="the resulting role ('' = none)")
    message = models.CharField(max_length=500, blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.username or self.subject} ({self.created_at:%Y-%m-%d %H:%M})"
