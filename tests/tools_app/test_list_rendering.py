"""GET /tools/ renders its cached page's rows once (core.renderers.PageJSONRenderer): the bytes are DRF's
JSONRenderer's for the same data, every time, and the rows are not encoded again while the page stays cached."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.renderers import JSONRenderer

from core import renderers


@pytest.fixture
def listed(tenant: Any, api: Any, tool_factory: Any) -> Any:
    tool_factory(tenant=tenant, name="plain", description="plain text")
    tool_factory(tenant=tenant, name="unicode", description="caf\u00e9 \u2028line\u2029para \"quoted\" </script>")
    for i in range(22):  # past one page (20): next link, count
        tool_factory(tenant=tenant, name=f"filler-{i:02d}")
    return api


def _drf(response: Any, **context: Any) -> bytes:
    data = {**response.data, "results": [dict(row) for row in response.data["results"]]}  # plain lists and dicts
    return JSONRenderer().render(data, "application/json", {"response": response, **context})


def test_the_page_is_drfs_json_byte_for_byte(listed: Any) -> None:
    first = listed.get("/api/v1/tools/")
    second = listed.get("/api/v1/tools/")
    page2 = listed.get("/api/v1/tools/?page=2")
    everything = listed.get("/api/v1/tools/?page_size=100")
    again = listed.get("/api/v1/tools/?page_size=100")
    for response in (first, second, page2, everything, again):
        assert response.status_code == 200
        assert response.content == _drf(response)
    assert first.content == second.content and everything.content == again.content
    body = json.loads(first.content)
    assert body["count"] >= 24 and body["next"] and len(body["results"]) == 20
    assert json.loads(page2.content)["previous"]
    text = everything.content.decode()
    assert "\\u2028" in text and "\u2028" not in text and "caf\u00e9" in text  # escaped as DRF escapes them


def test_a_cached_page_is_not_encoded_again(listed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    listed.get("/api/v1/tools/")  # the page cached, its rows encoded
    calls: list[Any] = []
    full = JSONRenderer.render

    def counted(self: Any, data: Any, *args: Any, **kwargs: Any) -> bytes:
        calls.append(data)
        return full(self, data, *args, **kwargs)

    encoded = renderers.EncodedRows.encoded

    def encode_counted(self: Any, *args: Any) -> str:
        calls.append("rows")
        return encoded(self, *args)

    monkeypatch.setattr(JSONRenderer, "render", counted)
    monkeypatch.setattr(renderers.EncodedRows, "encoded", encode_counted)
    dumps: list[Any] = []
    real_dumps = json.dumps

    def dumps_counted(value: Any, **kwargs: Any) -> str:
        dumps.append(value)
        return real_dumps(value, **kwargs)

    monkeypatch.setattr(json, "dumps", dumps_counted)  # the one json module, core.renderers' too
    response = listed.get("/api/v1/tools/")
    assert response.status_code == 200
    assert calls == ["rows"]  # the page's text, not DRF's full rendering
    assert len(dumps) == 1 and dumps[0]["results"] == []  # only the envelope (count and links) was encoded
    monkeypatch.undo()
    assert response.content == _drf(response)


def test_a_new_tool_shows_in_the_next_page(listed: Any, tenant: Any, tool_factory: Any) -> None:
    before = listed.get("/api/v1/tools/?page_size=100")
    listed.get("/api/v1/tools/?page_size=100")
    tool_factory(tenant=tenant, name="newcomer", description="new \u2028 here")  # bumps the tenant's generation
    after = listed.get("/api/v1/tools/?page_size=100")
    assert after.content == _drf(after) and after.content != before.content
    rows = json.loads(after.content)["results"]
    assert any(row["name"] == "newcomer" and row["description"] == "new \u2028 here" for row in rows)


def test_indented_and_browsable_renderings_are_drfs(listed: Any) -> None:
    indented = listed.get("/api/v1/tools/", HTTP_ACCEPT="application/json; indent=2")
    assert indented.status_code == 200
    assert indented.content == _drf(indented, indent=2) and b'\n  "count"' in indented.content
    html = listed.get("/api/v1/tools/", HTTP_ACCEPT="text/html")
    assert html.status_code == 200 and b"filler-00" in html.content
