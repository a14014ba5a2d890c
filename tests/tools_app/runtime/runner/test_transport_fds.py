"""The runner transport's idle-connection check works for any descriptor number (select() stops at 1023)."""

from __future__ import annotations

import http.client
import os
import socket

from tools_app.runtime.runner.client import _Transport


def test_an_idle_connection_above_descriptor_1023_is_checked_and_reused() -> None:
    """select() refused descriptors above 1023 (ValueError on every call of a busy process); poll does not."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        held: list[int] = []
        try:
            while not held or held[-1] < 1100:
                held.append(os.dup(server.fileno()))
            os.close(held.pop())  # a free descriptor above 1023 for the connection's socket
            conn = http.client.HTTPConnection("127.0.0.1", server.getsockname()[1])
            conn.connect()
            assert conn.sock is not None and conn.sock.fileno() > 1023
            transport = _Transport("s")
            transport._give_back("base", conn)
            assert transport._take("base") is conn
            peer, _ = server.accept()
            peer.close()  # the runner closed it while idle: readable, not reused
            transport._give_back("base", conn)
            assert transport._take("base") is None
        finally:
            for fd in held:
                os.close(fd)
