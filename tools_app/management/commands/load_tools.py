"""`load_tools <dir>`: seed a tenant's tools from a folder of YAML files, one tool per file (idempotent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.exceptions import ParseError

from core.codes import ApiCode
from core.errors import DomainError
from core.parsers import load_yaml
from tenants_app.models import Membership, Role, Tenant
from tools_app.services.transfer import tools_seed

MAX_FILE_BYTES = 256 * 1024


class Command(BaseCommand):
    help = ("Seed tools from a folder of YAML files (*.yaml, *.yml), one tool per file: name, type "
            "(LOCAL, REMOTE, HTTP), description, status, safety, requires_approval, config. Running it "
            "again changes nothing. Secret values (env, headers, HTTP secrets) are never read from the "
            "files: new tools start DISABLED with them listed under needs_secrets; existing tools keep theirs.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path)
        parser.add_argument("--tenant", required=True, help="the tenant's slug")
        parser.add_argument("--user", help="an owner or admin of the tenant to act as (default: its first owner)")
        parser.add_argument("--json", action="store_true", help="print the full report as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        folder: Path = opts["folder"]
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder")
        tenant = Tenant.objects.filter(slug=opts["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no tenant with slug {opts['tenant']!r}")
        actor = self._actor(tenant, opts.get("user"))
        items: list[tuple[str, Any]] = []
        parse_errors: list[dict[str, str]] = []
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
                items.append((path.name, load_yaml(path.read_text(encoding="utf-8"))))
            except (DomainError, ParseError, ValueError, UnicodeDecodeError) as exc:
                message = getattr(exc, "message", None) or getattr(exc, "detail", None) or str(exc)
                parse_errors.append({"source": path.name, "code": ApiCode.UNREADABLE, "message": str(message)[:300]})
        try:
            report = tools_seed(tenant=tenant, actor=actor, items=items)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        report["errors"] = [*parse_errors, *report["errors"]]
        if opts["json"]:
            self.stdout.write(json.dumps(report, indent=2, default=str))
        else:
            self.stdout.write(", ".join(f"{k}: {len(v)}" for k, v in report.items()))
            for row in report["created"]:
                if row.get("needs_secrets"):
                    self.stdout.write(f"{row['source']}: {row['name']} needs secrets {', '.join(row['needs_secrets'])}"
                                      " (DISABLED until they are set)")
            for err in report["errors"]:
                self.stderr.write(f"{err['source']}: {err['code']}: {err['message']}")
        if report["errors"]:
            raise CommandError(f"{len(report['errors'])} file(s) could not be loaded")

    def _actor(self, tenant: Tenant, username: str | None) -> Any:
        if username:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user named {username!r}")
            return user
        memberships = Membership.objects.filter(tenant=tenant).select_related("user").order_by("id")
        membership = (memberships.filter(role=Role.OWNER).first() or memberships.filter(role=Role.ADMIN).first())
        if membership is None:
            raise CommandError(f"tenant {tenant.slug!r} has no owner or admin to act as; pass --user")
        return membership.user
