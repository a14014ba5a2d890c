"""factory-boy factories for the domain models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from tenants_app.models import Membership, Role, Tenant
from tools_app.models import Tool, ToolStatus, ToolType

M = TypeVar("M")

# Calling a factory creates its model (factory-boy's metaclass turns the call into create()); factory-boy's
# annotations do not say so, so the type checker is told here. At run time this is DjangoModelFactory itself.
if TYPE_CHECKING:
    class ModelFactory(factory.django.DjangoModelFactory[M]):
        def __new__(cls, *args: Any, **kwargs: Any) -> M: ...  # type: ignore[misc]  # not an instance: a model
else:
    ModelFactory = factory.django.DjangoModelFactory


class UserFactory(ModelFactory[User]):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw")


class TenantFactory(ModelFactory[Tenant]):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tenant{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class MembershipFactory(ModelFactory[Membership]):
    class Meta:
        model = Membership

    tenant = factory.SubFactory(TenantFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.ADMIN


class ToolFactory(ModelFactory[Tool]):
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
