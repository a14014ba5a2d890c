"""45 real official-registry entries served as a v0.1 registry: every mapping rule checked on every entry.

The excerpt (tests/fixtures/catalogs/registry_excerpt.json, copied from the shared reference) is served
once by a registry that honours `version=latest` and once by one that ignores it and returns every
version. The assertions are general rules over whatever the registry holds, not facts about one server.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from core.outbound import OutboundPolicy
from market_app import services
from market_app.catalog import FetchResult, fetch_catalog, parse_document
from market_app.catalog.registry import OFFICIAL_META, semver_key
from market_app.errors import MissingVariables
from market_app.models import MarketEntry, MarketSource
from tests.fixtures.catalog_server import CatalogServer, Registry

EXCERPT = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "catalogs" /
                      "registry_excerpt.json").read_text())
ITEMS: list[dict[str, Any]] = EXCERPT["servers"]
POLICY = OutboundPolicy.build("127.0.0.0/8", max_bytes=4 * 1024 * 1024, timeout_s=5)
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
RUNNERS = {"npx", "bunx", "uvx", "pipx", "pnpm", "yarn", "docker", "podman", "dnx"}


def meta(item: dict[str, Any]) -> dict[str, Any]:
    return dict(item.get("_meta", {}).get(OFFICIAL_META, {}))


class HonouringRegistry(Registry):
    """Answers `version=latest` with the latest version of each server only."""

    def page(self, query: dict[str, str]) -> dict[str, Any]:
        if query.get("version") != "latest":
            return super().page(query)
        everything = self.items
        self.items = [i for i in everything if meta(i).get("isLatest") is not False]
        try:
            return super().page(query)
        finally:
            self.items = everything


def every_version() -> list[dict[str, Any]]:
    """The excerpt as a registry that ignores `version=latest` returns it: every server also in an older
    version listed first; a server whose listed version is not the latest also in a newer one, with no
    `isLatest` anywhere for it, so the semantic version order has to decide."""
    out: list[dict[str, Any]] = []
    for item in ITEMS:
        older = copy.deepcopy(item)
        older["server"]["version"] = "0.0.0-old"  # below every real version
        older["server"]["description"] = "an old version"
        older["_meta"][OFFICIAL_META]["isLatest"] = False
        out.append(older)
        if meta(item).get("isLatest") is False:
            newer = copy.deepcopy(item)
            newer["server"]["version"] = bump(item["server"]["version"])
            out += [item, newer]
        else:
            out.append(item)
    return out


def bump(version: str) -> str:
    major, minor, patch = (int(p) for p in version.split("-")[0].split(".")[:3])
    return f"{major}.{minor}.{patch + 1}"


def expected_version(name: str, items: list[dict[str, Any]]) -> str:
    versions = [i for i in items if i["server"]["name"] == name]
    latest = [i for i in versions if meta(i).get("isLatest") is True]
    if latest:
        return str(latest[0]["server"]["version"])
    return str(max((i["server"]["version"] for i in versions), key=semver_key))


def fetched(served: Registry) -> FetchResult:
    with CatalogServer() as srv:
        srv.registry(served)
        return fetch_catalog(srv.base, "official_registry", policy=POLICY, page_limit=7)


@pytest.fixture(scope="module", params=["honours-latest", "every-version"])
def mode(request: Any) -> tuple[str, list[dict[str, Any]], FetchResult]:
    items = list(ITEMS) if request.param == "honours-latest" else every_version()
    registry = HonouringRegistry(items) if request.param == "honours-latest" else Registry(items)
    return request.param, items, fetched(registry)


def chosen_package(item: dict[str, Any], install: dict[str, Any]) -> dict[str, Any] | None:
    """The package whose identifier the mapped command line runs."""
    for pkg in item["server"].get("packages") or []:
        ident = pkg["identifier"]
        if any(a == ident or a.startswith((ident + "@", ident + "==", ident + ":")) for a in install["args"]):
            return dict(pkg)
    return None


def source_items(result: FetchResult, items: list[dict[str, Any]]) -> list[tuple[Any, dict[str, Any]]]:
    by_key = {(i["server"]["name"], i["server"]["version"]): i for i in items}
    return [(e, by_key[(e.name, e.version)]) for e in result.entries]


# --- the listing --------------------------------------------------------------------------------------

def test_one_entry_per_server_in_its_latest_version(mode: Any) -> None:
    name, items, result = mode
    names = Counter(e.name for e in result.entries)
    assert all(n == 1 for n in names.values())
    unmapped = {e.name for e in result.errors if not e.reason.startswith("mapped;")}
    servers = {i["server"]["name"] for i in ITEMS}
    if name == "honours-latest":
        servers = {i["server"]["name"] for i in ITEMS if meta(i).get("isLatest") is not False}
    assert set(names) | unmapped == servers
    for entry in result.entries:
        assert entry.version == expected_version(entry.name, items), entry.name
        assert entry.description != "an old version"
    assert not [e for e in result.errors if "duplicate" in e.reason]


def test_the_whole_excerpt_maps_except_http_listeners(mode: Any) -> None:
    _, _, result = mode
    for error in result.errors:
        if not error.reason.startswith("mapped;"):
            # a server that publishes nothing installable is the only other reason
            assert "runs its own HTTP listener" in error.reason or error.reason.startswith(
                "no packages or remotes"), (error.name, error.reason)
    assert len(result.entries) >= 25


# --- packages -----------------------------------------------------------------------------------------

def test_optional_arguments_without_value_are_left_out(mode: Any) -> None:
    _, items, result = mode
    checked = 0
    for entry, item in source_items(result, items):
        if entry.kind != "LOCAL":
            continue
        pkg = chosen_package(item, entry.install)
        assert pkg is not None, entry.name
        for arg in pkg.get("packageArguments") or []:
            if arg.get("type") == "named" and not (arg.get("value") or arg.get("default") or arg.get("isRequired")):
                assert arg["name"] not in entry.install["args"], (entry.name, arg["name"])
                checked += 1
    assert checked >= 20  # mongodb, couchbase, snowflake, motherduck... all hold such arguments


def test_runner_line_and_package_reference_appear_once(mode: Any) -> None:
    _, items, result = mode
    for entry, item in source_items(result, items):
        if entry.kind != "LOCAL":
            continue
        args = entry.install["args"]
        assert entry.install["command"] in RUNNERS, entry.name
        pkg = chosen_package(item, entry.install)
        assert pkg is not None
        refs = [a for a in args if a == pkg["identifier"] or a.startswith(pkg["identifier"] + (
            "@" if pkg["registryType"] == "npm" else "==" if pkg["registryType"] == "pypi" else ":"))]
        assert len(refs) == 1, (entry.name, args)
        if entry.install["command"] == "docker":
            assert args[0] == "run" and args.count("run") == 1, args
            assert args.count("-i") == 1 and args.count("--rm") == 1, args
            image_at = args.index(refs[0])
            for var in entry.required_env:
                if not var.template_only:
                    assert var.name in args[:image_at], (entry.name, var.name)  # -e NAME before the image


def test_runtime_hint_picks_the_runner(mode: Any) -> None:
    _, items, result = mode
    expected = {"npx": "npx", "node": "npx", "bun": "bunx", "uvx": "uvx", "python": "uvx", "docker": "docker",
                "dnx": "dnx"}
    seen = set()
    for entry, item in source_items(result, items):
        pkg = chosen_package(item, entry.install) if entry.kind == "LOCAL" else None
        if pkg and pkg.get("runtimeHint"):
            assert entry.install["command"] == expected[pkg["runtimeHint"]], entry.name
            seen.add(pkg["runtimeHint"])
    assert {"docker", "uvx"} <= seen


def test_http_listener_packages_are_refused_with_the_reason(mode: Any) -> None:
    _, _, result = mode
    for entry in result.entries:
        if entry.kind == "REMOTE":
            host = re.sub(r"^https?://", "", entry.install["url"]).split("/")[0].split(":")[0]
            assert host not in ("localhost", "127.0.0.1", "0.0.0.0", "{host}"), entry.name
    refused = {e.name for e in result.errors if "runs its own HTTP listener" in e.reason}
    only_http = {i["server"]["name"] for i in ITEMS
                 if not i["server"].get("remotes") and i["server"].get("packages")
                 and all(p.get("transport", {}).get("type") != "stdio" for p in i["server"]["packages"])}
    names = {e.name for e in result.entries}
    assert only_http - names <= refused and only_http & names == set()
    assert only_http  # the excerpt has such packages (npm, pypi and oci ones)


def test_blank_variable_names_are_skipped_and_reported(mode: Any) -> None:
    _, items, result = mode
    blank = {i["server"]["name"] for i in items for p in i["server"].get("packages") or []
             if any(not (v.get("name") or "").strip() for v in p.get("environmentVariables") or [])}
    assert blank
    mapped = {e.name: e for e in result.entries}
    reported = {e.name for e in result.errors if "has no name: skipped" in e.reason}
    for name in blank:
        assert name in mapped and name in reported
        assert all(v.name for v in mapped[name].required_env)


# --- loading: argument variables stay out of env; batch names are unique --------------------------------

@pytest.mark.django_db
def test_argument_variables_never_reach_env_and_no_placeholder_is_left(tenant: Any) -> None:
    source = MarketSource.objects.create(tenant=tenant, name="registry", url="http://127.0.0.1:9/")
    result = fetched(HonouringRegistry(list(ITEMS)))
    services.source_apply_catalog(source_id=source.pk, fetched=result)
    templated = 0
    for row in MarketEntry.objects.filter(source=source, kind="LOCAL"):
        values = {v["name"]: f"value-of-{v['name']}" for v in row.required_env}
        try:
            config = services.build_config(row, env=values, headers={})
        except MissingVariables as exc:  # pragma: no cover - every declared one was given
            raise AssertionError(row.name) from exc
        env_names = {v["name"] for v in row.required_env if not v.get("template_only")}
        arg_names = {v["name"] for v in row.required_env if v.get("template_only")}
        templated += len(arg_names)
        assert set(config["env"]) <= env_names | set(row.install.get("env") or {}), row.name
        assert not arg_names & (set(config["env"]) - env_names), row.name
        assert not [a for a in config["args"] if PLACEHOLDER.search(a)], (row.name, config["args"])
    assert templated >= 1  # e.g. snowflake's required --service-config-file


@pytest.mark.django_db
def test_batch_load_of_the_whole_excerpt_never_fails_on_names(api: Any, tenant: Any) -> None:
    source = MarketSource.objects.create(tenant=tenant, name="registry", url="http://127.0.0.1:9/")
    services.source_apply_catalog(source_id=source.pk, fetched=fetched(Registry(every_version())))
    ids = list(MarketEntry.objects.filter(source=source).values_list("pk", flat=True))
    resp = api.post("/api/v1/market/entries/batch-load/", {"ids": ids}, format="json")
    assert resp.status_code == 200, resp.content
    results = resp.json()["results"]
    assert not [r for r in results if not r["ok"] and r["error"]["code"] == "name_taken"]
    names = [r["name"] for r in results if r["ok"]]
    assert len(names) == len(set(names)) >= 5
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", n) for n in names)


# --- the 2025-05 seed format ---------------------------------------------------------------------------

def to_seed(value: Any, *, names: bool = False) -> Any:
    """A v0.1 record in the 2025-05 seed spelling (snake_case; registry_name, package_name, version_detail)."""
    if isinstance(value, list):
        return [to_seed(v) for v in value]
    if not isinstance(value, dict):
        return value
    renames = {"registryType": "registry_name", "identifier": "package_name", "type": "type"}
    out = {}
    for key, item in value.items():
        snake = key if names else renames.get(key) or re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()
        out[snake] = to_seed(item, names=key == "variables")
    return out


def test_the_seed_format_maps_like_v0_1() -> None:
    seed = []
    for item in ITEMS:
        server = to_seed(item["server"])
        for remote in server.get("remotes") or []:
            remote["transport_type"] = remote.pop("type")
        server["version_detail"] = {"version": server.pop("version"), "is_latest": meta(item).get("isLatest")}
        seed.append(server)
    from_seed = parse_document(seed)
    from_v01 = parse_document({"servers": ITEMS})
    assert from_seed.format == "official_registry"
    assert [(e.name, e.kind, e.install, e.required_env, e.required_headers) for e in from_seed.entries] == [
        (e.name, e.kind, e.install, e.required_env, e.required_headers) for e in from_v01.entries]
    assert len(from_seed.entries) >= 30
