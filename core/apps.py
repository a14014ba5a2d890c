from pathlib import Path

from django.apps import AppConfig
from django.conf import settings


class CoreConfig(AppConfig):
    """The shared rules (core/) as an app for its management commands, and the folders settings name."""

    name = "core"
    label = "toolhub_core"
    verbose_name = "Toolhub core"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from core.db import revive_cut_connection

        # A pooled PostgreSQL connection cut by a restart is swapped for a live one before its first query.
        connection_created.connect(revive_cut_connection, dispatch_uid="core.db.revive_cut_connection")
        # Settings only name folders; they are made here, once the settings are loaded (not at import).
        folders = [Path(settings.STATIC_ROOT)]
        transport = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
        if settings.CELERY_BROKER_URL == "filesystem://":
            folders += [Path(transport["data_folder_in"]), Path(transport["data_folder_out"])]
        backend = str(getattr(settings, "CELERY_RESULT_BACKEND", "") or "")
        if backend.startswith("file://"):
            folders.append(Path(backend.removeprefix("file://")))
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
