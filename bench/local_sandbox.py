"""A LOCAL MCP server in the tenant sandbox vs unsandboxed, side by side in one run: cold start and warm call (ratios)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _common import summary, warm_inventory_calls

from core.outbound import OutboundPolicy
from tools_app.configs import server_spec
from tools_app.runtime.mcp import ServerSpec, SessionPool
from tools_app.runtime.sandbox import SandboxPolicy, ServerSandbox

SERVER = Path(__file__).resolve().parents[1] / "toolhub_demo" / "inventory_server.py"


def spec(version: int, sandbox: ServerSandbox | None) -> ServerSpec:
    config = {"command": sys.executable, "args": [str(SERVER)], "startup_timeout_s": 30}
    return server_spec(tool_id=1, config_version=version, tenant_key="1", tool_type="LOCAL", config=config,
                       sandbox=sandbox)


def cold(pool: SessionPool, sandbox: ServerSandbox | None, n: int) -> list[float]:
    """A new server each time (a new config version): spawn, initialize, one call."""
    samples = []
    for version in range(1, n + 1):
        started = time.perf_counter()
        result = pool.call(spec(version, sandbox), "get_inventory", {"sku": "DEMO-001"})
        samples.append((time.perf_counter() - started) * 1000)
        assert result.success, result.error
        pool.close(1)
    return samples


def warm(pool: SessionPool, sandbox: ServerSandbox | None, n: int) -> list[float]:
    samples: list[float] = warm_inventory_calls(pool, spec(10_000, sandbox), n)
    pool.close(1)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cold", type=int, default=8)
    parser.add_argument("--warm", type=int, default=300)
    args = parser.parse_args()
    pool = SessionPool(policy=OutboundPolicy.build(""), idle_ttl_s=300)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            box = ServerSandbox(policy=SandboxPolicy(extra_ro_paths=(sys.base_prefix, sys.prefix, str(SERVER))),
                                tenant_key="1", workspace=tmp, uid=100001)
            for name, measure, n in (("cold start + call", cold, args.cold), ("warm call", warm, args.warm)):
                boxed, plain = measure(pool, box, n), measure(pool, None, n)
                ratio = sorted(boxed)[len(boxed) // 2] / sorted(plain)[len(plain) // 2]
                print(f"{name}: sandboxed {summary(boxed)}")
                print(f"{name}: plain     {summary(plain)}")
                print(f"{name}: p50 ratio sandboxed/plain = {ratio:.2f}x")
    finally:
        pool.shutdown()


if __name__ == "__main__":
    main()
