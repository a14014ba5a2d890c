"""`make prod-local`: the production topology on this machine — two web processes, one worker, one beat.

PostgreSQL (127.0.0.1:5432) must already run. Redis is started here, on a free loopback port with a password
(`requirepass`, kept in var/prod-local/redis-password): a deployment's Redis decides where LOCAL calls go and holds
the task queue, so nothing reaches it without the password (TOOLHUB_PROD_LOCAL_REDIS_URL names another Redis instead;
its URL must carry a password, production settings refuse one without). State lives in var/prod-local/ and the
database `toolhub_prod_local`. `--check` starts everything, proves both web processes answer, and stops.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv" / "bin"
STATE = REPO / "var" / "prod-local"
DB_NAME = os.environ.get("TOOLHUB_PROD_LOCAL_DB", "toolhub_prod_local")
PG = os.environ.get("TOOLHUB_PROD_LOCAL_PG", "postgres://postgres@127.0.0.1:5432")
REDIS_DB = int(os.environ.get("TOOLHUB_PROD_LOCAL_REDIS_DB", "5"))


def _persistent(name: str, make: Callable[[], str]) -> str:
    path = STATE / name
    if not path.exists():
        path.write_text(make())
        path.chmod(0o600)
    return path.read_text().strip()


def start_redis() -> tuple[subprocess.Popen[bytes] | None, str]:
    """This topology's Redis: the operator's (TOOLHUB_PROD_LOCAL_REDIS_URL, without a database number), else a
    redis-server started here on loopback with a password; returns (its process or None, its base URL)."""
    given = os.environ.get("TOOLHUB_PROD_LOCAL_REDIS_URL", "").rstrip("/")
    if given:
        return None, given
    import redis

    STATE.mkdir(parents=True, exist_ok=True)
    password = _persistent("redis-password", lambda: secrets.token_urlsafe(32))
    port = _free_port()
    folder = STATE / "redis"
    folder.mkdir(exist_ok=True)
    conf = STATE / "redis.conf"  # the password in a 0600 file, not on a command line every user can read
    conf.write_text(f"bind 127.0.0.1\nport {port}\nrequirepass {password}\nprotected-mode yes\nsave \"\"\n"
                    f"appendonly no\ndir {folder}\n")
    conf.chmod(0o600)
    (STATE / "logs").mkdir(exist_ok=True)
    try:
        proc = subprocess.Popen(["redis-server", str(conf)], stdout=open(STATE / "logs" / "redis.log", "ab"),
                                stderr=subprocess.STDOUT, start_new_session=True)
    except FileNotFoundError:
        raise SystemExit("redis-server was not found: install it (apt-get install redis-server), or name a Redis "
                         "with a password in TOOLHUB_PROD_LOCAL_REDIS_URL=redis://:PASSWORD@HOST:PORT") from None
    url = f"redis://:{password}@127.0.0.1:{port}"
    end = time.monotonic() + 30
    while True:
        try:
            if redis.Redis.from_url(url + "/0", socket_connect_timeout=1).ping():
                return proc, url
        except redis.RedisError:
            if proc.poll() is not None or time.monotonic() > end:
                raise SystemExit(f"redis-server did not start (see {STATE / 'logs' / 'redis.log'})") from None
        time.sleep(0.1)


def environment(ports: tuple[int, int], redis_url: str) -> dict[str, str]:
    from cryptography.fernet import Fernet

    STATE.mkdir(parents=True, exist_ok=True)
    prom = STATE / "prometheus"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DJANGO_SECRET_KEY": _persistent("django-secret-key", lambda: secrets.token_urlsafe(50)),
        "TOOLHUB_SECRET_KEYS": _persistent("fernet-keys", lambda: Fernet.generate_key().decode()),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": f"{PG}/{DB_NAME}",
        "REDIS_URL": f"{redis_url}/{REDIS_DB}",
        "CELERY_BROKER_URL": f"{redis_url}/{REDIS_DB + 1}",
        "CELERY_RESULT_BACKEND": f"{redis_url}/{REDIS_DB + 2}",
        "TOOLHUB_VAR_DIR": str(STATE),
        "TOOLHUB_WORKSPACE_ROOT": str(STATE / "workspace"),
        "PROMETHEUS_MULTIPROC_DIR": str(prom),
        # Local MCP test servers listen on loopback; a real deployment leaves this empty.
        "TOOLHUB_OUTBOUND_ALLOW": os.environ.get("TOOLHUB_OUTBOUND_ALLOW", "127.0.0.0/8,::1"),
        "WEB_CONCURRENCY": os.environ.get("WEB_CONCURRENCY", "1"),
        "TOOLHUB_PROD_LOCAL_PORTS": f"{ports[0]},{ports[1]}",
        # LOCAL servers live in the runner processes started beside the web ones: one per key in the deployment.
        "TOOLHUB_RUNNERS": "redis",
        "TOOLHUB_RUNNER_SECRET": _persistent("runner-secret", lambda: secrets.token_urlsafe(32)),
        # LOCAL servers run sandboxed; the demo inventory server (and what the caller adds) is mounted for them.
        "TOOLHUB_LOCAL_SANDBOX_RO_PATHS": ":".join(
            p for p in (str(REPO / "toolhub_demo" / "inventory_server.py"),
                        os.environ.get("TOOLHUB_LOCAL_SANDBOX_RO_PATHS", "")) if p),
    }
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_database(*, fresh: bool) -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        if fresh:
            conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone():
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def manage(env: dict[str, str], *args: str) -> str:
    out = subprocess.run([str(VENV / "python"), "manage.py", *args], cwd=REPO, env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def seed(env: dict[str, str]) -> tuple[str, str]:
    """A tenant `prod` and an owner `operator`; returns (username, API token)."""
    password = _persistent("operator-password", lambda: secrets.token_urlsafe(12))
    subprocess.run([str(VENV / "python"), "manage.py", "create_tenant", "prod", "--name", "Production"], cwd=REPO,
                   env=env, capture_output=True)  # exists after the first run: that is fine
    subprocess.run([str(VENV / "python"), "manage.py", "add_member", "prod", "operator", "--role", "owner",
                    f"--password={password}"], cwd=REPO, env=env, capture_output=True)  # one argument: it may start with "-"
    return "operator", manage(env, "create_token", "operator")


# How long start-up may take (web processes answering, runners announced): a busy machine boots Django slowly.
START_WAIT_S = float(os.environ.get("TOOLHUB_PROD_LOCAL_START_S", "60"))


def wait_http(url: str, deadline_s: float = START_WAIT_S) -> None:
    end = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status < 500:
                    return
        except Exception as exc:  # noqa: BLE001
            if getattr(exc, "code", 500) < 500:
                return
            if time.monotonic() > end:
                raise SystemExit(f"{url} did not answer within {deadline_s:.0f}s: {exc}") from None
        time.sleep(0.3)


def start(env: dict[str, str], ports: tuple[int, int], runners: int = 1) -> list[subprocess.Popen[bytes]]:
    prom = Path(env["PROMETHEUS_MULTIPROC_DIR"])
    for stale in prom.glob("*.db"):
        stale.unlink()
    prom.mkdir(parents=True, exist_ok=True)
    logs = STATE / "logs"
    logs.mkdir(exist_ok=True)
    commands = {
        f"web-{ports[0]}": [str(VENV / "gunicorn"), "-c", "deploy/gunicorn.conf.py", "--bind", f"127.0.0.1:{ports[0]}"],
        f"web-{ports[1]}": [str(VENV / "gunicorn"), "-c", "deploy/gunicorn.conf.py", "--bind", f"127.0.0.1:{ports[1]}"],
        "worker": [str(VENV / "celery"), "-A", "config", "worker", "--loglevel=INFO", "--concurrency=2",
                   "--hostname", "prod-local@%h"],
        "beat": [str(VENV / "celery"), "-A", "config", "beat", "--loglevel=INFO",
                 f"--schedule={STATE / 'celery-beat-schedule'}"],
    }
    for index in range(runners):
        port = _free_port()
        commands[f"runner-{index + 1}"] = [str(VENV / "python"), "manage.py", "toolhub_runner", "--port", str(port),
                                           "--id", f"prod-local-runner-{index + 1}"]
    procs = []
    for name, cmd in commands.items():
        log = open(logs / f"{name}.log", "ab")
        procs.append(subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    return procs


def argv(proc: subprocess.Popen[bytes]) -> list[str]:
    return [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a)
            for a in (proc.args if isinstance(proc.args, list) else [proc.args])]


def respawn(proc: subprocess.Popen[bytes], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The same command as `proc` (which exited) again, logging where it did."""
    args = argv(proc)
    name = args[args.index("--id") + 1].removeprefix("prod-local-") if "--id" in args else "respawned"
    log = open(STATE / "logs" / f"{name}.log", "ab")
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_runners(env: dict[str, str], count: int, deadline_s: float = START_WAIT_S) -> None:
    """Until `count` runners announce themselves in Redis (calls before that find no runner)."""
    import redis

    client = redis.Redis.from_url(env["REDIS_URL"])
    end = time.monotonic() + deadline_s
    while len([k for k in client.scan_iter(match="toolhub:runner:prod-local-runner-*") if not k.endswith(b":drain")]) < count:
        if time.monotonic() > end:
            raise SystemExit(f"{count} runner(s) did not announce themselves within {deadline_s:.0f}s (see logs)")
        time.sleep(0.3)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    end = time.monotonic() + 30
    for proc in procs:
        try:
            proc.wait(max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ports", default="8001,8002", help="the two web ports")
    parser.add_argument("--check", action="store_true", help="start, check both web processes answer, stop")
    parser.add_argument("--runners", type=int, default=1, help="LOCAL server runner processes to start (default 1)")
    parser.add_argument("--fresh", action="store_true",
                        help="drop and recreate the database and keys first (tests and benchmarks)")
    args = parser.parse_args()
    a, b = (int(p) for p in args.ports.split(","))
    if args.fresh:
        # Rows encrypted under keys of an earlier run (another checkout) would be unreadable.
        for name in ("fernet-keys", "django-secret-key", "operator-password", "runner-secret", "redis-password"):
            (STATE / name).unlink(missing_ok=True)
    redis_proc, redis_url = start_redis()
    own_redis = [redis_proc] if redis_proc is not None else []
    try:
        env = environment((a, b), redis_url)
        ensure_database(fresh=args.fresh)
        manage(env, "migrate", "--noinput")
        manage(env, "collectstatic", "--noinput")
        user, token = seed(env)
        procs = start(env, (a, b), args.runners)
    except BaseException:
        stop(own_redis)
        raise
    stopping = False

    def _stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        for port in (a, b):
            wait_http(f"http://127.0.0.1:{port}/admin/login/")
        wait_runners(env, args.runners)
        print("Toolhub production topology is running (gunicorn+uvicorn workers, Celery worker + beat, PG, Redis).")
        print(f"  Web A:  http://127.0.0.1:{a}/   Web B: http://127.0.0.1:{b}/")
        print(f"  API:    Authorization: Token {token}   (X-Tenant: prod; user {user}, owner)")
        print(f"  Runners: {args.runners} (LOCAL servers, one per key in the deployment)")
        print(f"  Redis:  {redis_url.rsplit('@', 1)[-1]} (requirepass: {STATE / 'redis-password'})")
        print(f"  Logs:   {STATE / 'logs'}   Metrics: http://127.0.0.1:{a}/metrics")
        sys.stdout.flush()
        if args.check:
            return 0
        while not stopping:
            for index, proc in enumerate(procs):
                if proc.poll() is None:
                    continue
                if "toolhub_runner" in argv(proc):
                    # A runner that died is started again, as its service manager would (Restart=always): its
                    # keys moved to the other runners meanwhile and come back on their next call.
                    print(f"runner {proc.pid} exited with {proc.returncode}; starting it again", file=sys.stderr)
                    procs[index] = respawn(proc, env)
                    continue
                print(f"process {proc.pid} exited with {proc.returncode}; stopping", file=sys.stderr)
                return 1
            time.sleep(0.5)
        return 0
    finally:
        stop(procs)
        stop(own_redis)  # last: runners withdraw their announcements on the way out


if __name__ == "__main__":
    sys.exit(main())
