"""Client config files (Claude Desktop, Cursor, Cline, Windsurf, VS Code) read as tool definitions (no Django)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools_app.client_config import (
    ClientConfigError,
    ClientServer,
    is_client_config,
    parse_client_config,
    substitute,
    timeout_seconds,
)

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "client_configs"


def servers(name: str) -> dict[str, ClientServer]:
    found, problems = parse_client_config(json.loads((CONFIGS / name).read_text()))
    assert problems == []
    return {s.name: s for s in found}


def test_claude_desktop_keeps_the_users_values() -> None:
    table = servers("claude_desktop.json")
    assert table["filesystem"].kind == "LOCAL"
    assert table["filesystem"].config == {"command": "npx", "env": {},
                                          "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]}
    assert table["github"].config["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp-literal-value"}
    assert all(not s.disabled and s.auto_approve == [] and s.variables == [] for s in table.values())


def test_cursor_url_only_entry_ending_in_sse_is_sse() -> None:
    table = servers("cursor.json")
    assert table["legacy-sse"].config == {"url": "https://mcp.example.test/sse", "transport": "sse", "headers": {}}
    assert table["streamable"].config["transport"] == "streamable_http"


def test_cursor_env_references_become_variables() -> None:
    table = servers("cursor.json")
    header = table["streamable"].variables
    assert [(v.name, v.source, v.is_secret, v.used_in) for v in header] == [
        ("MY_SERVICE_TOKEN", "env", True, ["headers.Authorization"])]
    local = {v.name: v for v in table["with-env"].variables}
    assert local["TZ_NAME"].used_in == ["args[1]"] and local["TZ_NAME"].is_secret is False
    assert local["API_KEY"].used_in == ["env.API_KEY"] and local["API_KEY"].is_secret is True


def test_cline_disabled_auto_approve_and_timeout() -> None:
    table = servers("cline.json")
    weather, fetch = table["weather"], table["fetch"]
    assert weather.disabled is True and fetch.disabled is False
    assert weather.auto_approve == ["get_forecast", "get_alerts"] and fetch.auto_approve == []
    assert weather.config["call_timeout_s"] == 120
    # 60000 is a minute written in milliseconds
    assert fetch.config["call_timeout_s"] == 60 and "milliseconds" in fetch.notes[0]


def test_windsurf_server_url_and_bare_references() -> None:
    table = servers("windsurf.json")
    kb = table["remote-kb"]
    assert kb.config["url"] == "https://kb.example.test/mcp" and kb.config["transport"] == "streamable_http"
    assert [(v.name, v.source, v.is_secret) for v in kb.variables] == [("KB_API_KEY", "var", True)]


def test_vscode_servers_and_inputs() -> None:
    table = servers("vscode.json")
    assert set(table) == {"perplexity", "files", "github", "old"}
    key = table["perplexity"].variables[0]
    assert (key.name, key.source, key.is_secret, key.description) == (
        "perplexity-key", "input", True, "Perplexity API Key")
    folder = table["files"].variables[0]
    assert (folder.name, folder.is_secret, folder.used_in) == ("workspace", False, ["args[2]"])
    assert table["github"].config["transport"] == "streamable_http"
    assert table["old"].config["transport"] == "sse"


def test_vscode_settings_nest_under_mcp() -> None:
    doc = {"mcp": {"servers": {"x": {"command": "uvx", "args": ["x"]}}}}
    assert is_client_config(doc)
    assert parse_client_config(doc)[0][0].config["command"] == "uvx"


def test_substitute_never_keeps_a_reference_as_text() -> None:
    server = servers("cursor.json")["with-env"]
    filled = substitute(server.config, {"TZ_NAME": "Europe/Paris"})
    assert filled["args"] == ["mcp-server-time", "--local-timezone=Europe/Paris"]
    assert filled["env"] == {"API_KEY": ""}
    assert "${" not in json.dumps(filled)


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [(120, 120.0), ("30", 30.0), (60000, 60.0), (0, 1.0), (900, 300.0), (None, None), ("soon", None), (True, None)],
)
def test_timeout_seconds(raw: Any, seconds: float | None) -> None:
    assert timeout_seconds(raw)[0] == seconds


def test_problems_name_the_server() -> None:
    found, problems = parse_client_config({"mcpServers": {
        "ok": {"url": "https://a.test/mcp"}, "broken": {"type": "stdio"}, "weird": {"type": "ws", "url": "wss://x"},
        "empty": {}, "": {"command": "x"}, "bad-args": {"command": "x", "args": {"a": 1}}}})
    assert [s.name for s in found] == ["ok"]
    assert {p.name: p.reason for p in problems} == {
        "broken": 'type "stdio" without a command',
        "weird": "unsupported type 'ws'; accepted: stdio, http, streamable-http, sse",
        "empty": "neither a command nor a url/serverUrl",
        None: "server #4 has an empty name",
        "bad-args": "args must be a list of strings",
    }


@pytest.mark.parametrize("doc", [[], {"servers": []}, {"mcpServers": []}, "x", None, {"format": "toolhub.tools/v1"}])
def test_other_documents_are_not_client_configs(doc: Any) -> None:
    assert not is_client_config(doc)
    with pytest.raises(ClientConfigError, match="mcpServers"):
        parse_client_config(doc)


def test_a_command_that_serves_http_itself_is_refused_not_turned_into_a_remote() -> None:
    doc = {"mcpServers": {
        "listener": {"command": "npx", "args": ["-y", "some-http-mcp"], "type": "streamable-http",
                     "url": "http://localhost:3001/mcp"},
        "stdio-with-url-noise": {"type": "stdio", "command": "uvx", "args": ["x"], "url": "http://localhost:9/"},
    }}
    found, problems = parse_client_config(doc)
    assert [s.name for s in found] == ["stdio-with-url-noise"] and found[0].kind == "LOCAL"
    assert [(p.name, p.code) for p in problems] == [("listener", "http_listener_package")]
    assert "runs its own HTTP listener (streamable_http at http://localhost:3001/mcp)" in problems[0].reason
    assert "stdio only" in problems[0].reason and "REMOTE tool" in problems[0].reason
