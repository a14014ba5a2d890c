"""`create_token <username>`: prints only the API token key, on one line."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenants_app.services import token_for_user


class Command(BaseCommand):
    help = "Print the user's API token (created when missing)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, **opts: Any) -> None:
        user = get_user_model().objects.filter(username=opts["username"]).first()
        if user is None:
            raise CommandError(f"user {opts['username']!r} does not exist")
        self.stdout.write(token_for_user(user=user))
