"""`manage.py runserver` is core's: staticfiles' dev server with TCP_NODELAY on each accepted connection."""

from __future__ import annotations

import socket

import pytest
from django.core.management import get_commands, load_command_class
from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer

from core.management.commands.runserver import NoDelayWSGIServer


def test_runserver_is_cores_and_keeps_serving_static_files() -> None:
    from django.contrib.staticfiles.management.commands.runserver import Command as Staticfiles

    assert get_commands()["runserver"] == "core"
    command = load_command_class("core", "runserver")
    assert isinstance(command, Staticfiles)
    assert command.server_cls is NoDelayWSGIServer


@pytest.mark.parametrize(("server_cls", "nodelay"), [(NoDelayWSGIServer, True), (WSGIServer, False)])
def test_accepted_connections_have_nagle_off(server_cls: type[WSGIServer], nodelay: bool) -> None:
    # Django's own server leaves Nagle on (the second case): the option is this server's doing.
    server = server_cls(("127.0.0.1", 0), WSGIRequestHandler)
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=5):
            conn, _ = server.get_request()
            with conn:
                assert bool(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)) is nodelay
    finally:
        server.server_close()
