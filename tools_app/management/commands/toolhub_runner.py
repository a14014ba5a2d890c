"""`manage.py toolhub_runner`: a runner process hosting LOCAL MCP servers for the whole deployment (TOOLHUB_RUNNERS)."""

from __future__ import annotations

import socket
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tools_app.runtime.mcp import SessionPool
from tools_app.runtime.runner.app import Heartbeat, build_app
from tools_app.wiring.pool import local_pool, runner_registry


class Command(BaseCommand):
    help = "Run a LOCAL server runner (or mark one draining with --drain ID)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback or a private network)")
        parser.add_argument("--port", type=int, default=8790)
        parser.add_argument("--id", dest="runner_id", default="", help="this runner's name (default host-port)")
        parser.add_argument("--url", default="", help="the URL web processes reach it by (default http://host:port)")
        parser.add_argument("--drain", metavar="ID", default="",
                            help="mark runner ID draining (its servers move on their next call) and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.TOOLHUB_RUNNERS:
            raise CommandError("TOOLHUB_RUNNERS is not set: LOCAL servers run in each web process (set it to redis, "
                               "with REDIS_URL and TOOLHUB_RUNNER_SECRET, to use runners)")
        registry = runner_registry()
        if options["drain"]:
            if not registry.set_draining(options["drain"]):
                raise CommandError(f"no live runner {options['drain']!r}; live: "
                                   f"{', '.join(r.id for r in registry.runners(max_age_s=0)) or 'none'}")
            self.stdout.write(f"runner {options['drain']} is draining: its servers move on their next call")
            return
        host, port = options["host"], options["port"]
        runner_id = options["runner_id"] or f"{socket.gethostname()}-{port}"
        url = options["url"] or f"http://{host}:{port}"
        every_s = settings.TOOLHUB_RUNNER_HEARTBEAT_S or registry.ttl_s / 3
        if every_s >= registry.ttl_s:
            raise CommandError(f"TOOLHUB_RUNNER_HEARTBEAT_S ({every_s:g}) must be below TOOLHUB_RUNNER_TTL_S "
                               f"({registry.ttl_s:g}): each announcement would lapse before the next")
        pool = local_pool()
        heartbeat = Heartbeat(registry, pool, runner_id=runner_id, url=url, interval_s=every_s,
                              unowned_idle_s=settings.TOOLHUB_RUNNER_UNOWNED_IDLE_S)
        server = _AnnouncingServer(uvicorn.Config(build_app(pool, settings.TOOLHUB_RUNNER_SECRET,
                                                            allow_unsandboxed=settings.TOOLHUB_RUNNER_ALLOW_UNSANDBOXED),
                                                  host=host, port=port, log_level="warning", lifespan="off"),
                                   heartbeat, pool)
        self.stdout.write(f"toolhub runner {runner_id} starting on {url}")
        try:
            server.run()
        finally:
            heartbeat.stop()
            pool.shutdown()  # every server this runner started ends with it


class _AnnouncingServer(uvicorn.Server):
    """Announces the runner only once its socket is bound: a web process never routes a call to a runner that
    is not listening yet (it would take it for a dead one and move the server elsewhere)."""

    def __init__(self, config: uvicorn.Config, heartbeat: Heartbeat, pool: SessionPool) -> None:
        super().__init__(config)
        self.heartbeat = heartbeat
        self.pool = pool

    async def startup(self, sockets: Any = None) -> None:
        # The session pool runs on this serving loop (SessionPool.adopt): a call from the runner's HTTP handler
        # awaits it in place, with no hand-off to a loop thread and back.
        await self.pool.adopt()
        await super().startup(sockets=sockets)
        if self.started:
            self.heartbeat.start()
        else:
            await self.pool.release()

    async def shutdown(self, sockets: Any = None) -> None:
        try:
            await super().shutdown(sockets=sockets)
        finally:
            await self.pool.release()  # every server this runner started ends with it, on the loop that ran them
