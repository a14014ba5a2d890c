"""`create_tenant <slug> --name NAME`."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import DomainError
from tenants_app.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            tenant = tenant_create(slug=opts["slug"], name=opts["name"] or opts["slug"], actor=None)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"created tenant {tenant.slug}")
