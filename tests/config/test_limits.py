"""Request limits: oversized bodies get a typed error, nothing is written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_app.models import Agent
from tools_app import configs
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


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


def _raw_json(api: Any, path: str, body: str, method: str = "post") -> Any:
    return getattr(api, method)(path, data=body, content_type="application/json")


@pytest.mark.parametrize("depth", [100, 900, 990, 5000])
def test_deep_config_is_refused_before_anything_is_written(api: Any, depth: int) -> None:
    """Depth is capped: a config nested 900 deep answered 500 yet was committed, breaking detail and export."""
    before = Tool.objects.count()
    body = json.dumps(
        {"name": "deep", "type": "HTTP", "config": {"url": "http://127.0.0.1:9/x", "body": _nested(depth)}}
    ) if depth < 900 else (
        '{"name": "deep", "type": "HTTP", "config": {"url": "http://127.0.0.1:9/x", "body": '
        + '{"k": ' * depth + '"leaf"' + "}" * depth + "}}"
    )
    resp = _raw_json(api, "/api/v1/tools/", body)
    assert resp.status_code == 400
    assert set(resp.json()["error"]) == {"code", "message", "details"}
    error = resp.json()["error"]
    if depth >= 990 or (depth >= 900 and error["code"] == "malformed_request"):
        # The request parser's bound (no details). From 900 levels Python's own JSON decoder may give up first,
        # depending on how deep the stack already is (under xdist it is deeper): the same refusal.
        assert error["code"] == "malformed_request" and "nests deeper than" in error["message"]
    else:  # within the parser's bound: the config spec's own cap refuses it
        assert error["code"] == "invalid_config" and error["details"] == {"field": "config", "max_depth": configs.MAX_CONFIG_DEPTH}
    assert Tool.objects.count() == before


def test_deep_update_leaves_the_stored_tool_readable(api: Any) -> None:
    created = api.post(
        "/api/v1/tools/", {"name": "h1", "type": "HTTP", "config": {"url": "http://127.0.0.1:9/x"}}, format="json"
    )
    assert created.status_code == 201, created.json()
    tool_id = created.json()["id"]
    body = '{"config": {"url": "http://127.0.0.1:9/x", "body": ' + "[" * 900 + "]" * 900 + "}}"
    resp = _raw_json(api, f"/api/v1/tools/{tool_id}/", body, method="patch")
    assert resp.status_code == 400
    assert api.get(f"/api/v1/tools/{tool_id}/").status_code == 200
    assert api.post("/api/v1/tools/export/", {"ids": [tool_id]}, format="json").status_code == 200


BILLION_LAUGHS = """
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
tools: [*f]
"""


@pytest.mark.parametrize("content_type", ["application/yaml", "text/yaml"])
def test_yaml_import_refuses_aliases(api: Any, content_type: str) -> None:
    """YAML aliases are refused: a 546-byte YAML import with aliases became a 112 MB config."""
    before = Tool.objects.count()
    resp = api.post("/api/v1/tools/import/", data=BILLION_LAUGHS, content_type=content_type)
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "malformed_request"
    assert "anchors" in resp.json()["error"]["message"]  # the parser's refusals share one code: name the rule
    assert Tool.objects.count() == before


def test_yaml_import_without_aliases_still_works(api: Any) -> None:
    doc = "mcpServers:\n  web:\n    url: http://127.0.0.1:9/mcp\n"
    resp = api.post("/api/v1/tools/import/", data=doc, content_type="application/yaml")
    assert resp.status_code == 201, resp.json()


@pytest.mark.parametrize(
    "url", ["http://[::1", "http://0177.0.0.1:9/x", "http://127.0.0.1:99999/x", "http://[::1]:x/", "http://%zz/"]
)
def test_malformed_urls_get_the_envelope_and_write_nothing(api: Any, url: str) -> None:
    """A malformed URL is a typed 400: `http://[::1` raised ValueError, `http://0177.0.0.1` InvalidURL: both were 500s."""
    before = Tool.objects.count()
    body: dict[str, Any]
    for body in (
        {"name": "u1", "type": "HTTP", "config": {"url": url}},
        {"name": "u2", "type": "REMOTE", "config": {"url": url}},
    ):
        resp = api.post("/api/v1/tools/", body, format="json")
        assert resp.status_code < 500, resp.content
        if resp.status_code == 201:
            # Accepted as a string; a call must then fail with the envelope, not a 500.
            tool_id = resp.json()["id"]
            called = api.post(f"/api/v1/tools/{tool_id}/test/", {}, format="json")
            assert called.status_code < 500, called.content
            Tool.objects.filter(pk=tool_id).delete()
    for path, body in (
        ("/api/v1/models/", {"name": "m1", "base_url": url, "model": "x"}),
        ("/api/v1/market/sources/", {"name": "s1", "url": url}),
    ):
        resp = api.post(path, body, format="json")
        assert resp.status_code < 500, (path, resp.content)
    assert Tool.objects.count() == before
