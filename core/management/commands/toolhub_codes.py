"""Print (or write into docs/errors.md) the error-code tables generated from core/codes.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from core import codes_page


class Command(BaseCommand):
    help = "Print every error code (core.codes) as Markdown tables (--write: into a docs page, below its marker)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--write", metavar="PAGE",
                            help="replace the generated part of this Markdown page (from the marker line on)")

    def handle(self, *args: Any, **options: Any) -> None:
        tables = codes_page.page(Path(settings.BASE_DIR) / "core" / "codes.py")
        if not options["write"]:
            self.stdout.write(tables, ending="")
            return
        page = Path(options["write"])
        head = page.read_text().split(codes_page.MARKER)[0] if page.exists() else ""
        page.write_text(head + tables)
        self.stdout.write(f"wrote the error codes to {page}")
