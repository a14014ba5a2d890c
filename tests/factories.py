"""factory-boy factories for the domain models."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from tenants_app.models import Membership, Role, Tenant
from tools_app.models import Tool, ToolStatus, ToolType


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw")


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tenant{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    tenant = factory.SubFactory(TenantFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.ADMIN


class ToolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tool

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"tool{n}")
    type = ToolType.REMOTE
    status = ToolStatus.ENABLED
    config = factory.LazyFunction(
        lambda: {"url": "http://127.0.0.1:9/mcp", "transport": "streamable_http",
                 "headers": {"X-Api-Key": "factory-secret"}, "timeout_s": 30.0}
    )
