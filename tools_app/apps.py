"""Tools app config: wires signals and the pool's config-change listener."""

import logging

from django.apps import AppConfig
from django.conf import settings

logger = logging.getLogger("tools_app.sandbox")


def warn_if_command_sandbox_off() -> bool:
    """Log loudly when the operator turned execute_command's OS sandbox off; True when it is off."""
    if settings.TOOLHUB_COMMAND_SANDBOX:
        return False
    logger.warning(
        "TOOLHUB_COMMAND_SANDBOX=off: execute_command runs programs WITHOUT the bubblewrap sandbox, as the "
        "server's own user, with its network and file system. Only git/npm hardening and argument checks "
        "remain. Unset it (and install bubblewrap: apt-get install bubblewrap) to restore the sandbox."
    )
    return True


def warn_if_local_sandbox_off() -> bool:
    """Log loudly when the operator runs LOCAL MCP servers outside the tenant sandbox; True when it is off."""
    if settings.TOOLHUB_LOCAL_SANDBOX:
        return False
    logger.warning(
        "TOOLHUB_LOCAL_SANDBOX=off: every tenant's LOCAL MCP server runs as Toolhub's own user and can read its "
        "environment (database URL, secret keys), its files and every tenant's data. Unset it (and install "
        "bubblewrap: apt-get install bubblewrap) to restore the sandbox."
    )
    return True


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Tools"

    def ready(self) -> None:
        from tools_app import metrics

        metrics.connect()
        from tools_app.services import audit_stream

        audit_stream.connect()
        warn_if_command_sandbox_off()
        warn_if_local_sandbox_off()
        from tools_app import signals  # noqa: F401
        from tools_app.events import tool_released
        from tools_app.pool_broadcast import publish_release
        from tools_app.wiring.pool import release_tool

        tool_released.connect(lambda sender, tool_id, **kw: release_tool(tool_id), weak=False,
                              dispatch_uid="pool-release-tool")
        tool_released.connect(lambda sender, tool_id, **kw: publish_release(tool_id), weak=False,
                              dispatch_uid="pool-broadcast-release")
        from django.core.signals import setting_changed

        from tools_app.runtime import registry

        registry.configure(settings.TOOLHUB_TOOL_PLUGINS)
        import tools_app.runtime.builtins  # noqa: F401  (importing it registers every built-in once)
        from tools_app.records.tools import register_record_tools

        # Before any sync of BUILTIN rows (post_migrate, a new tenant): the record tools are on the one registry.
        register_record_tools()
        setting_changed.connect(_plugins_setting_changed, dispatch_uid="toolhub_tool_plugins")

        # The approvals queue and the dashboard panels live beside the tool admin (tools_app.admin), not in it.
        from django.contrib import admin

        from tools_app.admin import dashboard as admin_dashboard
        from tools_app.admin.approvals import ApprovalAdmin
        from tools_app.models import Approval

        if not admin.site.is_registered(Approval):
            admin.site.register(Approval, ApprovalAdmin)
        admin_dashboard.register()


def _plugins_setting_changed(setting: str, value: object, **kwargs: object) -> None:
    if setting == "TOOLHUB_TOOL_PLUGINS":
        from tools_app.runtime import registry

        if isinstance(value, str):
            value = value.split(",")
        registry.configure(value if isinstance(value, list | tuple | set | frozenset) else None)
