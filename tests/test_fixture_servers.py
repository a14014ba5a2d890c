"""The suite's HTTP fixture servers are started on a port picked free, which a parallel run's other process can take
first: `wait_listening` must wait for the server's own listener, not return on somebody else's."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.fixtures.mcp_servers import NotOurs, free_port, http_server, wait_listening


def test_another_process_listening_on_the_port_is_not_the_server() -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        quiet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
        try:
            with pytest.raises(TimeoutError):
                wait_listening(port, timeout_s=0.3, proc=quiet)
        finally:
            quiet.kill()
            quiet.wait()


def test_a_server_that_exits_before_listening_is_named() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    gone.wait()
    with pytest.raises(NotOurs, match="exited with status 0"):
        wait_listening(free_port(), proc=gone)


def test_a_fixture_server_answers_on_the_port_it_names() -> None:
    with http_server() as url:
        port = int(url.split(":")[2].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
