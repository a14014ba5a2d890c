"""The production topology (deploy/prod_local.py): two gunicorn web processes, a worker and beat on PG + Redis.

A change made through one web process holds for the next call through the other. Runs where PostgreSQL and
Redis are up and TOOLHUB_TEST_PROD_LOCAL=1 (CI's second pass sets it).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import loopback
from tests.fixtures.echo_http import echo_server
from tests.waiting import scaled, wait_until

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.prod_topology, pytest.mark.skipif(
    not os.environ.get("TOOLHUB_TEST_PROD_LOCAL"), reason="needs PostgreSQL + Redis; set TOOLHUB_TEST_PROD_LOCAL=1"
)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Api:
    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": f"Token {self.token}", "X-Tenant": "prod", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=scaled(30)) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")


@pytest.fixture(scope="module")
def topology() -> Iterator[tuple[Api, Api, str]]:
    a, b = _free_port(), _free_port()
    env = {**os.environ, "TOOLHUB_PROD_LOCAL_REDIS_DB": "9",
           "TOOLHUB_PROD_LOCAL_DB": os.environ.get("TOOLHUB_PROD_LOCAL_DB", "toolhub_prod_local_test"),
           # The hostile probe server and the interpreter the tests name as command are mounted for the sandbox
           # (the demo server is mounted by prod_local).
           "TOOLHUB_LOCAL_SANDBOX_RO_PATHS": f"{REPO / 'tests' / 'fixtures' / 'mcp_servers'}:{sys.prefix}"}
    proc = subprocess.Popen([sys.executable, "deploy/prod_local.py", "--fresh", "--ports", f"{a},{b}"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    token = ""
    assert proc.stdout is not None
    for line in proc.stdout:
        if "Authorization: Token" in line:
            token = line.split("Token", 1)[1].split()[0]
            break
    if not token:
        proc.kill()
        pytest.fail(f"prod_local did not start: {proc.stderr.read() if proc.stderr else ''}")
    try:
        yield Api(f"http://127.0.0.1:{a}", token), Api(f"http://127.0.0.1:{b}", token), f"http://127.0.0.1:{a}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)


def test_config_change_and_disable_through_a_hold_for_the_next_call_through_b(topology: Any) -> None:
    api_a, api_b, _ = topology
    with echo_server() as upstream:
        name = f"coherence-{os.getpid()}"
        status, tool = api_a("POST", "/api/v1/tools/", {"name": name, "type": "HTTP", "config": {
            "method": "GET", "url": upstream + "/v1/${input.x}",
            "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}})
        assert status == 201, tool
        call = {"function": "call", "arguments": {"x": "one"}}
        status, body = api_b("POST", f"/api/v1/tools/{tool['id']}/invoke/", call)
        assert status == 200 and body["data"]["path"] == "/v1/one", body

        status, _ = api_a("PATCH", f"/api/v1/tools/{tool['id']}/", {"config": {
            "method": "GET", "url": upstream + "/v2/${input.x}",
            "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}})
        assert status == 200
        status, body = api_b("POST", f"/api/v1/tools/{tool['id']}/invoke/", call)
        assert status == 200 and body["data"]["path"] == "/v2/one", body

        status, _ = api_a("PUT", f"/api/v1/tools/{tool['id']}/status/", {"status": "DISABLED"})
        assert status == 200
        status, body = api_b("POST", f"/api/v1/tools/{tool['id']}/invoke/", call)
        assert status == 200 and not body["success"] and body["error_code"] == "DISABLED", body

        status, _ = api_a("DELETE", f"/api/v1/tools/{tool['id']}/")
        assert status == 204
        status, body = api_b("GET", f"/api/v1/tools/{tool['id']}/")
        assert status == 404


def test_metrics_sum_the_calls_of_both_web_processes(topology: Any) -> None:
    api_a, api_b, base_a = topology
    status, page = api_a("GET", "/api/v1/tools/?page_size=100")
    assert status == 200
    listing = next(t for t in page["results"] if t["name"] == "list_directory")

    def ok_calls() -> float:
        with urllib.request.urlopen(base_a + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("toolhub_tool_calls_total{") and 'tool="list_directory"' in line
                   and 'status="ok"' in line)

    before = ok_calls()
    for api in (api_a, api_b, api_b):
        status, body = api("POST", f"/api/v1/tools/{listing['id']}/invoke/",
                           {"function": "list_directory", "arguments": {"path": "."}})
        assert status == 200 and body["success"], body
    assert ok_calls() == before + 3


def _servers_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if f"TOOLHUB_TEST_MARKER={marker}".encode() in Path(f"/proc/{entry}/environ").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def test_disabling_through_a_ends_the_server_b_started(topology: Any) -> None:
    import uuid

    api_a, api_b, _ = topology
    marker = uuid.uuid4().hex
    server = REPO / "toolhub_demo" / "inventory_server.py"
    status, tool = api_a("POST", "/api/v1/tools/", {"name": f"pooled-{marker[:8]}", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(server)], "env": {"TOOLHUB_TEST_MARKER": marker},
        "startup_timeout_s": 60}})
    assert status == 201, tool
    status, refreshed = api_a("POST", f"/api/v1/tools/{tool['id']}/refresh/")
    assert status == 200 and refreshed["ok"], refreshed
    status, body = api_b("POST", f"/api/v1/tools/{tool['id']}/invoke/",
                         {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}})
    assert status == 200 and body["success"], body
    assert _servers_with(marker), "process B keeps a warm server for the tool"

    status, _ = api_a("PUT", f"/api/v1/tools/{tool['id']}/status/", {"status": "DISABLED"})
    assert status == 200
    wait_until(lambda: not _servers_with(marker), every_s=0.2)  # the broadcast reaches B
    assert _servers_with(marker) == [], "B's pooled server outlived the disable made through A"


def test_a_tenants_local_server_sees_nothing_of_the_production_deployment(topology: Any) -> None:
    """The attack of the trust pass, in production settings: a LOCAL script reading /proc/$PPID/environ (the database
    URL, the Fernet keys), the state folder and PostgreSQL on loopback (trust auth) gets none of them."""
    api_a, _, _ = topology
    probe = REPO / "tests" / "fixtures" / "mcp_servers" / "escape_probe.py"
    status, tool = api_a("POST", "/api/v1/tools/", {"name": "escape-probe", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(probe)], "startup_timeout_s": 60}})
    assert status == 201, tool
    status, refreshed = api_a("POST", f"/api/v1/tools/{tool['id']}/refresh/")
    assert status == 200 and refreshed["ok"], refreshed

    def run(function: str, **arguments: Any) -> Any:
        status, body = api_a("POST", f"/api/v1/tools/{tool['id']}/invoke/", {"function": function,
                                                                            "arguments": arguments})
        assert status == 200 and body["success"], body
        return body["data"] if body["data"] is not None else json.loads(body["text"])

    environs = json.dumps(run("environs"))
    assert "TOOLHUB_SECRET_KEYS" not in environs and "DATABASE_URL" not in environs and "postgres://" not in environs
    state = REPO / "var" / "prod-local"  # keys, Prometheus files; the workspaces live below it here
    listed = run("listdir", path=str(state))
    assert listed["ok"] is False or listed["value"] == ["workspace"], listed
    assert run("read", path=str(state / "fernet-keys"))["ok"] is False
    assert run("read", path=str(REPO / "config" / "settings" / "production.py"))["ok"] is False
    assert run("connect", host="127.0.0.1", port=5432)["ok"] is False
    assert run("connect", host="127.0.0.1", port=6379)["ok"] is False


def test_a_stateful_local_server_has_one_state_across_both_web_processes(topology: Any) -> None:
    """In production a LOCAL server lives on its runner: twelve calls spread over both web processes reach one
    process with one state (before runners: 1, 1, 1, 1, 2, 2, 3, ... from four processes)."""
    import uuid

    api_a, api_b, _ = topology
    marker = uuid.uuid4().hex
    counter = REPO / "tests" / "fixtures" / "mcp_servers" / "counter.py"
    status, tool = api_a("POST", "/api/v1/tools/", {"name": f"counter-{marker[:8]}", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(counter)], "env": {"TOOLHUB_TEST_MARKER": marker},
        "startup_timeout_s": 60}})
    assert status == 201, tool
    status, refreshed = api_a("POST", f"/api/v1/tools/{tool['id']}/refresh/")
    assert status == 200 and refreshed["ok"], refreshed
    counts = []
    for index in range(12):
        status, body = (api_a, api_b)[index % 2]("POST", f"/api/v1/tools/{tool['id']}/invoke/",
                                                  {"function": "count", "arguments": {}})
        assert status == 200 and body["success"], body
        counts.append(body["data"]["count"])
    assert counts == list(range(1, 13)), counts
    servers = [pid for pid in _servers_with(marker) if b"bwrap" not in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(servers) == 1, servers


def _sign_in_and_connect(base: str, authorize_url: str, username: str, password: str) -> str:
    """A browser: sign in to Toolhub (web A), open the connect link, consent at the provider, come back.

    Production cookies are Secure (a deployment is behind TLS): this browser keeps Toolhub's cookies itself and
    sends them to Toolhub over the loopback's plain HTTP, as a browser would over https.
    """
    import re
    from urllib.parse import urljoin

    import httpx2

    jar: dict[str, str] = {}

    def visit(method: str, url: str, **kwargs: Any) -> httpx2.Response:
        ours = url.startswith(base)
        headers = {**kwargs.pop("headers", {}), **({"Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())}
                                                    if ours and jar else {})}
        answer = http.request(method, url, headers=headers, **kwargs)
        if ours:
            for raw in answer.headers.get_list("set-cookie"):
                name, _, rest = raw.partition("=")
                jar[name.strip()] = rest.split(";", 1)[0]
        return answer

    with loopback.client(follow_redirects=False, timeout=scaled(30)) as http:
        form = visit("GET", base + "/accounts/login/")
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert found, form.text[:500]
        signed = visit("POST", base + "/accounts/login/", data={
            "username": username, "password": password, "csrfmiddlewaretoken": found.group(1)},
            headers={"Referer": base + "/accounts/login/"})
        assert signed.status_code == 302, signed.text[:500]
        url = authorize_url
        for _ in range(8):
            answer = visit("GET", url)
            if answer.status_code not in (302, 303, 307, 308):  # 308: the registered callback forwards for good
                return answer.text
            url = urljoin(url, answer.headers["location"])
    raise AssertionError("the connect link never came back to Toolhub")


def test_an_expired_oauth_token_is_refreshed_once_under_calls_racing_in_both_web_processes(topology: Any) -> None:
    """Eight calls, four through each web process, meet an expired access token at once: each refresh presents
    its rotating refresh token once (the provider revokes the whole grant when one is presented twice)."""
    import threading

    from tests.fixtures.mcp_servers import OAUTH_SERVER, expire_access_tokens, http_server

    api_a, api_b, base_a = topology
    password = (REPO / "var" / "prod-local" / "operator-password").read_text().strip()
    with http_server(OAUTH_SERVER, extra_args=("--access-ttl", "60")) as url:
        status, tool = api_a("POST", "/api/v1/tools/", {"name": "oauth-race", "type": "REMOTE", "config": {
            "url": url, "auth": {"type": "oauth2"}}})
        assert status == 201, tool
        status, link = api_a("POST", f"/api/v1/tools/{tool['id']}/oauth/connect/")
        assert status == 200 and link["authorize_url"].startswith(base_a + "/oauth/start/"), link
        page = _sign_in_and_connect(base_a, link["authorize_url"], "operator", password)
        assert "is connected" in page, page[:800]

        def whoami(api: Api) -> dict[str, Any]:
            status, body = api("POST", f"/api/v1/tools/{tool['id']}/invoke/", {"function": "whoami", "arguments": {}})
            assert status == 200, body
            return dict(body)

        assert whoami(api_a)["text"] == "alice" and whoami(api_b)["text"] == "alice"
        # The access token expires (the provider's clock moves past it, nothing waits): both processes meet a 401.
        assert expire_access_tokens(url) >= 1
        results: list[dict[str, Any]] = []
        barrier = threading.Barrier(8)

        def call(api: Api) -> None:
            barrier.wait()
            results.append(whoami(api))

        threads = [threading.Thread(target=call, args=((api_a, api_b)[i % 2],)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(scaled(90))
        assert len(results) == 8 and all(r["success"] and r["text"] == "alice" for r in results), results
        status, stats = api_a("POST", f"/api/v1/tools/{tool['id']}/invoke/", {"function": "stats", "arguments": {}})
        assert status == 200 and stats["success"], stats
        counted = json.loads(stats["text"])
        assert counted["reuse_detected"] == 0 and counted["refreshes"] >= 1, counted


def test_the_deployments_redis_answers_only_with_its_password(topology: Any) -> None:
    """Redis decides where LOCAL calls go: prod_local's own Redis refuses whoever does not give its password."""
    import redis

    conf = (REPO / "var" / "prod-local" / "redis.conf").read_text()
    port = int(next(line.split()[1] for line in conf.splitlines() if line.startswith("port ")))
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=5).set("toolhub:runner:forged", "x")
    password = (REPO / "var" / "prod-local" / "redis-password").read_text().strip()
    assert redis.Redis(host="127.0.0.1", port=port, password=password, socket_connect_timeout=5).ping()
