"""`manage.py runserver` that sets TCP_NODELAY on each connection; otherwise django.contrib.staticfiles' own.

Django's dev server writes a response's headers and its body in two small writes. Without TCP_NODELAY, Nagle's
algorithm holds the body back until the client acknowledges the headers, and a Linux client delays that ACK by
up to 40 ms, so on a kept-alive connection (browsers, API clients) answers could stall for 40 ms whatever the
view did. With it, a kept-alive connection also keeps its thread, and with it the thread's database connection:
a client that reconnects for every request pays a new thread and a new SQLite connection each time (~1 ms).
"""

from __future__ import annotations

import socket
from typing import Any

from django.contrib.staticfiles.management.commands.runserver import Command as StaticfilesRunserver
from django.core.servers.basehttp import WSGIServer


class NoDelayWSGIServer(WSGIServer):
    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        if conn.family in (socket.AF_INET, socket.AF_INET6):
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr


class Command(StaticfilesRunserver):
    server_cls = NoDelayWSGIServer
