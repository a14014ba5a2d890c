"""The tools management API: create/read/update/delete, validation and the keep/replace rules."""

from __future__ import annotations

from typing import Any

import pytest

from tenants_app.models import Role
from tools_app.models import Tool, ToolType

pytestmark = pytest.mark.django_db

REMOTE = {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Api-Key": "k-one", "X-Other": "k-two"}}
LOCAL = {"command": "python3", "args": ["-m", "srv"], "env": {"API_TOKEN": "tok-123"}}


def user_tools() -> Any:
    """Tools users made (every tenant also holds its built-in rows)."""
    return Tool.objects.exclude(type=ToolType.BUILTIN)


def create(api: Any, **body: Any) -> Any:
    payload = {"name": "inv", "type": "REMOTE", "config": REMOTE, **body}
    return api.post("/api/v1/tools/", payload, format="json")


def test_create_returns_masked_summary(api: Any) -> None:
    resp = create(api)
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["config_set"] is True
    assert body["config_summary"]["headers"] == {"X-Api-Key": "********", "X-Other": "********"}
    assert body["config_summary"]["url"] == REMOTE["url"]
    assert body["config_version"] == 1


def test_unknown_field_is_rejected_by_name(api: Any) -> None:
    resp = create(api, colour="blue")
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["code"] == "invalid"
    assert list(err["details"]) == ["colour"] and "accepted" in err["details"]["colour"][0]  # names the accepted fields


@pytest.mark.parametrize(("name", "code"), [("", "invalid"), ("Upper", "tool_error"), ("-lead", "tool_error"),
                                            ("has space", "tool_error"), ("a" * 65, "invalid"),
                                            ("semi;colon", "tool_error"), ("ünï", "tool_error")])
def test_invalid_names_are_rejected(api: Any, name: str, code: str) -> None:
    resp = create(api, name=name)
    assert resp.status_code == 400
    error = resp.json()["error"]
    # The serializer (blank, too long) keys its details by the field; the name rule names it and its pattern.
    if code == "invalid":
        assert error["code"] == code and list(error["details"]) == ["name"]
    else:
        assert error["code"] == code and error["details"] == {"field": "name", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"}
    assert not user_tools().exists()


def test_duplicate_name_in_tenant_is_409(api: Any) -> None:
    assert create(api).status_code == 201
    resp = create(api)
    assert resp.status_code == 409
    assert resp.json()["error"]["code"] == "name_taken"


def test_same_name_in_another_tenant_is_fine(api: Any, other_api: Any) -> None:
    assert create(api).status_code == 201
    assert create(other_api).status_code == 201


@pytest.mark.parametrize(
    ("tool_type", "config", "field"),
    [
        ("LOCAL", {"args": []}, "config.command"),
        ("LOCAL", {"command": "x", "args": "not-a-list"}, "config.args"),
        ("LOCAL", {"command": "x", "args": [1, 2]}, "config.args.0"),
        ("LOCAL", {"command": "x", "env": {"K": 5}}, "config.env.K"),
        ("LOCAL", {"command": "x", "call_timeout_s": 0}, "config.call_timeout_s"),
        ("LOCAL", {"command": "x", "startup_timeout_s": 301}, "config.startup_timeout_s"),
        ("LOCAL", {"command": "x", "colour": 1}, "config.colour"),
        ("REMOTE", {"url": "ftp://host/x"}, "config.url"),
        ("REMOTE", {"url": "not a url"}, "config.url"),
        ("REMOTE", {"url": "http://h/x", "transport": "websocket"}, "config.transport"),
        ("REMOTE", {"url": "http://h/x", "headers": ["a"]}, "config.headers"),
        ("HTTP", {"url": "http://h/x", "method": "BREW"}, "config.method"),
        ("HTTP", {"method": "GET"}, "config.url"),
        ("LOCAL", "just a string", "config"),
        ("LOCAL", ["a"], "config"),
    ],
)
def test_malformed_config_names_the_field(api: Any, tool_type: str, config: Any, field: str) -> None:
    resp = create(api, type=tool_type, config=config)
    assert resp.status_code == 400, resp.content
    error = resp.json()["error"]
    assert error["code"] == "invalid_config" and error["details"]["field"] == field
    assert not user_tools().exists()


def test_config_errors_never_echo_secret_values(api: Any) -> None:
    resp = create(api, type="LOCAL", config={"command": "x", "env": {"K": ["hunter2-canary"]}})
    assert resp.status_code == 400
    assert b"hunter2-canary" not in resp.content


def test_mask_on_create_has_nothing_to_keep(api: Any) -> None:
    resp = create(api, config={"url": "http://h/x", "headers": {"X-Api-Key": "********"}})
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["code"] == "invalid_config" and error["details"]["field"] == "config.headers.X-Api-Key"
    assert not user_tools().exists()


def test_non_json_body_is_a_typed_400(api: Any) -> None:
    resp = api.post("/api/v1/tools/", data="{not json", content_type="application/json")
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "malformed_request"


def test_builtin_type_cannot_be_created(api: Any) -> None:
    resp = create(api, type="BUILTIN", config={})
    assert resp.status_code == 403
    assert resp.json()["error"]["code"] == "builtin_read_only"


def test_omitted_or_blank_config_keeps_the_stored_one(api: Any) -> None:
    tool_id = create(api).json()["id"]
    assert api.patch(f"/api/v1/tools/{tool_id}/", {"description": "d"}, format="json").status_code == 200
    assert api.patch(f"/api/v1/tools/{tool_id}/", {"config": ""}, format="json").status_code == 200
    tool = Tool.objects.get(pk=tool_id)
    assert tool.config["headers"] == REMOTE["headers"]
    assert tool.config_version == 1
    assert tool.description == "d"


def test_mask_keeps_one_key_and_new_values_replace(api: Any) -> None:
    tool_id = create(api).json()["id"]
    new = {"url": "http://127.0.0.1:9/v2", "headers": {"X-Api-Key": "********", "X-New": "fresh"}}
    resp = api.patch(f"/api/v1/tools/{tool_id}/", {"config": new}, format="json")
    assert resp.status_code == 200, resp.content
    tool = Tool.objects.get(pk=tool_id)
    # Kept under the masked key, replaced elsewhere, dropped where absent from the new object.
    assert tool.config["headers"] == {"X-Api-Key": "k-one", "X-New": "fresh"}
    assert tool.config["url"] == "http://127.0.0.1:9/v2"
    assert tool.config_version == 2


def test_mask_for_unknown_key_on_update_is_refused(api: Any) -> None:
    tool_id = create(api).json()["id"]
    resp = api.patch(
        f"/api/v1/tools/{tool_id}/", {"config": {"url": "http://h/x", "headers": {"Nope": "********"}}}, format="json"
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "invalid_config"
    assert resp.json()["error"]["details"] == {"field": "config.headers.Nope"}
    assert Tool.objects.get(pk=tool_id).config["headers"] == REMOTE["headers"]


def test_config_change_resets_breaker(api: Any) -> None:
    tool_id = create(api).json()["id"]
    Tool.objects.filter(pk=tool_id).update(consecutive_failures=3)
    api.patch(f"/api/v1/tools/{tool_id}/", {"config": {**REMOTE, "url": "http://h/other"}}, format="json")
    tool = Tool.objects.get(pk=tool_id)
    assert (tool.consecutive_failures, tool.config_version) == (0, 2)


def test_type_change_is_refused(api: Any) -> None:
    tool_id = create(api).json()["id"]
    resp = api.patch(f"/api/v1/tools/{tool_id}/", {"type": "LOCAL", "config": LOCAL}, format="json")
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "type_change_refused"
    assert Tool.objects.get(pk=tool_id).type == ToolType.REMOTE


def test_full_update_requires_the_whole_body(api: Any) -> None:
    tool_id = create(api).json()["id"]
    resp = api.put(f"/api/v1/tools/{tool_id}/", {"description": "x"}, format="json")
    assert resp.status_code == 400
    ok = api.put(f"/api/v1/tools/{tool_id}/", {"name": "inv2", "type": "REMOTE", "description": "x"}, format="json")
    assert ok.status_code == 200
    assert ok.json()["name"] == "inv2"


def test_status_toggle(api: Any) -> None:
    tool_id = create(api).json()["id"]
    resp = api.put(f"/api/v1/tools/{tool_id}/status/", {"status": "DISABLED"}, format="json")
    assert resp.status_code == 200 and resp.json()["status"] == "DISABLED"
    bad = api.put(f"/api/v1/tools/{tool_id}/status/", {"status": "MAYBE"}, format="json")
    assert bad.status_code == 400


def test_list_filters_and_all_and_pagination(api: Any) -> None:
    create(api, name="alpha")
    create(api, name="beta", type="LOCAL", config=LOCAL)
    assert api.get("/api/v1/tools/?type=LOCAL").json()["count"] == 1
    assert api.get("/api/v1/tools/?name=alp").json()["results"][0]["name"] == "alpha"
    page = api.get("/api/v1/tools/?page_size=1&type=REMOTE").json()
    assert page["count"] == 1 and len(page["results"]) == 1
    page = api.get("/api/v1/tools/?page_size=1").json()
    assert page["count"] == Tool.objects.filter(tenant__slug="acme").count() and len(page["results"]) == 1
    every = api.get("/api/v1/tools/all/?keyword=bet").json()
    assert [t["name"] for t in every] == ["beta"]
    assert set(every[0]) == {"id", "name", "type", "status"}


@pytest.mark.parametrize("size", ["101", "0", "abc"])
def test_page_size_out_of_range(api: Any, size: str) -> None:
    resp = api.get(f"/api/v1/tools/?page_size={size}")
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "invalid_page_size"


def test_batch_delete_is_all_or_nothing(api: Any, other_api: Any) -> None:
    a = create(api, name="a").json()["id"]
    b = create(api, name="b").json()["id"]
    foreign = create(other_api, name="c").json()["id"]
    resp = api.delete(f"/api/v1/tools/{a},{b},{foreign}/")
    assert resp.status_code == 404
    assert user_tools().count() == 3
    assert api.delete(f"/api/v1/tools/{a},{b}/").status_code == 204
    assert list(user_tools().values_list("name", flat=True)) == ["c"]


def test_batch_delete_with_garbage_id(api: Any) -> None:
    a = create(api, name="a").json()["id"]
    resp = api.delete(f"/api/v1/tools/{a},x/")
    assert resp.status_code == 400
    assert user_tools().count() == 1


def test_viewer_cannot_write(tenant: Any, member_client: Any, api: Any) -> None:
    tool_id = create(api).json()["id"]
    viewer = member_client(tenant, Role.VIEWER)
    assert viewer.get(f"/api/v1/tools/{tool_id}/").status_code == 200
    for resp in (
        viewer.post("/api/v1/tools/", {"name": "v", "type": "REMOTE", "config": REMOTE}, format="json"),
        viewer.patch(f"/api/v1/tools/{tool_id}/", {"description": "x"}, format="json"),
        viewer.delete(f"/api/v1/tools/{tool_id}/"),
        viewer.put(f"/api/v1/tools/{tool_id}/status/", {"status": "DISABLED"}, format="json"),
    ):
        assert resp.status_code == 403
        assert resp.json()["error"]["code"] == "permission_denied"
    assert Tool.objects.get(pk=tool_id).description == ""


def test_member_sees_options(tenant: Any, member_client: Any, api: Any) -> None:
    create(api, name="on")
    off = create(api, name="off").json()["id"]
    api.put(f"/api/v1/tools/{off}/status/", {"status": "DISABLED"}, format="json")
    member = member_client(tenant, Role.MEMBER)
    names = [t["name"] for t in member.get("/api/v1/tools/options/").json() if t["type"] != "BUILTIN"]
    assert names == ["on"]


def test_use_tool_grant_narrows_options(tenant: Any, member_client: Any, api: Any) -> None:
    from guardian.shortcuts import assign_perm

    create(api, name="open")
    locked = Tool.objects.get(pk=create(api, name="locked").json()["id"])
    alice = member_client(tenant, Role.MEMBER)
    bob = member_client(tenant, Role.MEMBER)
    assign_perm("tools_app.use_tool", alice.user, locked)
    def names(client: Any) -> list[str]:
        return [t["name"] for t in client.get("/api/v1/tools/options/").json() if t["type"] != "BUILTIN"]

    assert names(alice) == ["locked", "open"]
    assert names(bob) == ["open"]


@pytest.mark.parametrize("accept", ["application/yaml", "text/yaml"])
def test_export_answers_yaml_when_the_client_accepts_only_yaml(api: Any, accept: str) -> None:
    """Exports honour `Accept: application/yaml`: on export answered 406."""
    import yaml

    created = api.post(
        "/api/v1/tools/", {"name": "y1", "type": "REMOTE", "config": {"url": "http://127.0.0.1:9/mcp"}}, format="json"
    )
    resp = api.post("/api/v1/tools/export/", {"ids": [created.json()["id"]]}, format="json", HTTP_ACCEPT=accept)
    assert resp.status_code == 200, resp.content
    assert resp["Content-Type"].startswith(accept)
    document = yaml.safe_load(resp.content)
    assert [t["name"] for t in document["tools"]] == ["y1"]


def test_export_format_yaml_in_the_body_still_answers_yaml(api: Any) -> None:
    created = api.post(
        "/api/v1/tools/", {"name": "y2", "type": "REMOTE", "config": {"url": "http://127.0.0.1:9/mcp"}}, format="json"
    )
    resp = api.post("/api/v1/tools/export/", {"ids": [created.json()["id"]], "format": "yaml"}, format="json")
    assert resp.status_code == 200
    assert resp["Content-Type"].startswith("application/yaml")
