"""The OS sandbox tenant code runs in (execute_command and LOCAL MCP servers): bubblewrap, read-only system, the
tenant workspace the only writable path.

Inside the sandbox the program runs as an unprivileged uid (nobody for execute_command, the tenant's own uid
for a LOCAL server) with no capabilities, in fresh user, pid, network, ipc, uts and mount namespaces. It sees only the system folders (`/usr`, the `/bin` and `/lib`
links, a few read-only files of `/etc`), a private `/proc`, a minimal `/dev`, a small private `/tmp`
(its HOME) and the tenant workspace, bound read-write at its own path. `--die-with-parent` and the pid
namespace mean every process it starts dies with it. rlimits cap CPU time, address space, file size,
open files and (inside the user namespace) the process count.

Where the sandbox cannot start (bubblewrap missing, user namespaces disabled) the call fails with
SandboxUnavailable saying how to install it; it never falls back to running unsandboxed. Only an
operator's explicit `TOOLHUB_COMMAND_SANDBOX=off` turns it off.
"""

from __future__ import annotations

import os
import resource
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from core.codes import ApiCode, ResultCode
from tools_app.runtime.errors import RuntimeToolError

DEFAULT_BWRAP = "/usr/bin/bwrap"
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`) "
    "and allow unprivileged user namespaces, or, accepting the risk, set TOOLHUB_COMMAND_SANDBOX=off"
)
SYSTEM_PATHS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Only what programs need to start; never all of /etc (it may hold keys and, for a root server, shadow).
ETC_PATHS: tuple[str, ...] = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/java-17-openjdk",
    "/etc/mime.types",
)
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_UID = 65534


class SandboxUnavailable(RuntimeToolError):
    """The command sandbox could not start; the command did not run."""

    code = ApiCode.SANDBOX_UNAVAILABLE
    result_code = ResultCode.EXECUTION_ERROR


@dataclass(frozen=True)
class SandboxPolicy:
    """How execute_command is confined. `enabled=False` only by the operator's explicit setting."""

    enabled: bool = True
    bwrap: str = DEFAULT_BWRAP
    extra_ro_paths: tuple[str, ...] = ()
    address_space_bytes: int = 2 << 30
    file_size_bytes: int = 256 << 20
    max_processes: int = 256
    max_open_files: int = 1024
    tmp_bytes: int = 64 << 20
    # All of a tenant's sandboxed processes together (servers and commands: one cgroup per tenant, where the host
    # has one to give); 0: no total cap. `cgroup_root` names a writable cgroup to make them under (None: detect).
    tenant_memory_bytes: int = 0
    cgroup_root: str | None = None
    ro_paths: tuple[str, ...] = field(default=SYSTEM_PATHS + ETC_PATHS)
    # Package store folders (tools_app.runtime.packages) the server runs from: bound read-only, nothing else added.
    store_paths: tuple[str, ...] = ()

    def search_path(self) -> str:
        """PATH inside the sandbox: the system folders plus `bin/` of each extra read-only path."""
        extra = [str(Path(p) / "bin") for p in self.extra_ro_paths if (Path(p) / "bin").is_dir()]
        return ":".join([*extra, SANDBOX_PATH])

    def mounted(self, path: str) -> bool:
        """Whether `path` (resolved) is visible inside the sandbox."""
        real = Path(os.path.realpath(path))
        for root in (*self.ro_paths, *self.extra_ro_paths, *self.store_paths):
            base = Path(os.path.realpath(root))
            if real == base or real.is_relative_to(base):
                return True
        return False


def check_available(policy: SandboxPolicy) -> str:
    """The bwrap executable, or SandboxUnavailable naming what to install."""
    path = policy.bwrap
    if not os.path.isabs(path):
        found = shutil.which(path)
        path = found or path
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SandboxUnavailable(
            f"execute_command runs only inside the bubblewrap sandbox, and bubblewrap was not found at {path!r}: "
            f"{INSTALL_HINT}",
            details={"bwrap": path, "install": "apt-get install bubblewrap"},
        )
    return path


def bwrap_argv(
    policy: SandboxPolicy,
    *,
    bwrap: str,
    workspace: Path,
    argv: list[str],
    env: Mapping[str, str],
    info_fd: int | None = None,
    uid: int = SANDBOX_UID,
    share_net: bool = False,
    chdir: Path | None = None,
    limits: tuple[str, ...] = (),
    resolv_conf: str | None = None,
) -> list[str]:
    """The full bwrap command line that runs `argv` confined to `workspace` (its cwd unless `chdir` names a folder
    inside it). `share_net` keeps the host's network; `limits` are extra prlimit options set inside; `resolv_conf`
    is shown as /etc/resolv.conf (the `public` network's DNS)."""
    out = [
        bwrap,
        "--unshare-all",  # user, pid, net, ipc, uts, cgroup: no network at all
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        "--uid", str(uid),
        "--gid", str(uid),
        "--hostname", "toolhub-sandbox",
        "--clearenv",
    ]
    if share_net:
        out.append("--share-net")
    for key, value in sorted(env.items()):
        out += ["--setenv", key, value]
    # The sandbox's own /tmp first: a read-only path inside the system temp folder (a checkout or venv under
    # /tmp) is then mounted on top of it instead of being hidden by it.
    out += ["--size", str(policy.tmp_bytes), "--tmpfs", "/tmp"]
    for path in (*policy.ro_paths, *policy.extra_ro_paths):
        if os.path.islink(path) and os.path.dirname(path) == "/":
            out += ["--symlink", os.readlink(path), path]  # merged /usr: /bin -> usr/bin
        elif os.path.exists(path):
            out += ["--ro-bind", path, path]
            real = os.path.realpath(path)
            if real != path:  # a linked folder: programs may name it by either path
                out += ["--ro-bind", real, real]
    for path in policy.store_paths:  # the package store: read-only to every tenant (one install serves them all)
        out += ["--ro-bind", path, path]
    if resolv_conf is not None:
        out += ["--ro-bind", resolv_conf, "/etc/resolv.conf"]
    out += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--bind", str(workspace), str(workspace),
        "--remount-ro", "/",  # the sandbox's own root tmpfs; /tmp and the workspace stay writable
        "--chdir", str(chdir or workspace),
    ]
    if info_fd is not None:
        out += ["--info-fd", str(info_fd)]
    prlimit = "/usr/bin/prlimit"
    if os.path.exists(prlimit) and policy.mounted(prlimit):
        # Set inside the new user namespace, the process cap counts only the sandbox's own processes.
        n = policy.max_processes
        out += ["--", prlimit, f"--nproc={n}:{n}", *limits, "--"]
    elif limits:
        raise SandboxUnavailable(f"the sandbox needs {prlimit} (util-linux) to set its limits", details={})
    else:
        out += ["--"]
    return out + argv


def prlimit_options(policy: SandboxPolicy) -> tuple[str, ...]:
    """The per-process limits a long-lived server gets (no CPU-time cap: it runs for hours), as prlimit options.

    An address-space cap only where one is set: Node reserves ~10 GiB of address space per WebAssembly memory (its
    fetch client uses one), so real memory is capped per tenant by a cgroup instead."""
    address_space = (f"--as={policy.address_space_bytes}",) if policy.address_space_bytes > 0 else ()
    return (*address_space, f"--fsize={policy.file_size_bytes}", f"--nofile={policy.max_open_files}", "--core=0")


def sandbox_env(policy: SandboxPolicy, extra: Mapping[str, str]) -> dict[str, str]:
    """The whole environment inside the sandbox: nothing of the server's, plus `extra`."""
    env = {
        "PATH": policy.search_path(),
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "USER": "nobody",
        "LOGNAME": "nobody",
    }
    env.update(extra)
    return env


def limits_preexec(policy: SandboxPolicy, cpu_s: float, cgroup_procs: Path | None = None) -> Callable[[], None]:
    """A preexec_fn setting per-process rlimits on bwrap and so on everything it starts, and joining the tenant's
    memory cgroup (`cgroup_procs`) before bwrap runs, so every process of the sandbox counts toward it."""
    cpu = max(1, int(cpu_s) + 1)
    limits = (
        (resource.RLIMIT_CPU, cpu, cpu + 2),
        (resource.RLIMIT_AS, policy.address_space_bytes, policy.address_space_bytes),
        (resource.RLIMIT_FSIZE, policy.file_size_bytes, policy.file_size_bytes),
        (resource.RLIMIT_NOFILE, policy.max_open_files, policy.max_open_files),
        (resource.RLIMIT_CORE, 0, 0),
    )

    def apply() -> None:
        if cgroup_procs is not None:
            with open(cgroup_procs, "w") as procs:
                procs.write(str(os.getpid()))
        for which, soft, hard in limits:
            _, current_hard = resource.getrlimit(which)
            if current_hard != resource.RLIM_INFINITY:
                hard = min(hard, current_hard)
                soft = min(soft, hard)
            resource.setrlimit(which, (soft, hard))

    return apply


@dataclass(frozen=True)
class ServerSandbox:
    """How one tenant's LOCAL MCP server is confined; built from the settings and the tenant's policy."""

    policy: SandboxPolicy
    tenant_key: str
    workspace: str  # the tenant's workspace: the server's cwd (or a folder in it) and its only writable path
    uid: int  # the tenant's own uid inside the sandbox
    share_net: bool = False  # the tenant policy's network `host`: the host's own network, loopback included
    public_net: bool = False  # the tenant policy's network `public`: the internet only (runtime/netjail.py)

    def chdir(self, cwd: str | None) -> Path:
        """The server's working directory: `cwd` resolved inside the workspace (relative paths from it)."""
        root = Path(os.path.realpath(self.workspace))
        if not cwd:
            return root
        path = Path(os.path.realpath(root / cwd))  # an absolute cwd replaces root in the join
        if path != root and not path.is_relative_to(root):
            raise SandboxPathRefused(
                f"working directory {cwd!r} is outside the tenant workspace; a LOCAL server may only run inside it "
                "(give a folder relative to the workspace)",
                details={"cwd": cwd},
            )
        return path

    def visible(self, path: str) -> bool:
        """Whether `path` (resolved) can be seen inside the sandbox: mounted read-only, or in the workspace."""
        real = Path(os.path.realpath(path))
        root = Path(os.path.realpath(self.workspace))
        return self.policy.mounted(path) or real == root or real.is_relative_to(root)


class SandboxPathRefused(RuntimeToolError):
    """A LOCAL server's cwd, root or command names a place outside what its sandbox may see."""

    code = ApiCode.SANDBOX_PATH_REFUSED
    result_code = ResultCode.INVALID_PARAMS
