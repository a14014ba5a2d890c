"""Process groups: a group whose only member is an exited, unreaped child counts as gone."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.waiting import wait_until
from tools_app.runtime.procenv import end_processes, group_running, identities_of, kill_process_group


def test_a_group_of_a_zombie_is_not_running_though_the_kernel_still_knows_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    try:
        assert wait_until(lambda: _zombie(child.pid))  # exited, and we have not waited for it
        os.killpg(child.pid, 0)  # the kernel still has the group: this is what made every stop wait its timeout
        assert not group_running(child.pid)
        kill_process_group(child.pid, term_wait_s=0.5)
        assert _zombie(child.pid)  # nothing reaped it behind Popen's back
    finally:
        assert child.wait(timeout=5) == 0  # its real exit status is still ours to read


def test_a_group_with_a_live_member_is_running_until_killed() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        assert group_running(child.pid)
        kill_process_group(child.pid, term_wait_s=5)
        assert not group_running(child.pid)
    finally:
        child.wait(timeout=5)


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def test_end_processes_kills_what_is_out_of_the_groups_reach_and_waits_until_it_is_gone() -> None:
    """A process in a session of its own (as bwrap --new-session puts the sandboxed command) survives a kill of
    its starter's group; end_processes ends it by identity and returns only once it has exited."""
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        tree = identities_of({other.pid})
        assert len(tree) == 1
        assert end_processes(tree) == set()
        assert other.wait(timeout=1) == -9
        assert end_processes(tree) == set()  # gone already: nothing is signalled (a reused pid would differ)
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
