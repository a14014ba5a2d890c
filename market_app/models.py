"""MarketSource (a catalog) and MarketEntry (one server it lists)."""

from __future__ import annotations

from django.db import models

from core.fields import EncryptedJSONField
from tenants_app.models import Tenant


class CatalogFormat(models.TextChoices):
    AUTO = "auto", "Detect"
    LIST = "list", "Simple list"
    MCP_SERVERS = "mcp_servers", "Client mcpServers file"
    OFFICIAL_REGISTRY = "official_registry", "Official MCP registry API"


class MarketSource(models.Model):
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="market_sources",
        help_text="Empty = a global source, managed by superusers",
    )
    name = models.CharField(max_length=100)
    url = models.CharField(max_length=500)
    format = models.CharField(max_length=24, choices=CatalogFormat.choices, default=CatalogFormat.AUTO)
    auth_headers = EncryptedJSONField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    refresh_interval_min = models.PositiveIntegerField(default=60)
    cursor = models.CharField(max_length=200, blank=True, default="", help_text="updated_since of the last sync")
    last_refresh_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=16, blank=True, default="")
    last_counts = models.JSONField(default=dict, blank=True)
    last_error = models.TextField(blank=True, default="")
    refreshing_until = models.DateTimeField(null=True, blank=True, help_text="refresh lock lease")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class EntryKind(models.TextChoices):
    LOCAL = "LOCAL", "Local (stdio)"
    REMOTE = "REMOTE", "Remote (HTTP)"


class EntryStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    DEPRECATED = "deprecated", "Deprecated"
    REMOVED = "removed", "Removed"


class MarketEntry(models.Model):
    source = models.ForeignKey(MarketSource, on_delete=models.CASCADE, related_name="entries")
    name = models.CharField(max_length=200)
    title = models.CharField(max_length=200, blank=True, default="")
    description = models.TextField(blank=True, default="")
    version = models.CharField(max_length=64, blank=True, default="")
    kind = models.CharField(max_length=16, choices=EntryKind.choices)
    install = models.JSONField(default=dict)
    required_env = models.JSONField(default=list, blank=True)
    required_headers = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=EntryStatus.choices, default=EntryStatus.ACTIVE)
    is_shell_command = models.BooleanField(default=False)
    content_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["source", "name"], name="uniq_entry_per_source")]
        verbose_name_plural = "market entries"

    def __str__(self) -> str:
        return self.name
