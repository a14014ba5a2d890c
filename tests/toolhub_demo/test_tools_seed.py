"""The demo tools' seed discovers the inventory tool once, itself: no discovery is queued for the worker too."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import UserFactory
from tools_app.models import Tool

pytestmark = pytest.mark.django_db


def test_inventory_is_discovered_once_and_no_refresh_is_queued(tenant: Any, settings: Any, monkeypatch: Any,
                                                               django_capture_on_commit_callbacks: Any) -> None:
    from toolhub_demo.tools import seed_tools
    from tools_app.services import discovery
    from tools_app.services.tasks import refresh_functions

    settings.TOOLHUB_DISCOVER_ON_SAVE = True  # as `make run` has it (the test settings turn it off)
    discovered: list[str] = []

    def rediscover(tool: Any, actor: Any = None) -> dict[str, Any]:
        discovered.append(tool.name)
        return {}

    monkeypatch.setattr(discovery, "rediscover", rediscover)
    admin = UserFactory(username="demo-admin", is_superuser=True)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        seed_tools(tenant, admin)
    assert Tool.objects.filter(tenant=tenant, name="inventory").exists()
    assert discovered == ["inventory"]  # the seed's own discovery, before the banner
    queued = [c for c in callbacks if getattr(c, "func", None) == refresh_functions.delay]
    assert queued == []  # not started a second time by the worker's refresh_functions
