"""Market API serializers: strict inputs, outputs that never carry an auth header value."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.secrets import KEEP, MASK
from core.serializers import AnyJSONField, IdField, StrictInputSerializer
from market_app.catalog import suggest_tool_name
from market_app.models import CatalogFormat, MarketEntry, MarketSource
from market_app.services import SourceInput
from market_app.services.load import entry_screen


class SourceIn(StrictInputSerializer):
    name = serializers.CharField(max_length=100)
    url = serializers.CharField(max_length=500)
    format = serializers.ChoiceField(choices=CatalogFormat.choices, required=False)
    auth_headers = AnyJSONField(
        required=False, allow_null=True,
        help_text='Write-only. Omitted or "" keeps, null clears, an object replaces ("********" keeps a value).',
    )
    enabled = serializers.BooleanField(required=False)
    refresh_interval_min = serializers.IntegerField(required=False)
    is_global = serializers.BooleanField(required=False, help_text="A source for every tenant (superusers)")

    def to_input(self) -> SourceInput:
        data = self.validated_data
        return SourceInput(
            name=data.get("name"), url=data.get("url"), format=data.get("format"),
            auth_headers=data.get("auth_headers", KEEP), enabled=data.get("enabled"),
            refresh_interval_min=data.get("refresh_interval_min"), is_global=data.get("is_global"),
        )


class SourceOut(serializers.ModelSerializer[MarketSource]):
    is_global = serializers.SerializerMethodField()
    auth_headers_set = serializers.SerializerMethodField()
    auth_headers = serializers.SerializerMethodField()
    refreshing = serializers.SerializerMethodField()
    entry_count = serializers.IntegerField(read_only=True, default=None)

    class Meta:
        model = MarketSource
        fields = ["id", "name", "url", "format", "is_global", "enabled", "refresh_interval_min",
                  "auth_headers_set", "auth_headers", "cursor", "last_refresh_at", "last_status",
                  "last_counts", "last_error", "refreshing", "entry_count", "created_at"]

    def get_is_global(self, source: MarketSource) -> bool:
        return source.tenant_id is None

    def get_auth_headers_set(self, source: MarketSource) -> bool:
        return bool(source.auth_headers)

    @extend_schema_field(serializers.DictField(child=serializers.CharField()))
    def get_auth_headers(self, source: MarketSource) -> dict[str, str]:
        return {key: MASK for key in (source.auth_headers or {})}

    def get_refreshing(self, source: MarketSource) -> bool:
        from django.utils import timezone

        return source.refreshing_until is not None and source.refreshing_until > timezone.now()


class RefreshOut(serializers.Serializer[Any]):
    added = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    removed = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.DictField())  # type: ignore[assignment]
    errors_total = serializers.IntegerField()


class EntryOut(serializers.ModelSerializer[MarketEntry]):
    source = serializers.SerializerMethodField()  # type: ignore[assignment]
    suggested_name = serializers.SerializerMethodField()
    screen = serializers.SerializerMethodField()

    class Meta:
        model = MarketEntry
        fields = ["id", "source", "name", "title", "description", "version", "kind", "install", "required_env",
                  "required_headers", "status", "is_shell_command", "content_hash", "suggested_name", "screen",
                  "created_at", "updated_at"]

    @extend_schema_field(serializers.DictField())
    def get_screen(self, entry: MarketEntry) -> dict[str, Any]:
        """What the screen finds in the entry's own words before it is installed (held: loaded disabled)."""
        request = self.context.get("request")
        return entry_screen(entry, getattr(request, "tenant", None))

    @extend_schema_field(serializers.DictField())
    def get_source(self, entry: MarketEntry) -> dict[str, Any]:
        return {"id": entry.source_id, "name": entry.source.name, "is_global": entry.source.tenant_id is None}

    def get_suggested_name(self, entry: MarketEntry) -> str:
        return suggest_tool_name(entry.name)




class LoadIn(StrictInputSerializer):
    name = serializers.CharField(required=False, max_length=64)
    env = serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=10_000), required=False)
    headers = serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=10_000),
                                    required=False)


class MarketUpdateIn(StrictInputSerializer):
    """Values for variables the newer entry adds; stored values of variables it still declares are kept."""

    env = serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=10_000), required=False)
    headers = serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=10_000),
                                    required=False)


class BatchLoadIn(StrictInputSerializer):
    ids = serializers.ListField(child=IdField(), min_length=1, max_length=100)


class BatchResultOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    ok = serializers.BooleanField()
    tool_id = serializers.IntegerField(required=False)
    name = serializers.CharField(required=False)
    status = serializers.CharField(required=False)
    message = serializers.CharField(required=False)
    error = serializers.DictField(required=False)
