"""ASGI entry point: /mcp/... goes to the MCP gateway, everything else to Django."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

from core.asgi import get_asgi_application

# Middleware and view in one thread hop per request (core.asgi), not one per middleware hook.
django_app = get_asgi_application()


def build_application(**gateway_options: Any) -> Any:
    """A router with its own gateway (tests build one per server; production uses `application`)."""
    from agents_app.gateway.asgi import PREFIX, GatewayApp

    gateway = GatewayApp(**gateway_options)

    async def application(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await gateway.lifespan(scope, receive, send)
        elif scope["type"] == "http" and scope["path"].startswith(PREFIX):
            await gateway(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    application.gateway = gateway  # type: ignore[attr-defined]
    return application


application = build_application()

# A serving process answers chat turns: the model SDK is imported at start here, not on the first turn
# (agents_app.runtime.model_client imports it on first use, so runners, workers and commands skip it).
import openai  # noqa: E402,F401
