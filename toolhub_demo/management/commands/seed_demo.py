"""`seed_demo`: create the demo tenant, admin login and demo data (idempotent)."""

from typing import Any

from django.core.management.base import BaseCommand

from toolhub_demo.seed import seed_demo


class Command(BaseCommand):
    help = "Seed the demo tenant and print the admin login."

    def handle(self, *args: Any, **opts: Any) -> None:
        login = seed_demo()
        self.stdout.write(f"admin login: {login.username} / {login.password}")
        self.stdout.write(f"API token:   {login.token}")
        for line in login.lines:
            self.stdout.write(line)
