"""config.asgi's application with a profiler bench/gateway_eras.py switches on and off (`--profile`).

POST /__bench_profile__ {"label": "2025"} starts a window, {"label": null} ends it and writes, for the window:
- PREFIX-<label>.prof: cProfile of the event loop's thread and of every worker thread's jobs (the ORM hops run in
  the loop's default executor; each job is profiled in its thread), merged (pstats);
- PREFIX-<label>.txt: the top of that by cumulative time, the SQL statements and Redis commands counted in every
  thread (Django's execute wrappers, redis-py's execute_command), and a sampled view of every thread (1 ms
  stacks, idle waits left out: this sees the upstream pool's loop thread and anyio's workers too).
Only for benchmarks: nothing here is imported by Toolhub.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import sys
import threading
import time
from collections import Counter
from concurrent.futures import thread as futures_thread
from typing import Any

from bench._common import read_body, send_json
from config.asgi import application as toolhub

PREFIX = os.environ.get("BENCH_PROFILE_PREFIX", "gateway-profile")
IDLE = ("select", "poll", "wait", "_worker", "acquire", "get", "sleep", "run_forever", "_run_once", "epoll")


class Window:
    def __init__(self) -> None:
        self.label: str | None = None
        self.loop_profile: cProfile.Profile | None = None
        self.pool_profile: cProfile.Profile | None = None  # the MCP session pool's loop thread (the SDK client)
        self.job_profiles: list[cProfile.Profile] = []
        self.lock = threading.Lock()
        self.sql: Counter[str] = Counter()
        self.redis: Counter[str] = Counter()
        self.samples: Counter[str] = Counter()
        self.sampled = 0
        self.started = 0.0

    @property
    def active(self) -> bool:
        return self.label is not None


window = Window()
opened = threading.Event()

# Worker-thread jobs (server.db's run_in_executor) profiled one by one while a window is open.
_run = futures_thread._WorkItem.run


def _profiled_run(self: Any) -> None:
    if not window.active:
        return _run(self)
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    try:
        return _run(self)
    finally:
        profile.disable()
        with window.lock:
            window.job_profiles.append(profile)


futures_thread._WorkItem.run = _profiled_run  # type: ignore[method-assign]


def _count_sql(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    if window.active:
        window.sql[sql.split(" WHERE ")[0][:140]] += 1
    return execute(sql, params, many, context)


def _install_counters() -> None:
    from django.db.backends.signals import connection_created

    def wrap(sender: Any, connection: Any, **kw: Any) -> None:
        if _count_sql not in connection.execute_wrappers:
            connection.execute_wrappers.append(_count_sql)

    connection_created.connect(wrap, weak=False)
    try:
        import redis.client

        command = redis.client.Redis.execute_command

        def counted(self: Any, *args: Any, **options: Any) -> Any:
            if window.active:
                window.redis[str(args[0])] += 1
            return command(self, *args, **options)

        redis.client.Redis.execute_command = counted  # type: ignore[method-assign]
        pipeline = redis.client.Pipeline.execute

        def counted_pipeline(self: Any, *args: Any, **kw: Any) -> Any:
            if window.active:
                window.redis["PIPELINE"] += 1
            return pipeline(self, *args, **kw)

        redis.client.Pipeline.execute = counted_pipeline  # type: ignore[method-assign]
    except ImportError:
        pass


def _sampler() -> None:
    me = threading.get_ident()
    while True:
        opened.wait()  # dormant outside a window: no wake-ups while the plain samples are taken
        time.sleep(0.001)
        if not window.active:
            continue
        window.sampled += 1
        for ident, frame in sys._current_frames().items():
            if ident == me or frame is None:
                continue
            if frame.f_code.co_name in IDLE or "selectors" in frame.f_code.co_filename:
                continue
            stack: list[str] = []
            walk: Any = frame
            while walk is not None and len(stack) < 8:
                code = walk.f_code
                stack.append(f"{os.path.basename(code.co_filename)}:{code.co_name}")
                walk = walk.f_back
            window.samples[" < ".join(stack)] += 1


def _pool_loop() -> Any:
    """The MCP session pool's event loop (its own thread), when it runs one."""
    from tools_app.wiring.pool import _slot

    current = _slot.current()
    loop = getattr(current, "_loop", None)
    return loop if loop is not None and loop.is_running() else None


def _in_pool_thread(fn: Any) -> None:
    loop = _pool_loop()
    if loop is None:
        return
    done = threading.Event()

    def run() -> None:
        try:
            fn()
        finally:
            done.set()

    loop.call_soon_threadsafe(run)
    done.wait(5)


def _start(label: str) -> None:
    window.sql.clear()
    window.redis.clear()
    window.samples.clear()
    window.job_profiles = []
    window.sampled = 0
    # CPU time of the thread (not wall time): what each thread spends, not what it waits for the GIL.
    window.loop_profile = cProfile.Profile(time.thread_time)
    window.pool_profile = cProfile.Profile(time.thread_time)
    _in_pool_thread(window.pool_profile.enable)
    window.started = time.perf_counter()
    window.label = label
    opened.set()
    window.loop_profile.enable()


def _stop() -> str:
    assert window.loop_profile is not None
    window.loop_profile.disable()
    if window.pool_profile is not None:
        _in_pool_thread(window.pool_profile.disable)
    label, window.label = window.label, None
    opened.clear()
    elapsed = time.perf_counter() - window.started
    stats = pstats.Stats(window.loop_profile)
    for profile in window.job_profiles:
        stats.add(profile)
    path = f"{PREFIX}-{label}"
    stats.dump_stats(f"{path}.prof")
    text = io.StringIO()
    text.write(f"window {label}: {elapsed * 1000:.0f} ms wall, {len(window.job_profiles)} worker-thread jobs\n")
    text.write(f"SQL statements: {sum(window.sql.values())}\n")
    for sql, n in window.sql.most_common(20):
        text.write(f"  {n:6d}  {sql}\n")
    text.write(f"Redis commands: {sum(window.redis.values())}\n")
    for command, n in window.redis.most_common(20):
        text.write(f"  {n:6d}  {command}\n")
    text.write(f"\nbusy samples (every thread, {window.sampled} ticks of 1 ms), top 25 stacks:\n")
    for stack, n in window.samples.most_common(25):
        text.write(f"  {n:6d}  {stack}\n")
    text.write("\ncProfile (loop thread + worker-thread jobs, CPU time), by cumulative time:\n")
    stats.stream = text  # type: ignore[attr-defined]
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)
    if window.pool_profile is not None and window.pool_profile.getstats():
        pool_stats = pstats.Stats(window.pool_profile)
        pool_stats.dump_stats(f"{path}-pool.prof")
        text.write("\ncProfile of the MCP session pool's loop thread (the SDK client; CPU time), by cumulative time:\n")
        pool_stats.stream = text  # type: ignore[attr-defined]
        pool_stats.sort_stats("cumulative").print_stats(50)
        pool_stats.sort_stats("tottime").print_stats(25)
    with open(f"{path}.txt", "w") as out:
        out.write(text.getvalue())
    return path


_install_counters()
threading.Thread(target=_sampler, daemon=True, name="bench-sampler").start()


async def application(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == "/__bench_profile__":
        label = json.loads(await read_body(receive) or b"{}").get("label")
        if label:
            _start(str(label))
            written = ""
        else:
            written = _stop()
        await send_json(send, {"written": written})
        return
    await toolhub(scope, receive, send)
