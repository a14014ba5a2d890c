"""`replay_audit_spool`: insert the audit rows spooled while the database was away (TOOLHUB_AUDIT_SPOOL_DIR)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from tools_app.services import audit_spool


class Command(BaseCommand):
    help = ("Insert the audit rows spooled during a database outage; idempotent (a row already stored is not "
            "inserted again). Unreadable files are moved to corrupt/, rows of deleted tenants to rejected/.")

    def handle(self, *args: Any, **opts: Any) -> None:
        report = audit_spool.replay()
        self.stdout.write(f"spool: {audit_spool.spool_dir()}")
        self.stdout.write(f"inserted {report.inserted}, already stored {report.already}, left {report.left}")
        for path in report.corrupt:
            self.stderr.write(f"corrupt, moved aside: {path}")
        for path in report.rejected:
            self.stderr.write(f"rejected (tenant deleted), moved aside: {path}")
        if report.left:
            raise CommandError(f"{report.left} spooled row(s) left: the database is unavailable; run again later")
