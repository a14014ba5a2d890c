"""The real third-party MCP servers (npm and PyPI, pinned in tests/fixtures/real_servers) through the pool."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from tests.fixtures import real_servers as rs
from tests.tools_app.runtime.mcp.conftest import Specs, pool_maker
from tests.waiting import scaled, wait_until
from tools_app.runtime.mcp import ServerSpec, SessionPool

pytestmark = pytest.mark.real_servers

TRANSPORTS = ["stdio", "streamable_http", "sse"]


@pytest.fixture(scope="module")
def npm_servers() -> None:
    rs.require("npm")


@pytest.fixture(scope="module")
def everything_served(npm_servers: None) -> Iterator[Callable[[str], str]]:
    """The URL of server-everything serving a transport ("streamableHttp" | "sse"), started once for the module:
    the tests of `everything` only call it (each through a pool and session of its own), none stops or breaks it."""
    with ExitStack() as stack:
        urls: dict[str, str] = {}

        def url(served: str) -> str:
            if served not in urls:
                urls[served] = stack.enter_context(rs.everything_http(served))[0]
            return urls[served]

        yield url


@pytest.fixture(scope="module")
def everything_stdio(npm_servers: None) -> Iterator[tuple[SessionPool, ServerSpec]]:
    """server-everything over stdio for the tests of `everything` (a pool of the module's own and the spec): as over
    HTTP (`everything_served`), they only call it, none stops or breaks it, so one process serves them all (a node
    start each was ~0.45 s of CPU); it starts on the first call, and no process outlives the pool at the end."""
    marker = uuid.uuid4().hex
    with pool_maker(marker) as make:
        yield make(idle_ttl_s=300), Specs(marker).local(None, command=rs.node(),
                                                         args=[rs.npm_entry(rs.EVERYTHING), "stdio"],
                                                         startup_timeout_s=scaled(30))


@pytest.fixture
def pool(request: Any, make_pool: Any) -> SessionPool:
    """The test's own pool; for `everything` over stdio, the module's (`everything_stdio`), which keeps its server."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("everything") == "stdio":
        return request.getfixturevalue("everything_stdio")[0]
    return make_pool(idle_ttl_s=300)


@pytest.fixture(params=TRANSPORTS)
def everything(request: Any, npm_servers: None) -> Iterator[ServerSpec]:
    """server-everything as a LOCAL (stdio: the module's one process, `everything_stdio`) or REMOTE (streamable
    HTTP, SSE) tool spec."""
    if request.param == "stdio":
        yield request.getfixturevalue("everything_stdio")[1]
        return
    served = "streamableHttp" if request.param == "streamable_http" else "sse"
    yield Specs.remote(request.getfixturevalue("everything_served")(served), request.param, timeout_s=20)


def test_image_content_is_kept_whole(pool: SessionPool, everything: ServerSpec) -> None:
    result = pool.call(everything, "get-tiny-image", {})
    assert result.success, result.error
    kinds = [block["type"] for block in result.content]
    assert kinds == ["text", "image", "text"]
    image = result.content[1]
    assert image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]).startswith(b"\x89PNG")
    assert "[image: image/png, " in result.text and "bytes]" in result.text
    assert result.as_dict()["content"] == result.content


def test_embedded_resource_keeps_text_and_uri(pool: SessionPool, everything: ServerSpec) -> None:
    result = pool.call(everything, "get-resource-reference", {"resourceType": "Text", "resourceId": 1})
    assert result.success, result.error
    resource = next(b for b in result.content if b["type"] == "resource")["resource"]
    assert resource["uri"].startswith("demo://resource/")
    assert resource["text"]
    assert resource["uri"] in result.text and resource["text"] in result.text


def test_resource_links_keep_name_and_uri(pool: SessionPool, everything: ServerSpec) -> None:
    result = pool.call(everything, "get-resource-links", {"count": 2})
    assert result.success, result.error
    links = [b for b in result.content if b["type"] == "resource_link"]
    assert len(links) == 2
    for link in links:
        assert link["uri"] and link["name"]
        assert link["uri"] in result.text and link["name"] in result.text


def test_structured_content_is_data(pool: SessionPool, everything: ServerSpec) -> None:
    result = pool.call(everything, "get-structured-content", {"location": "New York"})
    assert result.success, result.error
    assert isinstance(result.data, dict) and "temperature" in result.data


def test_progress_notifications_reach_the_caller(pool: SessionPool, everything: ServerSpec) -> None:
    seen: list[tuple[float, float | None]] = []
    result = pool.call(everything, "trigger-long-running-operation", {"duration": 0.3, "steps": 3},
                       on_progress=lambda progress, total, _message: seen.append((progress, total)))
    assert result.success, result.error
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_roots_offered_to_a_local_server(pool: SessionPool, npm_servers: None, specs: Specs,
                                         tmp_path: Any) -> None:
    spec = specs.local(None, command=rs.node(), args=[rs.npm_entry(rs.EVERYTHING), "stdio"],
                       startup_timeout_s=scaled(30), roots=[str(tmp_path)])
    result = pool.call(spec, "get-roots-list", {})
    assert result.success, result.error
    assert f"file://{tmp_path}" in result.text


def test_filesystem_server_works_from_roots_alone(pool: SessionPool, npm_servers: None, specs: Specs,
                                                  tmp_path: Any) -> None:
    (tmp_path / "hello.txt").write_text("hi from the workspace")
    spec = specs.local(None, command=rs.node(), args=[rs.npm_entry(rs.FILESYSTEM)],  # no directory arguments
                       startup_timeout_s=scaled(30), roots=[str(tmp_path)])
    # The server asks for the roots after the handshake and takes the answer in on its own time, so a call right
    # after the start may come first (seen under load: "Allowed directories:" and none): ask until it has them.
    answers: list[Any] = []

    def lists_the_root() -> bool:
        answers.append(pool.call(spec, "list_allowed_directories", {}))
        return answers[-1].success and str(tmp_path) in answers[-1].text

    assert wait_until(lists_the_root, bound_s=scaled(5), every_s=0.1), answers[-1]
    read = pool.call(spec, "read_text_file", {"path": str(tmp_path / "hello.txt")})
    assert read.success and "hi from the workspace" in read.text, read


@pytest.mark.parametrize(("served", "configured", "answered"),
                         [("sse", "streamable_http", "sse"), ("streamableHttp", "sse", "streamable_http")])
def test_wrong_transport_probe_names_the_one_that_answers(pool: SessionPool, npm_servers: None, specs: Specs,
                                                          served: str, configured: str, answered: str) -> None:
    from tools_app.runtime.errors import WrongTransport

    with rs.everything_http(served) as (url, _proc):
        with pytest.raises(WrongTransport) as caught:
            pool.probe(specs.remote(url, configured, timeout_s=10))
    assert caught.value.details["answered"] == answered
    assert f"set transport {answered!r}" in caught.value.message


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_the_first_call_after_the_real_server_restarts_succeeds(pool: SessionPool, npm_servers: None, specs: Specs,
                                                                transport: str) -> None:
    """server-everything restarted on the same port: the next call goes to a fresh session, with no error."""
    from tests.fixtures.mcp_servers import free_port

    port = free_port()
    served = "streamableHttp" if transport == "streamable_http" else "sse"
    with rs.everything_http(served, port=port) as (url, _proc):
        spec = specs.remote(url, transport, timeout_s=20)
        assert pool.call(spec, "echo", {"message": "before"}).text == "Echo: before"
    with rs.everything_http(served, port=port):
        after = pool.call(spec, "echo", {"message": "after"})
    assert after.success and after.text == "Echo: after", after
    assert pool.stats()["sessions_opened"] == 2


def test_a_stdio_real_server_that_died_is_replaced_for_the_next_call(pool: SessionPool, npm_servers: None,
                                                                     specs: Specs) -> None:
    import os
    import signal

    spec = specs.local(None, command=rs.node(), args=[rs.npm_entry(rs.EVERYTHING), "stdio"], startup_timeout_s=scaled(30))
    assert pool.call(spec, "echo", {"message": "one"}).success
    pid = pool._conns[spec.key].pid
    assert pid is not None
    conn = pool._conns[spec.key]
    os.kill(pid, signal.SIGKILL)
    assert wait_until(conn.exited)  # the pool's loop reaped the child
    again = pool.call(spec, "echo", {"message": "two"})
    assert again.success and again.text == "Echo: two", again
    assert pool.stats()["sessions_opened"] == 2
