"""The issue's Done-when with the real registries (issue 41): server-everything, -memory and -filesystem (npm) and
mcp-server-time and mcp-server-fetch (PyPI), each added as its README says, pass Test in the default sandbox (no
network) and answer a call; mcp-server-fetch's node helper runs from the read-only store. Loaded in one click from an
official-registry record: test_reference_registry.py; other package runners: test_reference_runners.py; the install
itself (a first Test into an empty store): test_reference_install_npm.py and test_reference_install_pypi.py (one set
split over five modules so a parallel run can spread it; what they share is in reference_api.py). How long the first and later Tests take is measured by bench/packages.py,
not asserted here.

The packages are installed once per machine into the test package store (var/test-packages: `make test-servers`,
or a module's first test, runs the product's `toolhub_packages install`), so these tests run their servers from it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.tools_app.discovered import Discovered
from tests.tools_app.packages.reference import BY_KEY, REFERENCE, fill
from tests.tools_app.packages.reference_api import (
    MARKS,
    _close_pool,
    _prepared,
    _store,
    create,
    package_path,
    passes_test_and_answers,
    reachable,
)
from tools_app.wiring.workspaces import workspace_for

pytestmark = MARKS
__all__ = ["_close_pool", "_prepared", "_store"]  # the fixtures, used by name


@pytest.mark.parametrize("key", [r.key for r in REFERENCE])
def test_added_as_its_readme_says_it_installs_passes_test_and_answers(api: Any, tenant: Any, key: str) -> None:
    ref = BY_KEY[key]
    reachable(ref)
    workspace = workspace_for(tenant)
    tool_id = create(api, key, [fill(a, workspace) for a in ref.readme])
    passes_test_and_answers(api, tool_id, ref, workspace)


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
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
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
    discovered = Discovered()  # the refresh below lists what this Test found (one server start, not two)
    with discovered.probes():
        assert api.post(f"/api/v1/tools/{tool_id}/test/").json()["ok"]
    root = Path(package_path(tool_id))
    helper = next(root.glob("lib/python*/site-packages/readabilipy/javascript"))
    assert (helper / "node_modules" / "@mozilla" / "readability").is_dir()
    assert json.loads((root / ".toolhub-package.json").read_text())["node_helpers"]["readabilipy/javascript"]
    lock = json.loads((helper / "package-lock.json").read_text())
    assert all(meta.get("integrity") for path, meta in lock["packages"].items() if path and not meta.get("link"))
    assert not (helper.stat().st_mode & 0o222)  # read-only like the rest of the install

    discovered.refresh(api, tool_id)
    body = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "fetch", "arguments": {"url": page}},
                    format="json").json()
    assert body["success"] and "read-only to every tenant" in body["text"], body
    assert "SIDEBARJUNK" not in body["text"] and "FOOTERJUNK" not in body["text"], body["text"]
