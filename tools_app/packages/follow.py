"""A LOCAL tool's package follows its config: install what its command runs (in the background, through the
task), or drop the link. Above the package tasks, which call the store's services below."""

from __future__ import annotations

import functools

from django.conf import settings
from django.db import transaction

from tools_app.models import Tool
from tools_app.packages import tasks
from tools_app.packages.models import ToolPackage
from tools_app.packages.services import ref_of
from tools_app.runtime.packages.errors import PackageNotInstallable


def package_follow_config(tool: Tool) -> None:
    """After a LOCAL tool's create or config change commits: install the package its command runs (in the
    background), or drop the link of a command that no longer runs one."""
    try:
        ref = ref_of(tool)
    except PackageNotInstallable:
        ref = None  # Test and calls say why; nothing to install
    if ref is None:
        ToolPackage.objects.filter(tool_id=tool.pk).delete()
        return
    if settings.TOOLHUB_PACKAGE_INSTALL_ON_SAVE:
        transaction.on_commit(functools.partial(tasks.install_tool_package.delay, tool.pk))
