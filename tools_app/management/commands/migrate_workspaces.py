"""`migrate_workspaces`: move workspaces of the old `<slug>` layout to the `tenant.<id>` layout, once."""

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from tenants_app.models import Tenant
from tools_app.wiring.workspaces import workspace_dirname


class Command(BaseCommand):
    help = (
        "Rename each WORKSPACE_ROOT/<slug> folder to WORKSPACE_ROOT/tenant.<id>. Run it once after upgrading, "
        "before any tenant is renamed: it trusts the current slug of each tenant."
    )

    def handle(self, *args: Any, **opts: Any) -> None:
        root = Path(settings.TOOLHUB_WORKSPACE_ROOT)
        moved = skipped = 0
        for tenant in Tenant.objects.order_by("pk"):
            old, new = root / tenant.slug, root / workspace_dirname(tenant.pk)
            if not old.is_dir() or old.is_symlink():
                continue
            if new.exists():
                self.stderr.write(f"{tenant.slug}: {new.name} already exists; left {old} in place")
                skipped += 1
                continue
            old.rename(new)
            moved += 1
            self.stdout.write(f"{tenant.slug}: {old.name} -> {new.name}")
        self.stdout.write(f"moved: {moved}, skipped: {skipped}")
