"""Print the configuration table: every environment variable the settings read (core.env), typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from core import env


class Command(BaseCommand):
    help = "Print every environment variable the settings read, as a Markdown table (--write: into a docs page)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--write", metavar="PAGE",
                            help="replace the table of this Markdown page (from its '| Variable |' line on)")

    def handle(self, *args: Any, **options: Any) -> None:
        table = env.table(Path(settings.BASE_DIR))
        if not options["write"]:
            self.stdout.write(table, ending="")
            return
        page = Path(options["write"])
        head = page.read_text().split("| Variable |")[0]
        page.write_text(head + table)
        self.stdout.write(f"wrote {len(env.DECLARED)} variables to {page}")
