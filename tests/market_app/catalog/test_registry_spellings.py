"""Registry mapping of the spellings real publishers use (issue: gateway and catalog fidelity, items 7-9).

Each case is shaped like a real server.json of the official registry: a package reference written differently in
runtimeArguments than in `identifier`, a valueless `-e` followed by its variable, a secret header template, and a
mirror that ignores `version=latest`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from market_app.catalog import parse_document
from market_app.catalog.common import VersionCollector
from market_app.catalog.types import EntryData


def one(package: dict[str, Any], name: str = "io.github.acme/s") -> EntryData:
    result = parse_document({"servers": [{"server": {"name": name, "version": "1.0.0", "packages": [package]}}]},
                            "official_registry")
    assert not [e for e in result.errors if not e.reason.startswith("mapped")], result.errors
    return result.entries[0]


# hashicorp/terraform-mcp-server 0.3.3 as published: the identifier with docker.io/, the command line written out
# with the image as `hashicorp/...:0.3.3`, each `-e` without a value and its variable as the next argument.
TERRAFORM = {
    "registryType": "oci", "identifier": "docker.io/hashicorp/terraform-mcp-server", "version": "0.3.3",
    "runtimeHint": "docker", "transport": {"type": "stdio"},
    "runtimeArguments": [
        {"type": "positional", "value": "run"}, {"type": "named", "name": "-i"}, {"type": "named", "name": "--rm"},
        {"type": "named", "name": "-e"}, {"type": "positional", "value": "TFE_ADDRESS"},
        {"type": "named", "name": "-e"}, {"type": "positional", "value": "TFE_TOKEN"},
        {"type": "positional", "value": "hashicorp/terraform-mcp-server:0.3.3"},
    ],
    "environmentVariables": [
        {"name": "TFE_ADDRESS", "description": "HCP Terraform address", "default": "https://app.terraform.io"},
        {"name": "TFE_TOKEN", "description": "API token", "isSecret": True, "isRequired": True},
    ],
}


def test_a_reference_spelt_without_docker_io_appears_once_and_every_e_keeps_its_variable() -> None:
    entry = one(TERRAFORM)
    assert entry.install["command"] == "docker"
    assert entry.install["args"] == ["run", "-i", "--rm", "-e", "TFE_ADDRESS", "-e", "TFE_TOKEN",
                                     "hashicorp/terraform-mcp-server:0.3.3"]


@pytest.mark.parametrize(("package", "expected"), [
    # uvx with pip extras in the written command line: the package once, as written
    ({"registryType": "pypi", "identifier": "markitdown-mcp", "version": "0.0.1a4", "runtimeHint": "uvx",
      "runtimeArguments": [{"type": "positional", "value": "--from"},
                           {"type": "positional", "value": "markitdown-mcp[cli]==0.0.1a4"}]},
     ["--from", "markitdown-mcp[cli]==0.0.1a4"]),
    # npx with @latest written out while the identifier has none
    ({"registryType": "npm", "identifier": "@acme/mcp-server", "version": "2.1.0", "runtimeHint": "npx",
      "runtimeArguments": [{"type": "named", "name": "-y"}, {"type": "positional", "value": "@acme/mcp-server@latest"}]},
     ["-y", "@acme/mcp-server@latest"]),
    # an image written without its tag: the bare name stays what the publisher wrote
    ({"registryType": "oci", "identifier": "docker.io/acme/server", "version": "1.2.0",
      "runtimeArguments": [{"type": "positional", "value": "acme/server"}]},
     ["run", "-i", "--rm", "acme/server"]),
])
def test_a_reference_spelt_differently_is_not_doubled(package: dict[str, Any], expected: list[str]) -> None:
    args = one(package).install["args"]
    assert args == expected


def test_a_valueless_flag_not_followed_by_its_value_is_still_left_out() -> None:
    package = {"registryType": "npm", "identifier": "pkg", "version": "1.0.0",
               "packageArguments": [{"type": "named", "name": "--port"}, {"type": "named", "name": "--verbose"}]}
    assert one(package).install["args"] == ["-y", "pkg@1.0.0"]


def test_a_placeholder_inside_a_secret_header_template_is_a_secret_variable() -> None:
    remote = {"type": "streamable-http", "url": "https://server.smithery.ai/acme/mcp",
              "headers": [{"name": "Authorization", "value": "Bearer {smithery_api_key}", "isSecret": True,
                           "isRequired": True}]}
    result = parse_document({"servers": [{"server": {"name": "ai.smithery/acme", "version": "1.0.0",
                                                     "remotes": [remote]}}]}, "official_registry")
    entry = result.entries[0]
    shown = {v.name: v.is_secret for v in entry.required_headers}
    assert shown.get("smithery_api_key") is True, entry.required_headers
    assert entry.install["headers"] == {"Authorization": "Bearer {smithery_api_key}"}  # the template, not a value
    assert "smithery_api_key" in json.dumps(entry.to_dict())


def _version(v: str, latest: bool, package: dict[str, Any]) -> dict[str, Any]:
    return {"server": {"name": "io.github.acme/s", "version": v, "packages": [package]},
            "_meta": {"io.modelcontextprotocol.registry/official": {"isLatest": latest,
                                                                     "publishedAt": f"2026-0{v[0]}-01T00:00:00Z"}}}


MAPPABLE = {"registryType": "npm", "identifier": "pkg", "version": "1.0.0"}
UNMAPPABLE = {"registryType": "mcpb", "identifier": "https://example.com/pkg.mcpb", "version": "2.0.0"}


@pytest.mark.parametrize("order", ["latest last", "latest first"])
def test_a_latest_version_that_cannot_be_mapped_is_not_replaced_by_an_older_one(order: str) -> None:
    """A mirror that ignores version=latest sends every version: the server is unmappable at its latest."""
    items = [_version("1.0.0", False, MAPPABLE), _version("2.0.0", True, UNMAPPABLE)]
    if order == "latest first":
        items.reverse()
    result = parse_document({"servers": items}, "official_registry")
    assert result.entries == []
    assert any(e.name == "io.github.acme/s" and "mcpb" in e.reason for e in result.errors), result.errors


def test_an_older_unmappable_version_does_not_hide_a_mappable_latest() -> None:
    items = [_version("1.0.0", False, UNMAPPABLE), _version("2.0.0", True, {**MAPPABLE, "version": "2.0.0"})]
    result = parse_document({"servers": items}, "official_registry")
    assert [e.install["args"] for e in result.entries] == [["-y", "pkg@2.0.0"]]


def test_across_pages_a_failed_latest_drops_the_older_version_kept_earlier() -> None:
    collector = VersionCollector()
    older = parse_document({"servers": [_version("1.0.0", False, MAPPABLE)]}, "official_registry")
    assert collector.offer(older.entries[0], older.ranks["io.github.acme/s"])
    newer = parse_document({"servers": [_version("2.0.0", True, UNMAPPABLE)]}, "official_registry")
    for name, rank in newer.failed_ranks.items():
        collector.fail(name, rank)
    assert collector.entries == []
    assert not collector.offer(older.entries[0], older.ranks["io.github.acme/s"])  # and stays out
