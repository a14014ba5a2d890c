"""Identity API serializers: strict inputs; outputs that never carry the client secret or a SCIM token's hash."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.secrets import KEEP
from core.serializers import AnyJSONField, StrictInputSerializer
from identity_app import oidc
from identity_app.models import IdentityProvider, ScimToken
from identity_app.services import ProviderInput


class ProviderIn(StrictInputSerializer):
    name = serializers.CharField(max_length=100)
    issuer = serializers.CharField(max_length=500, help_text="The issuer URL; discovery is read from "
                                                             "<issuer>/.well-known/openid-configuration")
    client_id = serializers.CharField(max_length=255)
    client_secret = serializers.CharField(max_length=2000, required=False, allow_blank=True, write_only=True,
                                          help_text="Write-only. Omitted or \"\" keeps the stored secret.")
    email_domains = AnyJSONField(required=False, help_text='A list of domains, e.g. ["example.com"]')
    groups_claim = serializers.CharField(max_length=100, required=False)
    role_map = AnyJSONField(required=False, help_text="{group: owner|admin|member|viewer}")
    enforced = serializers.BooleanField(required=False)

    def to_input(self) -> ProviderInput:
        data = self.validated_data
        return ProviderInput(**{str(name): data.get(name, KEEP) for name in self.fields})


class ProviderOut(serializers.ModelSerializer[IdentityProvider]):
    client_secret_set = serializers.SerializerMethodField()
    redirect_uri = serializers.SerializerMethodField()

    class Meta:
        model = IdentityProvider
        fields = ["id", "name", "issuer", "client_id", "client_secret_set", "email_domains", "groups_claim",
                  "role_map", "enforced", "redirect_uri", "created_at", "updated_at"]
        read_only_fields = fields

    def get_client_secret_set(self, obj: IdentityProvider) -> bool:
        return bool((obj.client_secret or {}).get("value"))

    def get_redirect_uri(self, obj: IdentityProvider) -> str:
        return oidc.redirect_uri()


class ScimTokenOut(serializers.ModelSerializer[ScimToken]):
    class Meta:
        model = ScimToken
        fields = ["id", "prefix", "created_at", "last_used_at"]
        read_only_fields = fields


class ScimTokenCreatedOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    token = serializers.CharField(help_text="Shown once; only its hash is kept")
