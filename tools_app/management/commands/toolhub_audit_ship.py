"""Ship the audit stream to TOOLHUB_AUDIT_STREAM until stopped (SIGTERM/SIGINT end it between batches)."""

from __future__ import annotations

import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tools_app.services import audit_stream


class Command(BaseCommand):
    help = "Send every call's audit record (OCSF API Activity JSON lines) to TOOLHUB_AUDIT_STREAM, from its cursor on."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--once", action="store_true", help="send what is waiting, then exit")
        parser.add_argument("--if-set", action="store_true",
                            help="without TOOLHUB_AUDIT_STREAM, say so and wait for SIGTERM instead of failing (a "
                                 "process manager that stops everything when one process exits: the Procfile, compose)")

    def handle(self, *args: Any, **options: Any) -> None:
        target = settings.TOOLHUB_AUDIT_STREAM
        if not target and options["if_set"] and not options["once"]:
            asked: list[int] = []
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda signum, frame: asked.append(signum))
            self.stdout.write("TOOLHUB_AUDIT_STREAM is not set: nothing to ship; waiting for SIGTERM")
            self.stdout.flush()
            while not asked:
                signal.pause()  # returns after a handler ran; a clean exit, as after a batch
            return
        if not target:
            raise CommandError("TOOLHUB_AUDIT_STREAM is not set (file:/path, syslog://host:port, http(s)://...)")
        try:
            token = settings.TOOLHUB_AUDIT_STREAM_TOKEN
            sink = audit_stream.sink_from(target, {"Authorization": f"Bearer {token}"} if token else None)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["once"]:
            total = 0
            while sent := audit_stream.ship_once(sink):
                total += sent
            self.stdout.write(f"sent {total} record(s) to {sink.name}")
            return
        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(f"shipping the audit stream to {sink.name}", ending="\n")
        self.stdout.flush()
        audit_stream.ship(sink, stop=lambda: stopping)
