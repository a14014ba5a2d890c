"""The load suite's own PostgreSQL cluster and Redis, so its faults restart nothing anyone else uses.

The machine's PostgreSQL (5432) and Redis (6379) serve other people's tests and CI: the fault phase must never
restart them. The suite runs on a cluster of its own (initdb into var/bench-load/pg with the Debian binaries under
/usr/lib/postgresql/<version>/bin, started on a free loopback port) and a redis-server of its own (a password in a
0600 config file, a free loopback port); "restart PostgreSQL" and "restart Redis" restart those two only.

PostgreSQL refuses to run as root: as root the cluster belongs to the `postgres` system user (initdb and pg_ctl run
under `runuser -u postgres`), otherwise to whoever runs the bench.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from _common import free_port


def pg_bindir() -> Path:
    """The newest Debian PostgreSQL binaries (/usr/lib/postgresql/<version>/bin), or those on PATH."""
    base = Path("/usr/lib/postgresql")
    versions = sorted((p for p in base.iterdir() if (p / "bin" / "initdb").exists()),
                      key=lambda p: int(p.name) if p.name.isdigit() else 0) if base.is_dir() else []
    if versions:
        return versions[-1] / "bin"
    found = shutil.which("initdb")
    if found is None:
        raise SystemExit("no PostgreSQL server binaries (initdb) found: apt-get install postgresql")
    return Path(found).parent


class OwnPostgres:
    """A throwaway PostgreSQL cluster in `folder` on a free loopback port, trust auth for loopback only."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.bin = pg_bindir()
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0

    @property
    def url(self) -> str:
        """Server URL without a database (prod_local appends its database name)."""
        return f"postgres://postgres@127.0.0.1:{self.port}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True)

    def start(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        if self.as_postgres:
            shutil.chown(self.folder, "postgres", "postgres")
        try:
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        except subprocess.CalledProcessError as exc:
            raise SystemExit(f"initdb failed: {exc.stderr.strip()[-500:]}") from None
        with open(self.data / "postgresql.conf", "a") as conf:
            # Loopback only, no Unix socket in a shared folder, sized for a benchmark rather than durability.
            conf.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = ''\n"
                       "max_connections = 200\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                       "shared_buffers = 128MB\n")
        self._pg_ctl("start")

    def _pg_ctl(self, action: str, *extra: str) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "postgres.log"), "-w", "-t", "60",
                      action, *extra)
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"pg_ctl {action} failed: {(exc.stderr or exc.stdout).strip()[-500:]} "
                               f"(see {self.folder / 'postgres.log'})") from None

    def postmaster(self) -> int | None:
        """The running server's pid (the first line of postmaster.pid), None when it is not running."""
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def restart(self) -> None:
        """Fast shutdown (open connections are cut, as in a real restart) and start again."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "stop", "-m", "immediate", check=False)


class OwnRedis:
    """A redis-server of the suite's own: loopback, a free port, a password (in a 0600 config, not on argv)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.password = secrets.token_urlsafe(24)
        self.conf = folder / "redis.conf"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL without a database number (prod_local appends its own)."""
        return f"redis://:{self.password}@127.0.0.1:{self.port}"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(f"bind 127.0.0.1\nport {self.port}\nrequirepass {self.password}\nprotected-mode yes\n"
                             f"save \"\"\nappendonly no\ndir {self.folder}\n")
        self.conf.chmod(0o600)
        self.proc = subprocess.Popen(["redis-server", str(self.conf)], stdout=open(self.folder / "redis.log", "ab"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        if not self._wait(lambda: self.ping(), 30):
            raise SystemExit(f"the bench's redis-server did not start (see {self.folder / 'redis.log'})")

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis.from_url(self.url + "/0", socket_connect_timeout=1, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    @staticmethod
    def _wait(check: object, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if callable(check) and check():
                return True
            time.sleep(0.1)
        return False

    def restart(self) -> None:
        """SHUTDOWN NOSAVE on this server only, then the same server (port, password) again."""
        self.stop()
        time.sleep(1)
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
