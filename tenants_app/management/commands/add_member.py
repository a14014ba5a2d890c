"""`add_member <slug> <username> --role ROLE [--password P]` (creates the user when missing)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import DomainError
from tenants_app.models import Role, Tenant
from tenants_app.services import membership_add


class Command(BaseCommand):
    help = "Add a user to a tenant with a role, creating the user when missing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("--role", default=Role.MEMBER, choices=Role.values)
        parser.add_argument("--password", default=None)
        parser.add_argument("--email", default="")

    def handle(self, *args: Any, **opts: Any) -> None:
        tenant = Tenant.objects.filter(slug=opts["slug"]).first()
        if tenant is None:
            raise CommandError(f"tenant {opts['slug']!r} does not exist")
        try:
            m = membership_add(
                tenant=tenant,
                actor=None,  # the operator at the command line
                create_user=True,
                username=opts["username"],
                role=opts["role"],
                password=opts["password"],
                email=opts["email"],
            )
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"{m.user.username} is {m.role} of {tenant.slug}")
