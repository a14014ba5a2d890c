"""One typed config spec per tool type, validated once on save, naming the field it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from tools_app import configs
from tools_app.models import Tool, ToolType
from tools_app.runtime.mcp import RemoteSpec

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9/x"


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


REFUSED = [
    ("host-placeholder", "HTTP", {"url": "http://${input.h}/x"}, "config.url", "no placeholder in scheme, host or port"),
    ("port-placeholder", "HTTP", {"url": "http://127.0.0.1:${input.p}/x"}, "config.url", "no placeholder"),
    ("unknown-secret", "HTTP", {"url": URL + "?k=${secret.nope}"}, "config.secrets", "${secret.nope}"),
    ("unknown-secret-in-header", "HTTP", {"url": URL, "headers": {"X-K": "${secret.k}"}, "secrets": {"j": "v"}},
     "config.secrets", "${secret.k}"),
    ("host-header", "HTTP", {"url": URL, "headers": {"Host": "evil.test"}}, "config.headers", "Host"),
    ("bad-header-name", "HTTP", {"url": URL, "headers": {"X Bad": "1"}}, "config.headers", "X Bad"),
    ("header-line-break", "HTTP", {"url": URL, "headers": {"X-A": "1\r\nX-B: 2"}}, "config.headers", "line break"),
    ("port-99999", "HTTP", {"url": "http://127.0.0.1:99999/x"}, "config.url", "65535"),
    ("bad-input-schema", "HTTP", {"url": URL, "input_schema": {"type": "objekt"}}, "config.input_schema", "JSON Schema"),
    ("input-not-in-schema", "HTTP", {"url": URL + "/${input.sku}", "input_schema": {
        "type": "object", "properties": {"item": {"type": "string"}}}}, "config.input_schema", "${input.sku}"),
    ("bad-method", "HTTP", {"url": URL, "method": "BREW"}, "config.method", ""),
    ("remote-port-99999", "REMOTE", {"url": "http://127.0.0.1:99999/mcp"}, "config.url", "65535"),
    ("remote-host-header", "REMOTE", {"url": URL, "headers": {"host": "x"}}, "config.headers", "host"),
    ("local-env-name", "LOCAL", {"command": "x", "env": {"A=B": "1"}}, "config.env", "environment variable"),
    ("too-deep", "HTTP", {"url": URL, "body": deep(40)}, "config", "nested deeper"),  # within the request cap
]


@pytest.mark.parametrize(("tool_type", "config", "field", "fragment"), [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
def test_config_refused_on_save_names_the_field_and_writes_nothing(
    api: Any, tool_type: str, config: dict[str, Any], field: str, fragment: str
) -> None:
    before = Tool.objects.count()
    resp = api.post("/api/v1/tools/", {"name": "t", "type": tool_type, "config": config}, format="json")
    assert resp.status_code == 400, resp.content
    error = resp.json()["error"]
    assert error["code"] == "invalid_config" and error["details"]["field"] == field, error
    assert fragment in error["message"]
    assert Tool.objects.count() == before


def test_spec_caps_hold_off_the_request_path_too() -> None:
    # The API also caps the request (TOOLHUB_MAX_CONFIG_BYTES, the limits layer); the spec's own caps hold
    # for every other way a config arrives (import, market load, admin).
    from tools_app.errors import InvalidConfig

    with pytest.raises(InvalidConfig) as too_big:
        configs.validate_config("HTTP", {"url": URL, "body": "x" * (configs.MAX_CONFIG_BYTES + 1)})
    assert too_big.value.code == "invalid_config"
    assert too_big.value.details == {"field": "config", "max_bytes": configs.MAX_CONFIG_BYTES}
    with pytest.raises(InvalidConfig) as too_deep:
        configs.validate_config("HTTP", {"url": URL, "body": deep(configs.MAX_CONFIG_DEPTH + 1)})
    assert too_deep.value.code == "invalid_config"
    assert too_deep.value.details == {"field": "config", "max_depth": configs.MAX_CONFIG_DEPTH}


def test_update_is_validated_the_same_way(api: Any) -> None:
    created = api.post("/api/v1/tools/", {"name": "t", "type": "HTTP", "config": {"url": URL}}, format="json")
    assert created.status_code == 201, created.content
    resp = api.patch(f"/api/v1/tools/{created.json()['id']}/", {"config": {"url": "http://127.0.0.1:99999/x"}},
                     format="json")
    assert resp.status_code == 400 and resp.json()["error"]["details"]["field"] == "config.url"
    assert Tool.objects.get(pk=created.json()["id"]).config["url"] == URL


def test_saved_http_config_is_normalised_and_its_inputs_are_arguments(api: Any) -> None:
    resp = api.post("/api/v1/tools/", {"name": "t", "type": "HTTP", "config": {
        "method": "post", "url": URL + "/${input.item}?k=${secret.k}", "secrets": {"k": "v-1234"}}}, format="json")
    assert resp.status_code == 201, resp.content
    stored = Tool.objects.get(pk=resp.json()["id"]).config
    assert stored["method"] == "POST" and stored["timeout_s"] == 30
    assert stored["input_schema"] == {"type": "object", "properties": {"item": {}}}
    functions = resp.json()["functions"]
    assert functions[0]["input_schema"]["properties"] == {"item": {}}


def test_specs_are_introspectable_for_generated_forms() -> None:
    assert configs.SECRET_MAPS == {ToolType.LOCAL: ("env",), ToolType.REMOTE: ("headers",),
                                   ToolType.HTTP: ("headers", "secrets"), ToolType.BUILTIN: ()}
    fields = {f.name: f for f in configs.describe("HTTP")}
    assert list(fields) == ["method", "url", "headers", "query", "body", "secrets", "input_schema", "timeout_s", "user_secrets",
                            "not_secret"]
    assert fields["secrets"].secret and fields["headers"].secret and not fields["url"].secret
    assert fields["url"].required and fields["url"].type == "str" and "path and query" in fields["url"].help
    assert fields["method"].choices == ("GET", "POST", "PUT", "PATCH", "DELETE")
    assert fields["timeout_s"].default == 30 and "1-300" in fields["timeout_s"].help
    local = {f.name: f for f in configs.describe("LOCAL")}
    assert local["env"].secret and local["command"].required and local["env"].type == "dict[str, str]"


def test_runtime_takes_the_stored_spec_without_validating_again() -> None:
    stored = configs.validate_config("HTTP", {"url": URL})
    spec = configs.load_config("HTTP", stored)
    assert isinstance(spec, configs.HttpConfig) and spec.url == URL and spec.timeout_s == 30
    remote = configs.server_spec(tool_id=1, config_version=2, tenant_key="t", tool_type="REMOTE",
                                 config=configs.validate_config("REMOTE", {"url": URL, "headers": {"A": "b"}}),
                                 validated=True)
    assert isinstance(remote.target, RemoteSpec)
    assert remote.key == (1, 2, "") and remote.target.headers == (("A", "b"),)


def test_a_stored_config_missing_defaulted_fields_loads_them_fresh_each_time() -> None:
    stored = configs.validate_config("LOCAL", {"command": "python"})
    assert "not_secret" not in stored  # left out when empty (what made loading slow)
    del stored["args"]  # a key added after the config was saved
    first, second = configs.load_config("LOCAL", stored), configs.load_config("LOCAL", stored)
    assert first.not_secret == [] and first.args == [] and first.env == {}
    assert first.args is not second.args and first.not_secret is not second.not_secret  # never one shared list
    assert configs.load_config("LOCAL", {**stored, "args": ["-m", "x"]}).args == ["-m", "x"]


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/api/v1/models/", {"name": "m", "base_url": "http://127.0.0.1:99999/v1", "model": "x"}, "base_url"),
    ("/api/v1/market/sources/", {"name": "s", "url": "http://127.0.0.1:99999/c.json"}, "url"),
])
def test_model_and_market_urls_follow_the_same_url_rule(api: Any, path: str, body: dict[str, Any], field: str) -> None:
    resp = api.post(path, body, format="json")
    assert resp.status_code == 400, resp.content
    assert resp.json()["error"]["details"]["field"] == field and "65535" in resp.json()["error"]["message"]
