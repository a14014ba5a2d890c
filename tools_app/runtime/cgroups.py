"""A memory cap per tenant over all of its sandboxed processes together: one cgroup per tenant, where the host lets us.

rlimits cap each process; a tenant could still start many servers or commands that each stay under the cap. A
cgroup counts them together. Toolhub makes `<root>/toolhub-tenant-<key>` under a cgroup it may write (the operator's
`TOOLHUB_SANDBOX_CGROUP`, else its own memory cgroup on a cgroup v1 host), sets the limit, and starts each sandbox
inside it (a shell joins the cgroup, then execs bubblewrap), so every process of the sandbox is counted. On a host where no such cgroup
is writable the cap is simply not applied: `memory_cgroup()` answers None and callers say so in their status.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

V1_MEMORY = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class TenantCgroup:
    """One tenant's cgroup: `limit_file` holds the byte cap, `procs` takes pids."""

    path: Path
    version: int

    @property
    def limit_file(self) -> Path:
        return self.path / ("memory.limit_in_bytes" if self.version == 1 else "memory.max")

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"


def _own_v1_memory_cgroup() -> Path | None:
    """This process's memory cgroup on a cgroup v1 host (`N:memory:/path` in /proc/self/cgroup)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            found = V1_MEMORY / path.lstrip("/")
            return found if found.is_dir() else None
    return None


def cgroup_root(configured: str | None) -> tuple[Path, int] | None:
    """Where tenant cgroups go and the cgroup version, or None when nothing writable is there."""
    if configured:
        root = Path(configured)
        version = 1 if (root / "memory.limit_in_bytes").exists() else 2
    else:
        own = _own_v1_memory_cgroup()
        if own is None:
            return None  # cgroup v2 needs a delegated subtree: only where the operator names one
        root, version = own, 1
    return (root, version) if root.is_dir() and os.access(root, os.W_OK) else None


def memory_cgroup(tenant_key: str, limit_bytes: int, *, configured: str | None = None) -> TenantCgroup | None:
    """The tenant's cgroup with its memory cap set (made on first use), or None where cgroups are not available."""
    if limit_bytes <= 0:
        return None
    found = cgroup_root(configured)
    if found is None:
        return None
    root, version = found
    group = TenantCgroup(path=root / f"toolhub-tenant-{tenant_key}", version=version)
    try:
        group.path.mkdir(exist_ok=True)
        group.limit_file.write_text(str(int(limit_bytes)))
        if version == 1:
            # Without swap accounting the cap alone lets a tenant page out instead of being stopped.
            swap = group.path / "memory.memsw.limit_in_bytes"
            if swap.exists():
                try:
                    swap.write_text(str(int(limit_bytes)))
                except OSError:
                    pass
    except OSError:
        return None
    return group
