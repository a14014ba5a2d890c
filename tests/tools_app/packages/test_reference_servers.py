"""The issue's Done-when with the real registries (issue 41): server-everything, -memory and -filesystem (npm) and
mcp-server-time and mcp-server-fetch (PyPI), each added as its README says and each loaded in one click from an
official-registry record, pass Test in the default sandbox (no network) and answer a call. How long the first and
later Tests take is measured by bench/packages.py, not asserted here.

The packages are installed once per machine into the test package store (var/test-packages: `make test-servers`,
or this module's first test, runs the product's `toolhub_packages install`), so these tests run their servers from
it; the install itself (a first Test installing into an empty store, npm and PyPI) is the subject of one test here,
with a store of its own."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from market_app import services as market
from market_app.models import MarketEntry, MarketSource
from tests.fixtures import real_servers as rs
from tests.fixtures.catalog_server import Registry
from tests.market_app.test_package_entries import record
from tests.market_app.test_registry_excerpt import fetched
from tests.tools_app.packages.reference import BY_KEY, REFERENCE, Reference, answers, fill, prepare_store
from tests.waiting import scaled
from tools_app.models import Tool
from tools_app.runtime.mcp.spec import LocalSpec
from tools_app.runtime.packages import store
from tools_app.wiring.pool import pool
from tools_app.wiring.specs import server_spec
from tools_app.wiring.workspaces import workspace_for

# A first install downloads a package and its dependencies from the real registries: minutes on a slow link (the
# suite's 120 s per test is for work that does not wait on the internet).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_servers, pytest.mark.timeout(scaled(600))]


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    yield
    pool().close_all()


@pytest.fixture(scope="module")
def _prepared() -> tuple[bool, str]:
    return prepare_store()  # a no-op once `make test-servers` (or an earlier run) prepared the store


@pytest.fixture(autouse=True)
def _store(_prepared: tuple[bool, str]) -> None:
    ok, why = _prepared
    if not ok:
        pytest.skip(why)


def reachable(ref: Reference) -> None:
    rs.require("npm" if ref.manager == "npm" else "py")


def create(api: Any, name: str, argv: list[str]) -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": "LOCAL",
                                       "config": {"command": argv[0], "args": argv[1:], "startup_timeout_s": 30}},
                    format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def passes_test_and_answers(api: Any, tool_id: int, ref: Reference, workspace: Path) -> dict[str, Any]:
    tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert tested["ok"] and tested["tool_count"] > 0, tested
    package = api.get(f"/api/v1/tools/{tool_id}/").json()["package"]
    assert (package["manager"], package["name"], package["status"]) == (ref.manager, ref.package, "installed"), \
        package
    spec = server_spec(Tool.objects.get(pk=tool_id))
    assert isinstance(spec.target, LocalSpec) and spec.target.sandbox is not None
    assert not spec.target.sandbox.share_net and not spec.target.sandbox.public_net  # the default: no network
    assert spec.target.sandbox.policy.store_paths == (package_path(tool_id),)

    def invoke(function: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": function, "arguments": arguments},
                        format="json").json()

    api.post(f"/api/v1/tools/{tool_id}/refresh/")
    answers(ref, invoke, workspace)
    return package


def package_path(tool_id: int) -> str:
    from tools_app.packages.models import ToolPackage

    link = ToolPackage.objects.select_related("current").get(tool_id=tool_id)
    assert link.current is not None
    return str(Path(link.current.path).resolve())


@pytest.mark.parametrize("key", [r.key for r in REFERENCE])
def test_added_as_its_readme_says_it_installs_passes_test_and_answers(api: Any, tenant: Any, key: str) -> None:
    ref = BY_KEY[key]
    reachable(ref)
    workspace = workspace_for(tenant)
    tool_id = create(api, key, [fill(a, workspace) for a in ref.readme])
    passes_test_and_answers(api, tool_id, ref, workspace)


@pytest.mark.parametrize("key", ["memory", "time"])
def test_the_first_test_installs_the_package_into_an_empty_store(api: Any, tenant: Any, settings: Any,
                                                                 tmp_path: Path, key: str) -> None:
    """The install itself, once per package manager (npm's lockfile, PyPI's hash-pinned venv): into a store nothing
    was installed in, by the tool's first Test, read-only; the server then runs from it and answers."""
    ref = BY_KEY[key]
    reachable(ref)
    empty = tmp_path / "store"
    settings.TOOLHUB_PACKAGE_STORE = str(empty)
    workspace = workspace_for(tenant)
    tool_id = create(api, key, [fill(a, workspace) for a in ref.readme])
    assert not empty.exists() or not any(empty.iterdir())
    package = passes_test_and_answers(api, tool_id, ref, workspace)
    installed = store.installed(empty, ref.manager, ref.package, package["version"])
    assert installed is not None and package_path(tool_id) == str(Path(installed.path).resolve())
    assert package["size"] == installed.size > 0 and package["installed_at"]
    assert not (Path(installed.path).stat().st_mode & 0o222)  # read-only, like every install in the store


@pytest.mark.parametrize("key", [r.key for r in REFERENCE])
def test_loaded_in_one_click_from_the_official_registry_it_passes_test_and_answers(api: Any, tenant: Any,
                                                                                  key: str) -> None:
    ref = BY_KEY[key]
    reachable(ref)
    workspace = workspace_for(tenant)
    item = record(f"io.github.modelcontextprotocol/{ref.package.rsplit('/', 1)[-1]}", ref.manager, ref.package,
                  ref.version)
    if ref.package_arguments:
        item["server"]["packages"][0]["packageArguments"] = list(ref.package_arguments)
    source = MarketSource.objects.create(tenant=tenant, name="official", url="http://127.0.0.1:9/")
    market.source_apply_catalog(source_id=source.pk, fetched=fetched(Registry([item])))
    entry = MarketEntry.objects.get(source=source)
    assert entry.install["command"] == ("npx" if ref.manager == "npm" else "uvx")
    body = {"env": {name: fill(value, workspace) for name, value in ref.load_env}} if ref.load_env else {}
    loaded = api.post(f"/api/v1/market/entries/{entry.pk}/load/", body, format="json")
    assert loaded.status_code in (200, 201), loaded.content
    tool_id = loaded.json()["tool"]["id"]
    package = passes_test_and_answers(api, tool_id, ref, workspace)
    assert package["version"] == ref.version and package["requested"] in (ref.version, f"=={ref.version}"), package


# --- mcp-server-fetch: its node helper (Readability.js) is installed with it, and runs from the read-only store ---

PAGE = ("<html><head><title>Toolhub page</title></head><body><div class='sidebar'>SIDEBARJUNK links</div><article>"
        "<h1>Toolhub page</h1><p>" + "The store is read-only to every tenant and one install serves them all. " * 8
        + "</p><p>" + "Readability keeps the article and drops what surrounds it. " * 8 + "</p></article>"
        "<div class='footer'>FOOTERJUNK copyright</div></body></html>").encode()


@pytest.fixture
def page() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/article.html":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/article.html"
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_extracts_with_its_node_helper_from_the_read_only_store(api: Any, tenant: Any, page: str) -> None:
    """readabilipy (mcp-server-fetch's HTML extractor) would `npm install` Readability.js into its own folder on first
    use: in the store that folder is read-only and the sandbox has no network. The helper is installed with the
    package instead, under the npm rules; the server's extraction then runs it from the store. Readability.js drops a
    page's sidebar and footer, readabilipy's pure-Python fallback keeps them: which one ran shows in the answer."""
    reachable(BY_KEY["fetch"])
    tenant.local_network = "host"  # an operator grants the host's network, so the loopback page is reachable
    tenant.save(update_fields=["local_network"])
    tool_id = create(api, "fetch", ["uvx", "mcp-server-fetch", "--allow-private-ips"])
    assert api.post(f"/api/v1/tools/{tool_id}/test/").json()["ok"]
    root = Path(package_path(tool_id))
    helper = next(root.glob("lib/python*/site-packages/readabilipy/javascript"))
    assert (helper / "node_modules" / "@mozilla" / "readability").is_dir()
    assert json.loads((root / ".toolhub-package.json").read_text())["node_helpers"]["readabilipy/javascript"]
    lock = json.loads((helper / "package-lock.json").read_text())
    assert all(meta.get("integrity") for path, meta in lock["packages"].items() if path and not meta.get("link"))
    assert not (helper.stat().st_mode & 0o222)  # read-only like the rest of the install

    api.post(f"/api/v1/tools/{tool_id}/refresh/")
    body = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "fetch", "arguments": {"url": page}},
                    format="json").json()
    assert body["success"] and "read-only to every tenant" in body["text"], body
    assert "SIDEBARJUNK" not in body["text"] and "FOOTERJUNK" not in body["text"], body["text"]


@pytest.mark.parametrize(("argv", "key"), [
    (["pipx", "run", "mcp-server-time"], "time"),
    (["npm", "exec", "--yes", "--", "@modelcontextprotocol/server-everything"], "everything"),
    (["bunx", "@modelcontextprotocol/server-everything"], "everything"),
])
def test_other_package_runners_install_the_same_way(api: Any, tenant: Any, argv: list[str], key: str) -> None:
    """`pipx run`, `npm exec` and `bunx` name their package like `uvx` and `npx`: the runner itself never runs (none
    of them need be installed here), the package is installed into the store and run from there."""
    ref = BY_KEY[key]
    reachable(ref)
    tool_id = create(api, f"{key}-{argv[0]}", argv)
    package = passes_test_and_answers(api, tool_id, ref, workspace_for(tenant))
    assert package["status"] == "installed"
    target = server_spec(Tool.objects.get(pk=tool_id)).target
    assert isinstance(target, LocalSpec) and Path(target.command).name not in ("pipx", "npm", "bunx")
