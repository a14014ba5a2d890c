"""The web and worker side of the runner tier: a pool facade that sends LOCAL work to the key's runner.

REMOTE servers stay in this process's own pool (they are HTTP already). A LOCAL probe, call, read-only session
request or close goes to the runner that owns the server key `(tool_id, config_version)`; when that runner cannot
be reached the registry is read again and the call goes to the key's new owner (a dead runner's servers start
again elsewhere on their next call). What does not cross: progress notifications and a server's sampling or
elicitation requests during a call through a runner (declined there, as for any caller that cannot answer).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import httpx2

from core.codes import ApiCode
from tools_app.runtime.errors import ConnectionFailed
from tools_app.runtime.mcp.discovery import Discovery
from tools_app.runtime.mcp.pool import SYNC_SLACK_S, SessionPool
from tools_app.runtime.mcp.spec import LocalSpec, ServerSpec
from tools_app.runtime.result import EXECUTION_ERROR, ToolResult
from tools_app.runtime.runner.app import SESSION_METHODS
from tools_app.runtime.runner.placement import Registry, RunnerInfo, owner
from tools_app.runtime.runner.wire import discovery_from_json, error_from_json, result_from_json, spec_to_json

T = TypeVar("T")


class RunnerUnavailable(ConnectionFailed):
    code = ApiCode.RUNNER_UNAVAILABLE


class RunnerPool:
    """What `adapters.pool()` returns when the deployment has runners (TOOLHUB_RUNNERS=redis)."""

    def __init__(self, local: SessionPool, registry: Registry, secret: str) -> None:
        self.local = local
        self.registry = registry
        self.client = httpx2.Client(headers={"Authorization": f"Bearer {secret}"}, trust_env=False)

    # ---- the SessionPool surface the services use ----------------------------------------------------

    def probe(self, spec: ServerSpec) -> Discovery:
        if not isinstance(spec.target, LocalSpec):
            return self.local.probe(spec)
        body = self._post(spec, "/v1/probe", {"spec": spec_to_json(spec)}, spec.startup_timeout_s + SYNC_SLACK_S)
        return discovery_from_json(body["discovery"])

    def call(self, spec: ServerSpec, function: str, arguments: dict[str, Any], timeout_s: float | None = None,
             on_progress: Any = None, client_requests: Any = None) -> ToolResult:
        if not isinstance(spec.target, LocalSpec):
            return self.local.call(spec, function, arguments, timeout_s, on_progress, client_requests)
        timeout = timeout_s or spec.call_timeout_s
        try:
            body = self._post(spec, "/v1/call", {"spec": spec_to_json(spec), "function": function,
                                                 "arguments": arguments, "timeout_s": timeout},
                              spec.startup_timeout_s + timeout + SYNC_SLACK_S)
        except ConnectionFailed as exc:
            return ToolResult.fail(EXECUTION_ERROR, exc.message)
        return result_from_json(body["result"])

    def session_request(self, spec: ServerSpec, op: Callable[[Any], Awaitable[T]], timeout_s: float | None = None) -> T:
        if not isinstance(spec.target, LocalSpec):
            return self.local.session_request(spec, op, timeout_s)
        timeout = spec.startup_timeout_s + (timeout_s or spec.call_timeout_s) + SYNC_SLACK_S
        return anyio.run(op, _RemoteSession(self, spec, timeout))

    def close(self, tool_id: int) -> None:
        self.local.close(tool_id)
        for runner in self.registry.runners(max_age_s=0):
            try:
                self.client.post(runner.url + "/v1/close", json={"tool_id": tool_id}, timeout=30)
            except httpx2.HTTPError:
                continue  # a runner that is gone holds nothing; one that is back started empty

    def close_all(self) -> None:
        self.local.close_all()

    def shutdown(self) -> None:
        self.local.shutdown()
        self.client.close()

    def stats(self) -> dict[str, Any]:
        return {**self.local.stats(), "runners": self.registry.describe(),
                "runner_announcements_rejected": self.registry.rejected}

    # ---- transport -------------------------------------------------------------------------------

    def owner_of(self, spec: ServerSpec, excluded: frozenset[str] = frozenset()) -> RunnerInfo:
        live = [r for r in self.registry.runners() if r.id not in excluded]
        found = owner(f"{spec.tool_id}:{spec.config_version}", live)
        if found is None:
            raise RunnerUnavailable("no LOCAL server runner is live (start `manage.py toolhub_runner`)",
                                    details={"tool_id": spec.tool_id})
        return found

    def _post(self, spec: ServerSpec, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        refused: set[str] = set()
        while True:
            runner = self.owner_of(spec, frozenset(refused))
            try:
                response = self.client.post(runner.url + path, json=body, timeout=timeout)
            except httpx2.ConnectError:
                # Nobody listens there: a dead runner whose heartbeat has not expired yet. The key goes to its
                # next owner (the one every process picks once the entry expires). A slow runner is not skipped:
                # only a refused connection moves a server, so a key never runs on two runners at once.
                self.registry.forget()
                refused.add(runner.id)
                continue
            except httpx2.TransportError as exc:
                raise RunnerUnavailable(f"the LOCAL server runner {runner.id!r} did not answer: {type(exc).__name__}",
                                        details={"runner": runner.id}) from None
            answer: dict[str, Any] = response.json()
            if "error" in answer:
                raise error_from_json(answer["error"])
            return answer


class _RemoteSession:
    """Stands in for the SDK ClientSession in a read-only request: each allowed method goes to the runner."""

    def __init__(self, pool: RunnerPool, spec: ServerSpec, timeout: float) -> None:
        self._pool, self._spec, self._timeout = pool, spec, timeout

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        result_type = SESSION_METHODS.get(method)
        if result_type is None:
            raise AttributeError(f"{method} is not served through a runner")

        async def send(*args: Any, **kwargs: Any) -> Any:
            body = {"spec": spec_to_json(self._spec), "method": method, "args": list(args), "kwargs": kwargs}
            answer = await anyio.to_thread.run_sync(self._pool._post, self._spec, "/v1/session", body, self._timeout)
            return result_type.model_validate(answer["result"])

        return send
