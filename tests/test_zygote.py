"""The fixture zygote (tests/fixtures/zygote.py): what it starts is a process of its own, as `python script.py` would
start it (the same observations with TOOLHUB_TEST_ZYGOTE=0, plain subprocess.Popen), and none outlives the test
process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fixtures import zygote as zygote_module
from tests.fixtures.mcp_servers import NotOurs, free_port, wait_listening
from tests.fixtures.zygote import start_python, zygote
from tests.waiting import PROCESS_BOUND_S, wait_until

OBSERVE = textwrap.dedent("""\
    import atexit, json, os, signal, sys
    atexit.register(lambda: print("atexit ran", flush=True))
    seen = {
        "name": __name__, "main_file": sys.modules["__main__"].__file__, "argv": sys.argv, "path0": sys.path[0],
        "cwd": os.getcwd(), "env": os.environ.get("ZYGOTE_PROBE"), "stdin": sys.stdin.read(),
        "sid_is_pid": os.getsid(0) == os.getpid(), "pgid_is_pid": os.getpgid(0) == os.getpid(),
        "handlers": {name: repr(signal.getsignal(getattr(signal, name))) for name in ("SIGINT", "SIGTERM", "SIGCHLD", "SIGPIPE")},
        "wakeup_fd": signal.set_wakeup_fd(-1),
        "open_fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd") if int(fd) > 2),
    }
    print(json.dumps(seen))
    raise SystemExit(int(sys.argv[1]))
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _sleeper(folder: Path) -> Path:
    script = folder / "sleeper.py"
    script.write_text("import time\ntime.sleep(600)\n")
    return script


@pytest.fixture(params=["zygote", "popen"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(zygote_module.ENV_SWITCH, "1" if request.param == "zygote" else "0")
    return str(request.param)


def test_a_child_runs_as_a_fresh_python_would(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "scripts"
    folder.mkdir()
    (folder / "observe.py").write_text(OBSERVE)
    monkeypatch.setenv("ZYGOTE_PROBE", "set after the zygote started")
    (tmp_path / "in.txt").write_text("what stdin holds")
    with (tmp_path / "in.txt").open("rb") as stdin, (tmp_path / "out.txt").open("wb") as out:
        proc = start_python("scripts/observe.py", ["7", "--flag"], stdin=stdin, stdout=out, cwd=tmp_path)
        assert proc.wait(PROCESS_BOUND_S) == 7
    first, last = (tmp_path / "out.txt").read_text().splitlines()
    seen = json.loads(first)
    assert last == "atexit ran"
    assert seen["name"] == "__main__"
    assert seen["main_file"] == str(folder / "observe.py")
    assert seen["argv"] == ["scripts/observe.py", "7", "--flag"]
    assert seen["path0"] == str(folder.resolve())
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"] == "set after the zygote started"
    assert seen["stdin"] == "what stdin holds"
    assert seen["sid_is_pid"] and seen["pgid_is_pid"]
    assert seen["handlers"] == {"SIGINT": repr(signal.default_int_handler), "SIGTERM": repr(signal.SIG_DFL),
                                "SIGCHLD": repr(signal.SIG_DFL), "SIGPIPE": repr(signal.SIG_IGN)}
    assert seen["wakeup_fd"] == -1
    assert seen["open_fds"] == [3]  # the listing's own descriptor: nothing of the zygote's left open


def test_a_child_is_its_own_process_killable_and_reaped(mode: str, tmp_path: Path) -> None:
    proc = start_python(_sleeper(tmp_path))
    try:
        assert proc.pid != os.getpid()
        assert os.getsid(proc.pid) == proc.pid
        assert proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(PROCESS_BOUND_S) == -signal.SIGKILL
        assert proc.returncode == -signal.SIGKILL and proc.poll() == -signal.SIGKILL
        assert wait_until(lambda: not Path(f"/proc/{proc.pid}").exists()), "reaped: no zombie left"
        proc.kill()  # as Popen: a signal to an exited process is not sent
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()


def test_the_zygote_forks_its_children(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(zygote_module.ENV_SWITCH, "1")
    proc = start_python(_sleeper(tmp_path))
    try:
        parent = int(Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert parent == zygote().proc.pid != os.getpid()
    finally:
        proc.kill()
        proc.wait(PROCESS_BOUND_S)


def test_a_script_that_crashes_is_reported_as_exited_before_listening(mode: str, tmp_path: Path) -> None:
    crash = tmp_path / "crash.py"
    crash.write_text("raise RuntimeError('no server today')\n")
    with (tmp_path / "err.txt").open("wb") as err:
        proc = start_python(crash, ["--port", "1"], stderr=err)
        with pytest.raises(NotOurs, match="exited with status 1 before it listened"):
            wait_listening(free_port(), proc=proc)
    assert "RuntimeError: no server today" in (tmp_path / "err.txt").read_text()  # the interpreter's own traceback


def test_nothing_outlives_a_test_process_killed_outright(tmp_path: Path) -> None:
    """A test process killed with SIGKILL runs no cleanup: its zygote sees the end of its socket, kills what it
    forked and exits."""
    repo = Path(__file__).resolve().parents[1]
    driver = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""\
            import sys, time
            sys.path.insert(0, {str(repo)!r})
            from tests.fixtures.zygote import start_python, zygote
            child = start_python({str(_sleeper(tmp_path))!r})
            print(zygote().proc.pid, child.pid, flush=True)
            time.sleep(600)
        """)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, zygote_module.ENV_SWITCH: "1"}, start_new_session=True,
    )
    try:
        assert driver.stdout is not None
        zygote_pid, child_pid = (int(pid) for pid in driver.stdout.readline().split())
        assert _alive(zygote_pid) and _alive(child_pid)
        driver.kill()
        driver.wait(PROCESS_BOUND_S)
        assert wait_until(lambda: not _alive(child_pid) and not _alive(zygote_pid)), "a process outlived its test"
    finally:
        if driver.returncode is None:
            driver.kill()
            driver.wait()
