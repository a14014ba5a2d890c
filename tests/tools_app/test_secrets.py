"""Secrets are write-only and encrypted at rest: a canary never comes back out."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import yaml
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from core import crypto
from tools_app.models import Tool

pytestmark = pytest.mark.django_db

CANARY = "canary-7f3a9c-secret"


def make_tools(api: Any) -> list[int]:
    bodies = [
        {"name": "remote", "type": "REMOTE", "config": {"url": "http://127.0.0.1:9/m", "headers": {"Authorization": f"Bearer {CANARY}"}}},
        {"name": "local", "type": "LOCAL", "config": {"command": "python3", "env": {"API_KEY": CANARY}}},
        {"name": "http", "type": "HTTP", "config": {"method": "GET", "url": "http://127.0.0.1:9/x?k=${secret.k}",
                                                     "headers": {"X-K": CANARY}, "secrets": {"k": CANARY}}},
    ]
    ids = []
    for body in bodies:
        resp = api.post("/api/v1/tools/", body, format="json")
        assert resp.status_code == 201, resp.content
        assert CANARY.encode() not in resp.content
        ids.append(resp.json()["id"])
    return ids


def test_canary_never_in_api_responses(api: Any, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    ids = make_tools(api)
    responses = [
        api.get("/api/v1/tools/"),
        api.get("/api/v1/tools/all/"),
        api.get("/api/v1/tools/options/"),
        *[api.get(f"/api/v1/tools/{i}/") for i in ids],
        *[api.patch(f"/api/v1/tools/{i}/", {"description": "x"}, format="json") for i in ids],
        api.post("/api/v1/tools/export/", {"ids": ids}, format="json"),
        api.post("/api/v1/tools/export/", {"ids": ids, "format": "yaml"}, format="json"),
        # Errors on the secret-bearing path must not echo it either.
        api.patch(f"/api/v1/tools/{ids[0]}/", {"config": {"url": "ftp://x", "headers": {"Authorization": "********"}}}, format="json"),
        api.patch(f"/api/v1/tools/{ids[1]}/", {"config": {"command": "", "env": {"API_KEY": "********"}}}, format="json"),
    ]
    for resp in responses:
        assert resp.status_code < 500
        assert CANARY.encode() not in resp.content, resp.content
    assert CANARY not in caplog.text


def test_export_masks_and_roundtrips_through_import(api: Any, other_api: Any) -> None:
    ids = make_tools(api)
    exported = api.post("/api/v1/tools/export/", {"ids": ids, "format": "yaml"}, format="json")
    document = yaml.safe_load(exported.content)
    assert document["tools"][0]["config"]["headers"]["X-K"] == "********"
    resp = other_api.post("/api/v1/tools/import/", exported.content, content_type="application/yaml")
    assert resp.status_code == 201, resp.content
    created = {t["name"]: t for t in resp.json()["created"]}
    assert set(created) == {"remote", "local", "http"}
    # Masked secrets had nothing to keep: the tool waits, disabled, for real values.
    assert created["local"]["needs_secrets"] == ["env.API_KEY"]
    assert created["local"]["status"] == "DISABLED"
    assert Tool.objects.filter(tenant__slug="globex", name="local").get().config["env"] == {"API_KEY": ""}


def test_encrypted_column_holds_no_plaintext(api: Any) -> None:
    make_tools(api)
    with connection.cursor() as cur:
        cur.execute("SELECT config FROM tools_app_tool WHERE type <> 'BUILTIN'")
        raw = [row[0] for row in cur.fetchall()]
    # Fernet tokens are urlsafe base64: a quoted JSON key can never appear in one by chance.
    assert raw and all(value.startswith("gAAAAA") for value in raw)
    assert all(CANARY not in value and '"X-K"' not in value and '"env"' not in value for value in raw)
    assert Tool.objects.get(name="local").config["env"]["API_KEY"] == CANARY


def test_admin_pages_never_show_the_secret(api: Any, admin_client: Any) -> None:
    ids = make_tools(api)
    pages = [admin_client.get("/admin/tools_app/tool/")]
    pages += [admin_client.get(f"/admin/tools_app/tool/{i}/change/") for i in ids]
    for page in pages:
        assert page.status_code == 200
        assert CANARY.encode() not in page.content
    assert b"********" in pages[1].content


def test_admin_blank_config_keeps_and_json_replaces(api: Any, admin_client: Any) -> None:
    tool_id = make_tools(api)[1]
    form = {"name": "local", "description": "edited", "status": "ENABLED", "safety": "WRITE", "config_json": "",
            "config_advanced": "on", "functions-TOTAL_FORMS": "0", "functions-INITIAL_FORMS": "0"}
    resp = admin_client.post(f"/admin/tools_app/tool/{tool_id}/change/", form)
    assert resp.status_code == 302, resp.content[:2000]
    tool = Tool.objects.get(pk=tool_id)
    assert tool.description == "edited" and tool.config["env"]["API_KEY"] == CANARY
    form["config_json"] = '{"command": "python3", "env": {"API_KEY": "********", "EXTRA": "e"}}'
    admin_client.post(f"/admin/tools_app/tool/{tool_id}/change/", form)
    tool.refresh_from_db()
    assert tool.config["env"] == {"API_KEY": CANARY, "EXTRA": "e"}
    assert tool.config_version == 2


def test_rotation_keeps_every_config_readable(api: Any, settings: Any, capsys: Any) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.TOOLHUB_SECRET_KEYS = [old]
    crypto.reset_keys()
    try:
        make_tools(api)
        with override_settings(TOOLHUB_SECRET_KEYS=[new, old]):
            crypto.reset_keys()
            call_command("rotate_secrets")
        with override_settings(TOOLHUB_SECRET_KEYS=[new]):
            crypto.reset_keys()
            configs = {t.name: t.config for t in Tool.objects.exclude(type="BUILTIN")}
        assert configs["local"]["env"]["API_KEY"] == CANARY
        assert configs["remote"]["headers"]["Authorization"] == f"Bearer {CANARY}"
        with override_settings(TOOLHUB_SECRET_KEYS=[Fernet.generate_key().decode()]):
            crypto.reset_keys()
            with pytest.raises(crypto.SecretDecryptError):
                list(Tool.objects.exclude(type="BUILTIN"))
    finally:
        crypto.reset_keys()


def test_not_secret_entries_are_shown_and_never_reveal_a_stored_secret(api: Any) -> None:
    created = api.post("/api/v1/tools/", {"name": "kb", "type": "REMOTE", "config": {
        "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": f"Bearer {CANARY}", "X-Tenant": "acme"},
        "not_secret": ["headers.X-Tenant"]}}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["config_summary"]["headers"] == {"Authorization": "********", "X-Tenant": "acme"}
    assert CANARY not in created.content.decode()
    tool_id = body["id"]
    reveal = api.patch(f"/api/v1/tools/{tool_id}/", {"config": {
        "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "********", "X-Tenant": "acme"},
        "not_secret": ["headers.Authorization", "headers.X-Tenant"]}}, format="json")
    assert reveal.status_code == 400 and reveal.json()["error"]["code"] == "invalid_config"
    assert reveal.json()["error"]["details"]["field"] == "config.headers.Authorization"
    assert CANARY not in reveal.content.decode()
    unknown = api.patch(f"/api/v1/tools/{tool_id}/", {"config": {
        "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "********"}, "not_secret": ["headers.Nope"]}},
        format="json")
    assert unknown.status_code == 400 and unknown.json()["error"]["details"]["field"] == "config.not_secret"
    assert Tool.objects.get(pk=tool_id).config["headers"]["Authorization"] == f"Bearer {CANARY}"
