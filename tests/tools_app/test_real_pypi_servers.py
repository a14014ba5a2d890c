"""The real PyPI servers (mcp-server-time, -fetch, -git; pinned in tests/fixtures/real_servers/requirements.txt)
through the API: Test, Refresh, invoke, MCP annotations to per-function safety, approval of a destructive one.

mcp-server-fetch only ever reaches a page this test serves on 127.0.0.1.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import real_servers as rs
from tests.tools_app.discovered import Discovered
from tools_app.models import ToolCall
from tools_app.wiring.pool import pool
from tools_app.wiring.workspaces import workspace_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_servers]


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    yield
    pool().close_all()


def py_server(name: str) -> str:
    """The installed console script of a PyPI server; the test skips, saying why, when it is absent."""
    rs.require("py")
    path = Path(rs.py_bin(name))
    if not path.exists():
        pytest.skip(f"{name} is not installed in {path.parent} (run `make test-servers`)")
    return str(path)


def make(api: Any, name: str, config: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Create the tool, press Test (a real initialize + tools/list) and Refresh; returns (id, Test body)."""
    resp = api.post("/api/v1/tools/", {"name": name, "type": "LOCAL", "config": {"startup_timeout_s": 30, **config}},
                    format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    discovered = Discovered()  # the Refresh lists what the Test found (one server start, not two)
    with discovered.probes():
        tested = api.post(f"/api/v1/tools/{tool_id}/test/").json()
    assert tested["ok"], tested
    discovered.refresh(api, tool_id)
    return tool_id, tested


def invoke(api: Any, tool_id: int, function: str, arguments: dict[str, Any]) -> dict[str, Any]:
    resp = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": function, "arguments": arguments}, format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def functions_of(api: Any, tool_id: int) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in api.get(f"/api/v1/tools/{tool_id}/").json()["functions"]}


def test_time_server(api: Any) -> None:
    tool_id, tested = make(api, "time", {"command": py_server("mcp-server-time"),
                                         "args": ["--local-timezone", "UTC"]})
    assert tested["server"]["name"] == "mcp-time" and tested["tool_count"] == 2
    assert {f["name"] for f in tested["functions"]} == {"get_current_time", "convert_time"}
    functions = functions_of(api, tool_id)
    assert {f["safety"] for f in functions.values()} == {"READ_ONLY"}
    assert functions["convert_time"]["annotations"]["readOnlyHint"] is True

    body = invoke(api, tool_id, "convert_time",
                  {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
    assert body["success"], body
    assert '"datetime"' in body["text"] and "T21:00:00+09:00" in body["text"], body["text"]
    bad = invoke(api, tool_id, "get_current_time", {"timezone": "Mars/Olympus"})
    assert not bad["success"] and bad["error_code"] == "BUSINESS_ERROR" and "Mars/Olympus" in bad["error"]
    extra = invoke(api, tool_id, "get_current_time", {"timezone": "UTC", "zone": "x"})
    assert extra["error_code"] == "INVALID_PARAMS" and "timezone" in extra["error"]


@pytest.fixture
def page() -> Iterator[str]:
    """A page (and a 404 robots.txt) on 127.0.0.1: the only place the fetch server is sent."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/notes.html":
                self.send_response(404)
                self.end_headers()
                return
            body = (b"<html><head><title>Notes</title></head><body><h1>Toolhub fetch check</h1>"
                    b"<p>The <b>answer</b> is 42.</p></body></html>")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/notes.html"
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_server_reads_a_local_page(api: Any, page: str, tenant: Any) -> None:
    # The server refuses loopback addresses unless told otherwise; the page is on 127.0.0.1 by design. Its sandbox
    # has no network unless the tenant's policy (an operator's setting) grants the host's.
    tenant.local_network = "host"
    tenant.save(update_fields=["local_network"])
    tool_id, tested = make(api, "fetch", {"command": py_server("mcp-server-fetch"), "args": ["--allow-private-ips"]})
    assert tested["server"]["name"] == "mcp-fetch" and [f["name"] for f in tested["functions"]] == ["fetch"]
    fetch = functions_of(api, tool_id)["fetch"]
    assert fetch["safety"] == "READ_ONLY" and fetch["annotations"]["openWorldHint"] is True

    body = invoke(api, tool_id, "fetch", {"url": page, "raw": True})
    assert body["success"], body
    assert "The <b>answer</b> is 42." in body["text"]
    markdown = invoke(api, tool_id, "fetch", {"url": page})
    assert markdown["success"] and "answer" in markdown["text"] and "42" in markdown["text"], markdown
    missing = invoke(api, tool_id, "fetch", {"url": page.replace("notes", "gone")})
    assert not missing["success"] and "404" in (missing["error"] or ""), missing
    row = ToolCall.objects.get(pk=body["call_id"])
    assert row.status == "ok" and "answer" in row.result_excerpt


@pytest.fixture
def repo(tenant: Any) -> Path:
    """A git repository inside the tenant workspace (the root the server is offered), with one commit."""
    path = workspace_for(tenant) / "repo"
    path.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.test"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README.md").write_text("first\n")
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first commit"], check=True)
    return path


def test_git_server_annotations_become_safety_and_reset_needs_approval(api: Any, repo: Path) -> None:
    tool_id, tested = make(api, "git", {"command": py_server("mcp-server-git"), "args": ["--repository", str(repo)],
                                        "env": {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.test",
                                                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.test"}})
    assert tested["server"]["name"] == "mcp-git" and tested["tool_count"] >= 10
    functions = functions_of(api, tool_id)
    assert functions["git_status"]["safety"] == "READ_ONLY" and functions["git_log"]["safety"] == "READ_ONLY"
    assert functions["git_commit"]["safety"] == "WRITE" and functions["git_add"]["safety"] == "WRITE"
    assert functions["git_reset"]["safety"] == "DESTRUCTIVE"

    log = invoke(api, tool_id, "git_log", {"repo_path": str(repo)})
    assert log["success"] and "first commit" in log["text"], log
    (repo / "README.md").write_text("second\n")
    assert invoke(api, tool_id, "git_add", {"repo_path": str(repo), "files": ["README.md"]})["success"]
    status = invoke(api, tool_id, "git_status", {"repo_path": str(repo)})
    assert "README.md" in status["text"], status

    held = invoke(api, tool_id, "git_reset", {"repo_path": str(repo)})
    assert held["error_code"] == "APPROVAL_REQUIRED" and "DESTRUCTIVE" in held["error"], held
    staged = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--name-only"], capture_output=True,
                            text=True, check=True).stdout
    assert staged.strip() == "README.md"  # nothing ran while held
    approved = api.post(f"/api/v1/approvals/{held['approval_id']}/approve/").json()
    assert approved["success"], approved
    staged = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--name-only"], capture_output=True,
                            text=True, check=True).stdout
    assert staged.strip() == ""
