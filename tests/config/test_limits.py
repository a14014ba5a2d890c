"""Request limits of DESIGN §7: oversized bodies get a typed error, nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

from agents_app.models import Agent
from tools_app.models import Tool

pytestmark = pytest.mark.django_db


def test_oversized_body_is_refused(api: Any, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = {"name": "big", "type": "REMOTE", "description": "x" * 5000, "config": {"url": "http://127.0.0.1:9/m"}}
    resp = api.post("/api/v1/tools/", body, format="json")
    assert resp.status_code == 413
    assert resp.json()["error"]["code"] == "request_too_large"
    assert not Tool.objects.filter(name="big").exists()


HUGE = "9" * 30


@pytest.mark.parametrize(
    "method,path,body",
    [
        ("get", f"/api/v1/tools/{HUGE}/", None),
        ("delete", f"/api/v1/tools/{HUGE}/", None),
        ("delete", f"/api/v1/tools/1,{HUGE}/", None),
        ("post", "/api/v1/tools/export/", {"ids": [1, -int(HUGE)]}),
        ("post", "/api/v1/tools/export/", {"ids": [int(HUGE)]}),
        ("get", f"/api/v1/tool-calls/?tool={HUGE}", None),
        ("get", f"/api/v1/agents/{HUGE}/", None),
        ("get", f"/api/v1/models/{HUGE}/", None),
        ("get", f"/api/v1/conversations/{HUGE}/", None),
        ("post", f"/api/v1/approvals/{HUGE}/approve/", {}),
        ("get", f"/api/v1/market/sources/{HUGE}/", None),
        ("get", f"/api/v1/market/entries/?source={HUGE}", None),
        ("post", "/api/v1/market/entries/batch-load/", {"ids": [int(HUGE)]}),
        ("post", "/api/v1/agents/", {"name": "a1", "model": int(HUGE)}),
        ("post", "/api/v1/agents/", {"name": "a2", "tools": [{"tool": int(HUGE)}]}),
    ],
)
def test_huge_integers_in_ids_and_filters_are_refused_with_the_envelope(
    api: Any, method: str, path: str, body: Any
) -> None:
    before = (Tool.objects.count(), Agent.objects.count())
    resp = getattr(api, method)(path, body, format="json") if body is not None else getattr(api, method)(path)
    assert 400 <= resp.status_code < 500 or (resp.status_code == 200 and method == "get")
    if resp.status_code >= 400:
        assert set(resp.json()["error"]) == {"code", "message", "details"}
    assert (Tool.objects.count(), Agent.objects.count()) == before
