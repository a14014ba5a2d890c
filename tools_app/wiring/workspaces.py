"""Each tenant's workspace folder (its LOCAL servers' MCP root and execute_command's working folder)."""

from __future__ import annotations

import threading
from pathlib import Path

from django.conf import settings

from tenants_app.models import Tenant

# Folders this process has made, by (root, tenant id): a spec or a context built for a tenant whose folder exists
# costs no mkdir. Keyed by the root too, so a changed TOOLHUB_WORKSPACE_ROOT makes its own folders.
_made: dict[tuple[str, int], Path] = {}
_made_lock = threading.Lock()


def workspace_dirname(tenant_id: int) -> str:
    """The workspace folder of a tenant: keyed by its id, never its slug.

    A slug can be renamed and then reused by a new tenant, which would inherit the old files. The dot
    cannot occur in a slug, so no folder of the old `<slug>` layout is ever mistaken for an id folder.
    """
    return f"tenant.{int(tenant_id)}"


def workspace_for(tenant: Tenant) -> Path:
    return workspace_of(tenant.pk)


def workspace_of(tenant_id: int) -> Path:
    """The tenant's workspace folder, absolute; made on this process's first ask for it."""
    root = str(settings.TOOLHUB_WORKSPACE_ROOT)
    key = (root, int(tenant_id))
    path = _made.get(key)
    if path is None:
        path = Path(root) / workspace_dirname(tenant_id)
        path.mkdir(parents=True, exist_ok=True)
        path = path.resolve()
        with _made_lock:
            _made[key] = path
    return path
