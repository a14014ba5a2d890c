"""LOCAL (stdio) servers through the pool: discovery, calls, env/cwd, warm reuse, recycle, TTL, caps."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mcp_servers import INVENTORY
from tests.tools_app.runtime.mcp.conftest import Specs, marked_pids, wait_no_marked
from tests.waiting import scaled, wait_until
from tools_app.runtime.errors import CapacityExceeded
from tools_app.runtime.mcp import SessionPool


def test_stdio_inventory_end_to_end(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local(INVENTORY)  # the SDK-built server
    found = pool.discover(spec)
    assert (found.server_name, found.server_version) == ("inventory-demo", "1.2.3")
    assert found.protocol_version
    by_name = {f.name: f for f in found.functions}
    assert {"get_inventory", "echo_env", "whoami", "slow", "fail"} <= set(by_name)
    inv = by_name["get_inventory"]
    assert inv.input_schema["properties"]["sku"]["type"] == "string"
    assert inv.output_schema is not None and len(inv.schema_hash) == 64

    r1 = pool.call(spec, "get_inventory", {"sku": "DEMO-001"})
    assert r1.success and r1.data == {"sku": "DEMO-001", "quantity": 12, "found": True}
    assert '"quantity": 12' in r1.text
    assert pool.call(spec, "get_inventory", {"sku": "DEMO-002"}).data["quantity"] == 0
    assert pool.call(spec, "get_inventory", {"sku": "NOPE"}).data["found"] is False


def test_env_and_cwd_reach_the_child_and_our_secrets_do_not(
    pool: SessionPool, specs: Specs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_SECRET_KEYS", "super-secret-fernet-key")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:pw@db/x")
    spec = specs.local(env={"INVENTORY_REGION": "eu-west"}, cwd=str(tmp_path))
    assert pool.call(spec, "echo_env", {"name": "INVENTORY_REGION"}).text == "eu-west"
    assert pool.call(spec, "echo_env", {"name": "TOOLHUB_SECRET_KEYS"}).text == "<unset>"
    assert pool.call(spec, "echo_env", {"name": "DATABASE_URL"}).text == "<unset>"
    assert pool.call(spec, "echo_env", {"name": "PATH"}).text != "<unset>"
    who = pool.call(spec, "whoami", {}).data
    assert who["cwd"] == str(tmp_path)
    assert who["pgid"] == who["pid"] != os.getpgid(0)  # its own process group


def test_warm_session_is_reused(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local()
    assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success
    before = pool.stats()
    assert pool.call(spec, "get_inventory", {"sku": "DEMO-002"}).success
    after = pool.stats()
    assert after["sessions_opened"] == before["sessions_opened"] == 1
    assert after["processes_spawned"] == 1 and after["open_sessions"] == 1


def test_concurrent_callers_share_one_connect(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local()
    results = []

    def worker() -> None:
        results.append(pool.call(spec, "get_inventory", {"sku": "DEMO-001"}))

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(scaled(30))
    assert len(results) == 6 and all(r.success for r in results)
    stats = pool.stats()
    assert stats["sessions_opened"] == 1 and stats["processes_spawned"] == 1


def test_new_config_version_recycles_the_old_session(pool: SessionPool, specs: Specs) -> None:
    v1 = specs.local(version=1)
    old_pid = pool.call(v1, "whoami", {}).data["pid"]
    v2 = specs.local(version=2, env={"INVENTORY_REGION": "v2"})
    assert pool.call(v2, "echo_env", {"name": "INVENTORY_REGION"}).text == "v2"
    assert wait_until(lambda: old_pid not in marked_pids(specs.marker)), "the old session outlived its version"
    stats = pool.stats()
    assert stats["sessions_opened"] == 2 and stats["open_sessions"] == 1 and stats["recycled"] == 1


def test_idle_sessions_close_after_ttl(make_pool, specs: Specs) -> None:
    pool = make_pool(idle_ttl_s=0.3)
    assert pool.call(specs.local(), "get_inventory", {"sku": "DEMO-001"}).success
    assert wait_no_marked(specs.marker) == []
    assert pool.stats()["open_sessions"] == 0 and pool.stats()["reaped"] == 1


def test_capacity_caps_fail_fast_when_every_session_is_busy(make_pool, specs: Specs) -> None:
    pool = make_pool(max_per_tenant=1, max_total=2)
    busy = specs.local(tool_id=1, tenant="acme")
    assert pool.call(busy, "whoami", {}).success
    with ThreadPoolExecutor(max_workers=1) as executor:
        slow = executor.submit(pool.call, busy, "slow", {"seconds": 6})
        assert wait_until(lambda: _inflight(pool)), "the slow call never started"
        with pytest.raises(CapacityExceeded) as refused:
            pool.discover(specs.local(tool_id=2, tenant="acme"))
        assert refused.value.code == "capacity_exceeded" and refused.value.details == {"limit": 1, "scope": "tenant"}
        result = pool.call(specs.local(tool_id=2, tenant="acme"), "whoami", {})
        assert not result.success and result.error_code == "EXECUTION_ERROR"
        assert result.meta["error_type"] == "capacity_exceeded"  # the runtime error's code
        # Refused at once, not after waiting for a free slot: a wait would have lasted until the slow call ended.
        assert not slow.done()
        assert slow.result().success
    # Now idle: the warm session gives way to the next tool instead of refusing it.
    assert pool.call(specs.local(tool_id=2, tenant="acme"), "whoami", {}).success
    assert pool.stats()["evicted"] == 1


def test_idle_sessions_are_evicted_least_recently_used_first(make_pool, specs: Specs) -> None:
    pool = make_pool(max_per_tenant=5, max_total=2)
    assert pool.call(specs.local(tool_id=1, tenant="acme"), "whoami", {}).success
    assert pool.call(specs.local(tool_id=2, tenant="globex"), "whoami", {}).success
    assert pool.call(specs.local(tool_id=1, tenant="acme"), "whoami", {}).success  # tool 2 is now the oldest
    assert pool.call(specs.local(tool_id=3, tenant="initech"), "whoami", {}).success
    opened = pool.stats()["sessions_opened"]
    assert pool.call(specs.local(tool_id=1, tenant="acme"), "whoami", {}).success  # still warm
    assert pool.stats()["sessions_opened"] == opened
    assert pool.stats()["evicted"] == 1


def _inflight(pool: SessionPool) -> bool:
    return any(c.inflight for c in pool._conns.values())


def test_call_errors_are_typed(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local()
    failed = pool.call(spec, "fail", {"reason": "no stock"})
    assert failed.error_code == "BUSINESS_ERROR" and "no stock" in (failed.error or "")
    missing = pool.call(spec, "no_such_function", {})
    assert missing.error_code == "NOT_FOUND" and "get_inventory" in (missing.error or "")
    bad = pool.call(spec, "get_inventory", {"sku": "DEMO-001", "skuu": 1})
    assert bad.error_code == "INVALID_PARAMS" and "accepted: sku" in (bad.error or "")
    assert pool.call(spec, "get_inventory", {"sku": 5}).error_code == "INVALID_PARAMS"


def test_call_timeout_does_not_wedge_the_tool(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local()
    assert pool.call(spec, "whoami", {}).success
    timed_out = pool.call(spec, "slow", {"seconds": 30}, timeout_s=0.5)
    assert timed_out.error_code == "TIMEOUT"  # not the 30 s call's success: it did not wait for it
    after = pool.call(spec, "get_inventory", {"sku": "DEMO-001"})
    assert after.success and after.data["quantity"] == 12


def test_a_server_that_died_while_idle_is_replaced_before_the_next_call(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local()
    pid = pool.call(spec, "whoami", {}).data["pid"]
    os.kill(pid, 9)
    conn = pool._conns[spec.key]
    # The pool's loop reaps the child: its returncode is set, so the session reads as exited.
    assert wait_until(lambda: pid not in marked_pids(specs.marker) and conn.exited())
    first = pool.call(spec, "whoami", {})
    assert first.success and first.data["pid"] != pid, first
    assert pool.stats()["sessions_opened"] == 2


def _killed_while_idle(pool: SessionPool, specs: Specs, spec: Any) -> int:
    """Start `spec`'s server through a call, SIGKILL it while idle, and wait until the pool's loop has seen it go."""
    pid = pool.call(spec, "whoami", {}).data["pid"]
    conn = pool._conns[spec.key]
    os.kill(pid, 9)
    assert wait_until(lambda: pid not in marked_pids(specs.marker) and conn.exited())
    assert not conn.alive
    return int(pid)


def test_a_listing_after_the_server_died_while_idle_goes_to_a_new_server(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local()
    _killed_while_idle(pool, specs, spec)
    found = pool.discover(spec)
    assert "whoami" in {f.name for f in found.functions}
    assert pool.stats()["sessions_opened"] == 2


def test_a_session_request_after_the_server_died_while_idle_goes_to_a_new_server(pool: SessionPool,
                                                                                  specs: Specs) -> None:
    """The gateway's prompts and resources requests take the warm session as calls do: never the dead one."""
    spec = specs.local()
    pid = _killed_while_idle(pool, specs, spec)

    async def tools(session: Any) -> Any:
        return await session.list_tools()

    listed = pool.session_request(spec, tools)
    assert "whoami" in {t.name for t in listed.tools}
    assert pool.stats()["sessions_opened"] == 2
    assert pool.call(spec, "whoami", {}).data["pid"] != pid


def test_the_reaper_drops_a_session_whose_server_died_while_idle(pool: SessionPool, specs: Specs) -> None:
    """A dead server's session stops counting at the reaper's next pass (the TTL is far off), not at its next use."""
    spec = specs.local()
    _killed_while_idle(pool, specs, spec)
    assert pool.stats()["open_sessions"] == 1

    async def reap() -> None:
        pool._reap_once()

    pool._run(reap(), 10)
    assert pool.stats()["open_sessions"] == 0 and pool.stats()["reaped"] == 1


def test_a_call_sent_on_a_session_whose_server_died_fails_at_once(pool: SessionPool, specs: Specs) -> None:
    """Past the pool's check (the session taken just before the death): the call is not left waiting for an answer
    no reader will take (it would end as a TIMEOUT after the call's 60 s), it fails saying the server exited."""
    spec = specs.local()
    _killed_while_idle(pool, specs, spec)
    conn = pool._conns[spec.key]

    async def call() -> Any:
        return await conn.call("whoami", {}, 60.0)

    result = pool._run(call(), 90)
    assert not result.success and result.error_code == "EXECUTION_ERROR", result
    assert result.meta["error_type"] == "server_exited" and "exited with status -9" in result.error, result


def test_close_and_close_all_leave_no_process(pool: SessionPool, specs: Specs) -> None:
    for tool_id in (1, 2):
        assert pool.call(specs.local(tool_id=tool_id), "whoami", {}).success
    assert len(marked_pids(specs.marker)) == 2
    pool.close(1)
    assert pool.stats()["open_sessions"] == 1
    pool.close_all()
    assert wait_no_marked(specs.marker) == []
    assert pool.stats()["open_sessions"] == 0


def test_singleton_and_async_variant(specs: Specs) -> None:
    import asyncio

    from tests.tools_app.runtime.mcp.conftest import LOOPBACK
    from tools_app.runtime.mcp import configure_pool, get_pool

    pool = configure_pool(policy=LOOPBACK, idle_ttl_s=60)
    try:
        assert get_pool() is pool
        spec = specs.local()

        async def agent_side() -> list:
            return await asyncio.gather(*(pool.acall(spec, "get_inventory", {"sku": "DEMO-001"}) for _ in range(3)))

        results = asyncio.run(agent_side())
        assert [r.data["quantity"] for r in results] == [12, 12, 12]
        assert (asyncio.run(pool.adiscover(spec))).server_name == "inventory-mini"
        assert pool.stats()["sessions_opened"] == 1
    finally:
        pool.shutdown()
    assert wait_no_marked(specs.marker) == []


def _busy(pool: SessionPool) -> int:
    return sum(c.inflight for c in pool._conns.values())


def test_a_tenant_saturating_the_slots_leaves_other_tenants_a_slot(make_pool, specs: Specs) -> None:
    pool = make_pool(max_per_tenant=10, max_total=4)
    with ThreadPoolExecutor(max_workers=2) as executor:
        # acme alone may hold 4 // (1 + 1) = 2 slots: two busy servers, and a third is refused.
        slow = [executor.submit(pool.call, specs.local(tool_id=i, tenant="acme"), "slow", {"seconds": 4})
                for i in (1, 2)]
        assert wait_until(lambda: _busy(pool) == 2), "the two slow calls never started"
        with pytest.raises(CapacityExceeded) as refused:
            pool.discover(specs.local(tool_id=3, tenant="acme"))
        assert refused.value.details == {"limit": 2, "scope": "tenant"}
        # While every acme server is busy, two more tenants each get one.
        assert pool.call(specs.local(tool_id=4, tenant="globex"), "whoami", {}).success
        assert pool.call(specs.local(tool_id=5, tenant="initech"), "whoami", {}).success
        assert [f.result().success for f in slow] == [True, True]
    assert pool.stats()["tenants"] == {"acme": 2, "globex": 1, "initech": 1}
    # A fourth tenant on the full pool: acme, over its share of 1 now, gives back its idle slot, not globex's
    # or initech's warm server.
    assert pool.call(specs.local(tool_id=6, tenant="hooli"), "whoami", {}).success
    assert pool.stats()["tenants"] == {"acme": 1, "globex": 1, "initech": 1, "hooli": 1}
    # acme at its share makes room among its own servers only.
    assert pool.call(specs.local(tool_id=7, tenant="acme"), "whoami", {}).success
    assert pool.stats()["tenants"] == {"acme": 1, "globex": 1, "initech": 1, "hooli": 1}
    assert pool.stats()["evicted"] == 2


def test_without_fair_share_one_tenant_may_take_every_slot(make_pool, specs: Specs) -> None:
    pool = make_pool(max_per_tenant=10, max_total=2, fair_share=False)
    for tool_id in (1, 2):
        assert pool.call(specs.local(tool_id=tool_id, tenant="acme"), "whoami", {}).success
    assert pool.stats()["tenants"] == {"acme": 2}
    assert pool.call(specs.local(tool_id=3, tenant="globex"), "whoami", {}).success  # only by evicting idle LRU
    assert pool.stats()["tenants"] == {"acme": 1, "globex": 1}
