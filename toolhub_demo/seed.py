"""Demo seed for `make run`: the demo tenant, an admin login, then the demo tools, agent and market source."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from tenants_app.models import Membership, Role, Tenant
from tenants_app.services import membership_add, tenant_create, token_for_user

DEMO_SLUG = "demo"
ADMIN_USERNAME = "admin"



def demo_seeders() -> list[Callable[[Tenant, Any], list[str]]]:
    """Each demo part, in order: `seeder(tenant, admin_user) -> lines to print`."""
    from toolhub_demo.agents import seed_agents, seed_records_agent
    from toolhub_demo.market import seed_market
    from toolhub_demo.records import seed_records
    from toolhub_demo.tools import seed_tools

    return [seed_tools, seed_records, seed_agents, seed_records_agent, seed_market]


@dataclass
class DemoLogin:
    username: str
    password: str
    token: str
    lines: list[str]


def _admin_password() -> str:
    if pw := os.environ.get("TOOLHUB_ADMIN_PASSWORD"):
        return pw
    path = settings.VAR_DIR / "admin-password.txt"
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    pw = secrets.token_urlsafe(12)
    path.write_text(pw)
    path.chmod(0o600)
    return pw


@transaction.atomic
def seed_demo() -> DemoLogin:
    """Idempotent: creates what is missing, keeps what exists (the password follows the env/file)."""
    # Tenant and membership writes go through the tenants services, as the operator (actor=None).
    tenant = Tenant.objects.filter(slug=DEMO_SLUG).first() or tenant_create(slug=DEMO_SLUG, name="Demo", actor=None)
    User = get_user_model()
    user, _ = User.objects.get_or_create(username=ADMIN_USERNAME, defaults={"is_staff": True, "is_superuser": True})
    password = _admin_password()
    if not user.check_password(password):
        user.set_password(password)
        user.save()
    if not Membership.objects.filter(tenant=tenant, user=user).exists():
        membership_add(tenant=tenant, actor=None, username=ADMIN_USERNAME, role=Role.OWNER)
    lines: list[str] = []
    for seeder in demo_seeders():
        lines += seeder(tenant, user)
    return DemoLogin(ADMIN_USERNAME, password, token_for_user(user=user), lines)
