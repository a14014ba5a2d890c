"""The runner's side: an authenticated HTTP endpoint on a private address, hosting the LOCAL servers placed on it.

Web processes and workers send `probe`, `call`, `session` (read-only prompts/resources requests) and `close`; the
runner runs them on its own session pool, so each server key has one process in the whole deployment. Every
request carries `Authorization: Bearer <TOOLHUB_RUNNER_SECRET>`; anything else answers 401 and runs nothing.
A request for a server without a sandbox (an operator's `unsandboxed` tool, or TOOLHUB_LOCAL_SANDBOX=off where the
web process runs) is refused unless the runner's own configuration allows it (TOOLHUB_RUNNER_ALLOW_UNSANDBOXED=on):
whoever holds the secret does not thereby get to run code on the runner's host outside the sandbox.
"""

from __future__ import annotations

import hmac
import threading
import time
from typing import Any

import anyio
import mcp_types as types
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from core.errors import RuntimeToolError
from tools_app.runtime.mcp.pool import SessionPool
from tools_app.runtime.mcp.spec import LocalSpec, ServerSpec
from tools_app.runtime.runner.placement import Registry, RunnerInfo
from tools_app.runtime.runner.wire import discovery_to_json, error_to_json, result_to_json, spec_from_json
from tools_app.runtime.sandbox import SandboxUnavailable

# The only session requests a runner serves for others: reads, as the gateway forwards them.
SESSION_METHODS: dict[str, type[Any]] = {
    "list_resources": types.ListResourcesResult,
    "list_resource_templates": types.ListResourceTemplatesResult,
    "read_resource": types.ReadResourceResult,
    "list_prompts": types.ListPromptsResult,
    "get_prompt": types.GetPromptResult,
}


def checked_spec(raw: dict[str, Any], *, allow_unsandboxed: bool) -> ServerSpec:
    """The spec a request names, refused when it asks for no sandbox and this runner does not allow that."""
    spec = spec_from_json(raw)
    if isinstance(spec.target, LocalSpec) and spec.target.sandbox is None and not allow_unsandboxed:
        raise SandboxUnavailable(
            "this runner does not run LOCAL servers outside the sandbox; the request asked for none (an "
            "unsandboxed tool, or TOOLHUB_LOCAL_SANDBOX=off). An operator who accepts that allows it on the "
            "runner itself with TOOLHUB_RUNNER_ALLOW_UNSANDBOXED=on",
            details={"tool_id": spec.tool_id, "setting": "TOOLHUB_RUNNER_ALLOW_UNSANDBOXED"},
        )
    return spec


def build_app(pool: SessionPool, secret: str, *, allow_unsandboxed: bool = False) -> Starlette:
    """The runner's routes over `pool`; servers without a sandbox run only when `allow_unsandboxed`."""
    if not secret:
        raise ValueError("a runner needs TOOLHUB_RUNNER_SECRET: its transport is authenticated")
    expected = f"Bearer {secret}".encode()

    def sandboxed(raw: dict[str, Any]) -> ServerSpec:
        return checked_spec(raw, allow_unsandboxed=allow_unsandboxed)

    async def guarded(request: Request, handle: Any) -> JSONResponse:
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return JSONResponse({"error": {"type": "Unauthorized", "message": "runner secret required"}}, 401)
        body = await request.json() if request.method == "POST" else {}
        try:
            return JSONResponse(await handle(body))
        except RuntimeToolError as exc:
            return JSONResponse({"error": error_to_json(exc)}, 409)

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        spec = sandboxed(body["spec"])
        result = await pool.acall(spec, str(body["function"]), dict(body.get("arguments") or {}),
                                  body.get("timeout_s"))
        return {"result": result_to_json(result)}

    async def probe(body: dict[str, Any]) -> dict[str, Any]:
        return {"discovery": discovery_to_json(await pool.aprobe(sandboxed(body["spec"])))}

    async def session(body: dict[str, Any]) -> dict[str, Any]:
        method = str(body.get("method"))
        if method not in SESSION_METHODS:
            raise RuntimeToolError(f"session method {method!r} is not served; accepted: {', '.join(SESSION_METHODS)}")
        spec = sandboxed(body["spec"])
        args, kwargs = list(body.get("args") or []), dict(body.get("kwargs") or {})

        async def op(client: Any) -> Any:
            return await getattr(client, method)(*args, **kwargs)

        found = await anyio.to_thread.run_sync(pool.session_request, spec, op)
        return {"result": found.model_dump(mode="json", by_alias=True, exclude_none=True)}

    async def close(body: dict[str, Any]) -> dict[str, Any]:
        await anyio.to_thread.run_sync(pool.close, int(body["tool_id"]))
        return {"closed": int(body["tool_id"])}

    async def stats(body: dict[str, Any]) -> dict[str, Any]:
        return {"stats": await anyio.to_thread.run_sync(pool.stats)}

    def route(path: str, handle: Any, method: str = "POST") -> Route:
        async def endpoint(request: Request) -> JSONResponse:
            return await guarded(request, handle)

        return Route(path, endpoint, methods=[method])

    return Starlette(routes=[route("/v1/call", call), route("/v1/probe", probe), route("/v1/session", session),
                             route("/v1/close", close), route("/v1/stats", stats, "GET")])


class Heartbeat:
    """Announce this runner in the registry every `ttl/3` seconds until stopped; withdraw it on stop."""

    def __init__(self, registry: Registry, pool: SessionPool, *, runner_id: str, url: str) -> None:
        self.registry, self.pool, self.runner_id, self.url = registry, pool, runner_id, url
        self.since = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"runner-heartbeat-{runner_id}", daemon=True)

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def beat(self) -> None:
        servers = int(self.pool.stats().get("open_sessions", 0))
        self.registry.announce(RunnerInfo(id=self.runner_id, url=self.url, servers=servers, since=self.since,
                                          draining=self.registry.draining(self.runner_id, self.since)))

    def _run(self) -> None:
        while not self._stop.wait(self.registry.ttl_s / 3):
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - Redis away for a moment: the next beat tries again
                continue

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():  # never started when the server could not bind its port
            self._thread.join(5)
        try:
            self.registry.withdraw(self.runner_id)  # and its draining mark
        except Exception:  # noqa: BLE001 - the TTL ends the entry anyway
            pass
