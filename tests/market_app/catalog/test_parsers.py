"""Format parsers: each format, detection, per-entry errors, duplicates, secrets and content hashes."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.codes import ApiCode
from market_app.catalog import (
    DEMO_CATALOG_PATH,
    CatalogError,
    EntryData,
    detect,
    parse_document,
    suggest_tool_name,
)
from tests.market_app.catalog.conftest import load


def by_name(entries: list[EntryData]) -> dict[str, EntryData]:
    return {e.name: e for e in entries}


def var_table(entry: EntryData) -> set[tuple[str, bool, bool, str | None]]:
    return {(v.name, v.is_secret, v.is_required, v.default) for v in entry.required_env + entry.required_headers}


# --- detection -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("doc", "fmt"),
    [
        ([], "list"),
        ({"data": []}, "list"),
        ({"mcpServers": {}}, "mcp_servers"),
        ({"servers": {"x": {"command": "y"}}}, "mcp_servers"),  # VS Code mcp.json
        ({"servers": [], "metadata": {}}, "official_registry"),
    ],
)
def test_detect(doc: Any, fmt: str) -> None:
    assert detect(doc) == fmt
    assert parse_document(doc).format == fmt


@pytest.mark.parametrize("doc", [{"items": []}, {}, "text", 42, None, {"data": "nope"}, {"mcpServers": []}])
def test_not_a_catalog_names_what_was_expected(doc: Any) -> None:
    with pytest.raises(CatalogError) as info:
        parse_document(doc)
    message = str(info.value)
    assert '{"data": [...]}' in message and '{"mcpServers": {...}}' in message and '{"servers": [...]}' in message
    assert info.value.code == "not_a_catalog"


@pytest.mark.parametrize(
    ("doc", "fmt", "expected"),
    [
        ({"servers": []}, "list", 'format "list" expects'),
        ([], "mcp_servers", 'format "mcp_servers" expects'),
        ({"data": []}, "official_registry", 'format "official_registry" expects'),
    ],
)
def test_explicit_format_mismatch(doc: Any, fmt: str, expected: str) -> None:
    with pytest.raises(CatalogError) as info:
        parse_document(doc, fmt)
    assert info.value.code == ApiCode.NOT_A_CATALOG and info.value.message.startswith(expected)  # names the format


def test_unknown_format() -> None:
    with pytest.raises(CatalogError) as info:
        parse_document([], "yaml")
    assert info.value.code == ApiCode.UNKNOWN_FORMAT and "'yaml'" in info.value.message


# --- simple list ---------------------------------------------------------------------------------------

LIST_EXPECTED = [
    ("remote-a", "REMOTE", {"url": "https://a.example.test/mcp", "transport": "streamable_http", "headers": {}}),
    ("remote-sse", "REMOTE", {"url": "https://b.example.test/sse", "transport": "sse", "headers": {}}),
    ("local-cmd", "LOCAL", {"command": "uvx", "args": ["mcp-server-time", "--local-timezone", "UTC"],
                            "env": {"TZ_DEFAULT": "UTC"}}),
    ("local-pkg", "LOCAL", {"command": "npx", "args": ["-y", "@scope/pkg-server"], "env": {}}),
    ("split-me", "LOCAL", {"command": "npx", "args": ["-y", "@scope/other"], "env": {}}),
]


@pytest.mark.parametrize(("name", "kind", "install"), LIST_EXPECTED)
def test_list_entries(name: str, kind: str, install: dict[str, Any]) -> None:
    entry = by_name(parse_document(load("list.json"), "list").entries)[name]
    assert (entry.kind, entry.install, entry.status) == (kind, install, "active")


def test_list_top_level_array_and_version() -> None:
    result = parse_document([{"name": "a", "url": "https://a.test/mcp", "version": 1.5, "description": "d"}])
    assert [(e.name, e.version, e.description, e.title) for e in result.entries] == [("a", "1.5", "d", "a")]


def test_list_env_values_are_defaults_and_secret_values_dropped() -> None:
    entry = by_name(parse_document(load("list.json")).entries)["local-cmd"]
    assert var_table(entry) == {
        ("TZ_DEFAULT", False, False, "UTC"),
        ("OPENWEATHER_API_KEY", True, True, None),
        ("REGION", False, True, None),
    }
    assert "put-your-key-here" not in json.dumps(entry.to_dict())


def test_list_errors_are_reported_not_dropped() -> None:
    result = parse_document(load("list.json"))
    assert [(e.name, e.index) for e in result.errors] == [(None, 6), ("nothing-to-run", 7), ("remote-a", 8)]
    assert "has no name" in result.errors[0].reason
    assert "nothing to install" in result.errors[1].reason
    assert "duplicate" in result.errors[2].reason
    # The first remote-a is the one kept.
    assert by_name(result.entries)["remote-a"].install["url"] == "https://a.example.test/mcp"


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ("just a string", "is not a JSON object"),
        ({"name": ""}, "has no name"),
        ({"name": "x", "url": "https://x.test", "type": "websocket"}, "unsupported transport"),
        ({"name": "x", "command": "run", "args": {"a": 1}}, "args must be a list"),
        ({"name": "x", "command": "run", "env": ["A"]}, "env must be an object"),
    ],
)
def test_list_bad_items(item: Any, reason: str) -> None:
    result = parse_document([item])
    assert result.entries == [] and len(result.errors) == 1
    assert reason in result.errors[0].reason


def test_shell_one_liner_is_flagged() -> None:
    entries = by_name(parse_document(load("list.json")).entries)
    assert entries["local-oneliner"].is_shell_command is True
    assert not any(e.is_shell_command for n, e in entries.items() if n != "local-oneliner")


# --- mcpServers ----------------------------------------------------------------------------------------

MCP_EXPECTED = [
    ("files", "LOCAL", {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
                        "env": {"K": "v"}}),
    ("remote", "REMOTE", {"url": "https://example.test/mcp", "transport": "streamable_http", "headers": {}}),
    ("legacy", "REMOTE", {"url": "https://example.test/sse", "transport": "sse", "headers": {}}),
    ("aliased", "REMOTE", {"url": "https://alias.example.test/mcp", "transport": "streamable_http", "headers": {}}),
    ("typed-stdio", "LOCAL", {"command": "uvx", "args": ["mcp-server-git"], "env": {}}),
]


@pytest.mark.parametrize(("name", "kind", "install"), MCP_EXPECTED)
def test_mcp_servers_entries(name: str, kind: str, install: dict[str, Any]) -> None:
    entry = by_name(parse_document(load("mcp_servers.json")).entries)[name]
    assert (entry.kind, entry.install) == (kind, install)


def test_mcp_servers_secret_header_value_not_kept() -> None:
    entry = by_name(parse_document(load("mcp_servers.json")).entries)["remote"]
    assert var_table(entry) == {("Authorization", True, True, None)}
    assert "abc123" not in json.dumps(entry.to_dict())


def test_mcp_servers_errors() -> None:
    errors = {e.name: e.reason for e in parse_document(load("mcp_servers.json")).errors}
    assert errors == {
        "broken": 'type "stdio" without a command',
        "empty": "neither a command nor a url/serverUrl",
        "weird": "unsupported type 'websocket'; accepted: stdio, http, streamable-http, sse",
    }


# --- official registry ---------------------------------------------------------------------------------

REGISTRY_EXPECTED = [
    ("io.github.acme/npm-server", "LOCAL", "active",
     {"command": "npx", "args": ["-y", "@acme/mcp-server@1.2.0", "/data", "--mode", "ro"],
      "env": {"ACME_REGION": "eu-west-1"}}),
    ("io.github.acme/pypi-server", "LOCAL", "active",
     {"command": "uvx", "args": ["--python", "3.11", "acme-mcp==0.4.1"], "env": {}}),
    ("io.github.acme/oci-server", "LOCAL", "active",
     {"command": "docker", "args": ["run", "-i", "--rm", "-e", "ACME_TOKEN", "-v", "/srv:/srv",
                                    "docker.io/acme/mcp:2.0.0"], "env": {}}),
    ("io.github.acme/remote-server", "REMOTE", "active",
     {"url": "https://{tenant}.acme.example.test/mcp", "transport": "streamable_http", "headers": {}}),
    ("io.github.acme/both", "REMOTE", "active",
     {"url": "https://both.acme.example.test/sse", "transport": "sse", "headers": {}}),
    ("io.github.acme/old-server", "REMOTE", "deprecated",
     {"url": "https://old.acme.example.test/sse", "transport": "sse", "headers": {}}),
    ("io.github.acme/gone-server", "LOCAL", "removed",
     {"command": "npx", "args": ["-y", "@acme/gone@0.1.0"], "env": {}}),
    ("io.github.acme/dotnet-server", "LOCAL", "active",
     {"command": "dnx", "args": ["Acme.Mcp@1.0.0", "--yes"], "env": {}}),
]


@pytest.mark.parametrize(("name", "kind", "status", "install"), REGISTRY_EXPECTED)
def test_registry_entries(name: str, kind: str, status: str, install: dict[str, Any]) -> None:
    entry = by_name(parse_document(load("registry_page.json"), "official_registry").entries)[name]
    assert (entry.kind, entry.status, entry.install) == (kind, status, install)
    assert entry.updated_at and entry.updated_at.startswith("2025-09-")


@pytest.mark.parametrize(
    ("name", "variables"),
    [
        ("io.github.acme/npm-server", {("ACME_API_KEY", True, True, None), ("ACME_REGION", False, False, "eu-west-1")}),
        ("io.github.acme/oci-server", {("ACME_TOKEN", True, True, None)}),
        ("io.github.acme/remote-server", {("tenant", False, True, None), ("X-Api-Key", True, True, None)}),
    ],
)
def test_registry_required_vars(name: str, variables: set[tuple[str, bool, bool, str | None]]) -> None:
    entry = by_name(parse_document(load("registry_page.json")).entries)[name]
    assert var_table(entry) == variables


def test_registry_remote_vars_split_env_and_headers() -> None:
    entry = by_name(parse_document(load("registry_page.json")).entries)["io.github.acme/remote-server"]
    assert [v.name for v in entry.required_env] == ["tenant"]
    assert [v.name for v in entry.required_headers] == ["X-Api-Key"]
    assert entry.title == "Acme remote"


def test_registry_errors_name_the_entry() -> None:
    errors = parse_document(load("registry_page.json")).errors
    assert [(e.name, e.index) for e in errors] == [("io.github.acme/http-package", 8), (None, 9)]
    assert "runs its own HTTP listener (streamable-http at http://localhost:{port}/mcp)" in errors[0].reason
    assert "stdio only" in errors[0].reason
    assert [e.code for e in errors] == ["http_listener_package", "unmappable"]


def test_list_entry_with_a_command_and_its_own_url_is_refused_as_an_http_listener() -> None:
    result = parse_document([
        {"name": "pkg-listener", "package": "some-http-mcp", "url": "http://localhost:3000/mcp"},
        {"name": "cmd-listener", "command": "python -m srv", "url": "http://localhost:3000/sse"},
        {"name": "plain-remote", "url": "https://mcp.example.test/mcp"},
    ])
    assert [e.name for e in result.entries] == ["plain-remote"]
    assert [(e.name, e.code) for e in result.errors] == [("pkg-listener", "http_listener_package"),
                                                        ("cmd-listener", "http_listener_package")]
    assert "(sse at http://localhost:3000/sse)" in result.errors[1].reason


def test_registry_prefer_package() -> None:
    result = parse_document(load("registry_page.json"), prefer="package")
    entry = by_name(result.entries)["io.github.acme/both"]
    assert entry.install == {"command": "npx", "args": ["-y", "@acme/both@1.0.0"], "env": {}}


@pytest.mark.parametrize(
    ("package", "expected_args"),
    [
        ({"registryType": "npm", "identifier": "pkg"}, ["-y", "pkg"]),
        ({"registryType": "oci", "identifier": "ghcr.io/a/b:1.0", "version": "1.0"}, ["run", "-i", "--rm", "ghcr.io/a/b:1.0"]),
        ({"registryType": "pypi", "identifier": "p", "version": "2",
          "packageArguments": [{"type": "named", "name": "--token", "isSecret": True, "isRequired": True},
                               {"type": "positional", "valueHint": "directory", "isRequired": True},
                               {"type": "positional", "valueHint": "optional"}]},
         ["p==2", "--token", "{TOKEN}", "{directory}"]),
    ],
)
def test_registry_package_arguments(package: dict[str, Any], expected_args: list[str]) -> None:
    page = {"servers": [{"server": {"name": "s", "packages": [package]}}]}
    entry = parse_document(page).entries[0]
    assert entry.install["args"] == expected_args


def test_registry_secret_argument_is_a_required_secret_var() -> None:
    package = {"registryType": "pypi", "identifier": "p",
               "packageArguments": [{"type": "named", "name": "--token", "value": "leak", "isSecret": True}]}
    entry = parse_document({"servers": [{"server": {"name": "s", "packages": [package]}}]}).entries[0]
    assert var_table(entry) == {("TOKEN", True, True, None)}
    assert "leak" not in json.dumps(entry.to_dict())


@pytest.mark.parametrize(
    ("server", "reason"),
    [
        ({"name": "s"}, "no packages or remotes"),
        ({"name": "s", "packages": [{"registryType": "mcpb", "identifier": "x"}]}, "'mcpb' is not supported"),
        ({"name": "s", "remotes": [{"type": "websocket", "url": "wss://x"}]}, "remote type 'websocket'"),
        ({"name": "s", "remotes": [{"type": "sse"}]}, "remote without a url"),
        ({"name": "s", "packages": [{"registryType": "npm", "identifier": "x",
                                     "transport": {"type": "sse"}}]}, "runs its own HTTP listener (sse at (no url))"),
    ],
)
def test_registry_unmappable(server: dict[str, Any], reason: str) -> None:
    result = parse_document({"servers": [{"server": server}]})
    assert result.entries == [] and result.errors[0].name == "s"
    assert reason in result.errors[0].reason


def test_registry_next_cursor_and_duplicates() -> None:
    page = {"servers": [{"server": {"name": "a", "remotes": [{"type": "sse", "url": "https://a/1"}]}},
                        {"server": {"name": "a", "remotes": [{"type": "sse", "url": "https://a/2"}]}}],
            "metadata": {"nextCursor": "abc", "count": 2}}
    result = parse_document(page)
    assert result.next_cursor == "abc"
    assert [e.install["url"] for e in result.entries] == ["https://a/1"]
    assert result.errors[0].name == "a" and "duplicate" in result.errors[0].reason


# --- content hash --------------------------------------------------------------------------------------

def shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32))
@pytest.mark.parametrize("fixture", ["list.json", "mcp_servers.json", "registry_page.json"])
def test_content_hash_ignores_key_order(fixture: str, seed: int) -> None:
    doc = load(fixture)
    before = {e.name: e.content_hash for e in parse_document(doc).entries}
    after = {e.name: e.content_hash for e in parse_document(shuffled(doc, random.Random(seed))).entries}
    assert before == after


@pytest.mark.parametrize(
    ("change", "changes_hash"),
    [
        ({"description": "new text"}, True),
        ({"version": "1.0.1"}, True),
        ({"args": ["mcp-server-time", "--local-timezone", "CET"]}, True),
        ({"env": {"TZ_DEFAULT": "UTC", "OPENWEATHER_API_KEY": "x", "REGION": "", "NEW": "1"}}, True),
        ({"env": {"REGION": "", "OPENWEATHER_API_KEY": "other", "TZ_DEFAULT": "UTC"}}, False),
        ({"status": "deprecated"}, False),
    ],
)
def test_content_hash_changes_with_content(change: dict[str, Any], changes_hash: bool) -> None:
    item = next(i for i in load("list.json")["data"] if i.get("name") == "local-cmd")
    before = parse_document([item]).entries[0]
    after = parse_document([{**item, **change}]).entries[0]
    assert (before.content_hash != after.content_hash) is changes_hash
    assert len(before.content_hash) == 64


# --- demo catalog and names ----------------------------------------------------------------------------

def test_demo_catalog_parses_cleanly() -> None:
    result = parse_document(json.loads(DEMO_CATALOG_PATH.read_text()))
    assert result.errors == []
    names = [e.name for e in result.entries]
    assert "inventory-demo" in names and 3 <= len(names) <= 4
    demo = by_name(result.entries)["inventory-demo"]
    assert demo.kind == "LOCAL" and demo.install["command"] == "python"


@pytest.mark.parametrize(
    ("name", "tool_name"),
    [
        ("io.github.acme/npm-server", "acme-npm-server"),
        ("io.github.x/y", "x-y"),
        ("com.figma.mcp/mcp", "figma-mcp"),
        ("ai.smithery/brave", "smithery-brave"),
        ("io.github.mongodb-js/mongodb-mcp-server", "mongodb-js-mongodb-mcp-server"),
        ("io.github." + "o" * 70 + "/mcp", "o" * 60 + "-mcp"),
        ("My Server!", "my-server"),
        ("inventory-demo", "inventory-demo"),
        ("///", "server"),
        ("x" * 80, "x" * 64),
    ],
)
def test_suggest_tool_name(name: str, tool_name: str) -> None:
    assert suggest_tool_name(name) == tool_name


# --- storage limits ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ([{"name": "n" * 201, "url": "https://a.test"}], "name longer than 200"),
        ([{"name": "a", "url": "https://a.test", "version": "1." * 40}], "version longer than 64"),
        ({"mcpServers": {"n" * 201: {"command": "x"}}}, "name longer than 200"),
        ({"servers": [{"server": {"name": "n" * 201, "remotes": [{"type": "sse", "url": "https://a"}]}}]},
         "name longer than 200"),
    ],
)
def test_fields_too_long_to_store_are_entry_errors(doc: Any, reason: str) -> None:
    result = parse_document(doc)
    assert result.entries == [] and reason in result.errors[0].reason


def test_long_title_and_description_are_cut() -> None:
    entry = parse_document([{"name": "a", "url": "https://a.test", "title": "t" * 500,
                             "description": "d" * 20_000}]).entries[0]
    assert (len(entry.title), len(entry.description)) == (200, 10_000)


def test_client_config_references_become_entry_variables() -> None:
    path = Path(__file__).resolve().parents[2] / "fixtures" / "client_configs" / "vscode.json"
    entries = by_name(parse_document(json.loads(path.read_text())).entries)
    assert var_table(entries["perplexity"]) == {("PERPLEXITY_API_KEY", True, True, None)}
    assert entries["perplexity"].install["env"] == {}
    files = entries["files"]
    assert files.install["args"][-1] == "{workspace}" and files.install["env"] == {}
    assert [(v.name, v.template_only) for v in files.required_env] == [("workspace", True)]
    assert "${" not in json.dumps([e.to_dict() for e in entries.values()])


def registry_install(package: dict[str, Any]) -> dict[str, Any]:
    result = parse_document({"servers": [{"server": {"name": "io.github.x/y", "packages": [package]}}]})
    assert result.entries, result.errors
    return dict(result.entries[0].install)


@pytest.mark.parametrize(
    ("package", "command", "args"),
    [
        # publisher runtime arguments that repeat the runner line are not doubled
        ({"registryType": "oci", "identifier": "acme/img", "version": "1",
          "runtimeArguments": [{"type": "positional", "value": "run"}, {"type": "named", "name": "-i", "value": ""},
                               {"type": "named", "name": "--rm"}, {"type": "named", "name": "--network", "value": "host"}]},
         "docker", ["run", "-i", "--rm", "--network", "host", "acme/img:1"]),
        # ... nor the package reference; when they name it they are the whole command line
        ({"registryType": "oci", "identifier": "acme/img:1", "runtimeHint": "docker",
          "runtimeArguments": [{"type": "positional", "value": "run"}, {"type": "named", "name": "-e"},
                               {"type": "positional", "value": "TOKEN"}, {"type": "positional", "value": "acme/img:1"},
                               {"type": "positional", "value": "serve"}],
          "environmentVariables": [{"name": "TOKEN", "isSecret": True, "isRequired": True}]},
         "docker", ["run", "-i", "--rm", "-e", "TOKEN", "acme/img:1", "serve"]),
        ({"registryType": "npm", "identifier": "pkg", "version": "2.0.0",
          "runtimeArguments": [{"type": "positional", "value": "-y"}, {"type": "positional", "value": "pkg@2.0.0"}]},
         "npx", ["-y", "pkg@2.0.0"]),
        # runtimeHint within the package's ecosystem
        ({"registryType": "npm", "identifier": "pkg", "runtimeHint": "bun"}, "bunx", ["pkg"]),
        ({"registryType": "pypi", "identifier": "p", "version": "1", "runtimeHint": "python"}, "uvx", ["p==1"]),
        ({"registryType": "pypi", "identifier": "p", "runtimeHint": "pipx"}, "pipx", ["run", "p"]),
        ({"registryType": "nuget", "identifier": "Acme.Mcp", "version": "0.3.0-beta", "runtimeHint": "dnx",
          "packageArguments": [{"type": "positional", "value": "--stdio"}]},
         "dnx", ["Acme.Mcp@0.3.0-beta", "--yes", "--", "--stdio"]),
        # optional named arguments without value or default are left out; with a default they are passed
        ({"registryType": "npm", "identifier": "pkg",
          "packageArguments": [{"type": "named", "name": "--apiKey"}, {"type": "named", "name": "--secret", "isSecret": True},
                               {"type": "named", "name": "--mode", "default": "ro"}]},
         "npx", ["-y", "pkg", "--mode", "ro"]),
    ],
)
def test_registry_runner_lines(package: dict[str, Any], command: str, args: list[str]) -> None:
    install = registry_install(package)
    assert (install["command"], install["args"]) == (command, args)


def test_registry_argument_variables_are_template_only() -> None:
    page = {"servers": [{"server": {"name": "io.github.x/fs", "packages": [{
        "registryType": "oci", "identifier": "mcp/filesystem", "version": "1",
        "runtimeArguments": [{"type": "named", "name": "--mount", "value": "type=bind,src={source_path},dst=/p",
                              "variables": {"source_path": {"isRequired": True}}}],
        "packageArguments": [{"type": "positional", "valueHint": "target_dir", "isRequired": True}],
        "environmentVariables": [{"name": "LOG_LEVEL", "default": "info"}]}]}}]}
    entry = parse_document(page).entries[0]
    assert {v.name: v.template_only for v in entry.required_env} == {
        "LOG_LEVEL": False, "source_path": True, "target_dir": True}
    assert entry.install["args"] == ["run", "-i", "--rm", "-e", "LOG_LEVEL", "--mount",
                                     "type=bind,src={source_path},dst=/p", "mcp/filesystem:1", "{target_dir}"]


def test_registry_versions_isLatest_then_semver() -> None:
    def item(version: str, latest: bool | None = None) -> dict[str, Any]:
        meta = {} if latest is None else {"_meta": {"io.modelcontextprotocol.registry/official": {"isLatest": latest}}}
        return {"server": {"name": "s", "version": version, "remotes": [{"type": "sse", "url": f"https://a/{version}"}]},
                **meta}
    assert [e.version for e in parse_document({"servers": [item("1.10.0"), item("1.9.0"), item("1.10.0-rc.1")]}).entries] == ["1.10.0"]
    assert [e.version for e in parse_document({"servers": [item("2.0.0", False), item("1.0.0", True)]}).entries] == ["1.0.0"]
    assert parse_document({"servers": [item("0.1.0"), item("0.2.0")]}).errors == []


def test_registry_seed_format_2025_05() -> None:
    seed = [{"name": "io.github.x/seed", "description": "seed", "version_detail": {"version": "0.0.1-seed", "is_latest": True},
             "packages": [{"registry_name": "npm", "name": "@x/seed", "version": "1.0.0", "runtime_hint": "npx",
                           "environment_variables": [{"name": "X_KEY", "is_required": True, "is_secret": True}],
                           "package_arguments": [{"type": "positional", "value_hint": "dir", "is_required": True}]}]},
            {"name": "io.github.x/docker", "packages": [{"registry_name": "docker", "package_name": "x/img", "version": "2"}]},
            {"name": "io.github.x/remote", "remotes": [{"transport_type": "streamable", "url": "https://r.test/mcp"}]}]
    result = parse_document(seed)
    entries = by_name(result.entries)
    assert result.format == "official_registry" and result.errors == []
    seed_entry = entries["io.github.x/seed"]
    assert seed_entry.version == "0.0.1-seed"
    assert seed_entry.install == {"command": "npx", "args": ["-y", "@x/seed@1.0.0", "{dir}"], "env": {}}
    assert var_table(seed_entry) == {("X_KEY", True, True, None), ("dir", False, True, None)}
    assert entries["io.github.x/docker"].install["args"] == ["run", "-i", "--rm", "x/img:2"]
    assert entries["io.github.x/remote"].install["transport"] == "streamable_http"


def test_list_url_ending_in_sse_without_a_transport_is_sse() -> None:
    entries = by_name(parse_document([{"name": "a", "url": "https://a.test/sse"},
                                      {"name": "b", "url": "https://b.test/mcp"},
                                      {"name": "c", "url": "https://c.test/sse", "transport": "http"}]).entries)
    assert [entries[n].install["transport"] for n in "abc"] == ["sse", "streamable_http", "streamable_http"]


def test_vscode_settings_are_a_client_config_catalog() -> None:
    doc = {"mcp": {"servers": {"x": {"command": "uvx", "args": ["x"]}}}}
    assert detect(doc) == "mcp_servers"
    assert parse_document(doc).entries[0].install == {"command": "uvx", "args": ["x"], "env": {}}
