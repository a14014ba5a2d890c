"""The runner's bare ASGI app answers what Starlette's router did: its paths, 401 without the secret, 404 and 405."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from tools_app.runtime.runner.app import build_app

SECRET = "routes-secret"


class _Pool:
    """Only what /v1/stats and /v1/close ask of a pool."""

    def __init__(self) -> None:
        self.closed: list[int] = []

    def stats(self) -> dict[str, Any]:
        return {"open": 0}

    def close(self, tool_id: int) -> None:
        self.closed.append(tool_id)


def test_the_runner_app_routes_as_before() -> None:
    pool = _Pool()
    auth = {"Authorization": f"Bearer {SECRET}"}
    with TestClient(build_app(pool, SECRET)) as client:  # type: ignore[arg-type]
        assert client.get("/v1/stats", headers=auth).json() == {"stats": {"open": 0}}
        answer = client.post("/v1/close", json={"tool_id": 3}, headers=auth)
        assert answer.status_code == 200 and answer.json() == {"closed": 3} and pool.closed == [3]
        assert answer.headers["content-type"] == "application/json"
        assert client.post("/v1/close", json={"tool_id": 4}).status_code == 401 and pool.closed == [3]
        assert client.post("/v1/nothing", headers=auth).status_code == 404
        wrong = client.get("/v1/call", headers=auth)
        assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
        assert client.head("/v1/stats", headers=auth).status_code == 200
        refused = client.post("/v1/session", json={"method": "call_tool", "spec": {}}, headers=auth)
        assert refused.status_code == 409 and refused.json()["error"]["type"] == "RuntimeToolError"
