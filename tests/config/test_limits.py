"""Request limits of DESIGN §7: oversized bodies get a typed error, nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

from tools_app.models import Tool

pytestmark = pytest.mark.django_db


def test_oversized_body_is_refused(api: Any, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = {"name": "big", "type": "REMOTE", "description": "x" * 5000, "config": {"url": "http://127.0.0.1:9/m"}}
    resp = api.post("/api/v1/tools/", body, format="json")
    assert resp.status_code == 413
    assert resp.json()["error"]["code"] == "request_too_large"
    assert not Tool.objects.filter(name="big").exists()
