"""Celery tasks of the package store: thin, idempotent, id-based."""

from __future__ import annotations

from celery import shared_task

from tools_app.packages.services import tool_package_prepare
from tools_app.runtime.packages.errors import PackageError


@shared_task(name="packages.install_tool_package")
def install_tool_package(tool_id: int) -> str:
    """Resolve and install what a LOCAL tool's command runs (a no-op when it is installed); its status says how."""
    try:
        link = tool_package_prepare(tool_id=tool_id)
    except PackageError as exc:
        return str(exc.code)  # recorded on the tool's package status; a retry would fail the same way
    return "installed" if link is not None else "none"
