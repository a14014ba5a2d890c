"""Install the packages LOCAL servers run from, once, outside the sandbox; run them from the store, read-only.

A LOCAL tool whose command is a package runner (`npx -y pkg`, `uvx pkg`, `pipx run pkg`, `npm exec`, `bunx`) gets a
ToolPackage link when it is saved (and at the latest when it first runs): the ref is resolved to one version at its
registry, that version installed into the store by whoever claims its PackageInstall row first (the install task,
or a Test or call that got there before it), and every other caller waits for the claim instead of timing out.
`runnable_spec` then replaces the runner by the installed entry point and mounts that one folder read-only.
"""

from __future__ import annotations

import dataclasses
import os
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import hotcache
from tools_app.models import Tool, ToolType
from tools_app.packages.models import InstallStatus, PackageInstall, ToolPackage
from tools_app.runtime.mcp.spec import LocalSpec, ServerSpec
from tools_app.runtime.packages import refs, registry, store
from tools_app.runtime.packages.errors import (
    PackageError,
    PackageInstallFailed,
    PackageInstalling,
    PackageManagerMissing,
    PackageNotFound,
    PackageNotInstallable,
    PackageRegistryRefused,
)
from tools_app.runtime.packages.refs import PackageRef

ERRORS: dict[str, type[PackageError]] = {
    cls.code: cls for cls in (PackageError, PackageNotInstallable, PackageNotFound, PackageRegistryRefused,
                              PackageManagerMissing, PackageInstallFailed, PackageInstalling)
}
WAIT_POLL_S = 0.25


def ref_of(tool: Tool) -> PackageRef | None:
    """The package a LOCAL tool's command runs, or None (not LOCAL, not a package runner, or packages off)."""
    if tool.type != ToolType.LOCAL or not settings.TOOLHUB_PACKAGES:
        return None
    config = tool.config or {}
    return refs.parse(str(config.get("command") or ""), [str(a) for a in config.get("args") or []])


def registries() -> registry.Registries:
    return registry.configured(list(settings.TOOLHUB_PACKAGE_REGISTRY_HOSTS))


def tool_package_prepare(*, tool_id: int) -> ToolPackage | None:
    """Resolve the tool's package, install that version (or wait for whoever is installing it) and make it the
    tool's current one. Idempotent. Raises the typed PackageError saying why it could not, recorded for the tool."""
    tool = Tool.objects.filter(pk=tool_id).first()
    if tool is None:
        return None
    ref = ref_of(tool)
    if ref is None:
        ToolPackage.objects.filter(tool_id=tool_id).delete()
        return None
    link, _ = ToolPackage.objects.get_or_create(tool=tool, defaults={"manager": ref.manager, "name": ref.name,
                                                                     "spec": ref.spec})
    link.manager, link.name, link.spec = ref.manager, ref.name, ref.spec
    try:
        version = _stored_pin(ref) or registry.resolve(ref, registries(),
                                                       timeout_s=float(settings.TOOLHUB_PACKAGE_RESOLVE_TIMEOUT_S))
    except PackageError as exc:
        link.error_code, link.error, link.target = str(exc.code), exc.message, None
        link.save()
        raise
    install, claimed = _claim(ref, version)
    link.target, link.error_code, link.error = install, "", ""
    link.save()
    if claimed:
        install = _install(ref, install)
    else:
        install = _wait(install, ref)
    if install.status != InstallStatus.INSTALLED:
        raise _error_of(install)
    _switch(link, install)
    return link


def _stored_pin(ref: PackageRef) -> str:
    """The exact version `ref` pins when the store already holds it (no registry asked: a pre-warmed, air-gapped
    store serves pinned tools offline); "" otherwise."""
    version = refs.exact_version(ref)
    if version and store.installed(settings.TOOLHUB_PACKAGE_STORE, ref.manager, ref.name, version) is not None:
        return version
    return ""


def _claim(ref: PackageRef, version: str) -> tuple[PackageInstall, bool]:
    """The install row of ref@version, and whether this caller must run the install (nobody else is)."""
    timeout = timedelta(seconds=float(settings.TOOLHUB_PACKAGE_INSTALL_TIMEOUT_S))
    retry = timedelta(seconds=float(settings.TOOLHUB_PACKAGE_RETRY_S))
    now = timezone.now()
    for _attempt in range(2):
        try:
            with transaction.atomic():
                row, created = PackageInstall.objects.select_for_update().get_or_create(
                    manager=ref.manager, name=ref.name, version=version,
                    defaults={"status": InstallStatus.INSTALLING, "started_at": now})
                if created:
                    return row, True
                there = store.installed(settings.TOOLHUB_PACKAGE_STORE, ref.manager, ref.name, version)
                if row.status == InstallStatus.INSTALLED and there is not None:
                    return row, False
                busy = row.status == InstallStatus.INSTALLING and row.started_at and row.started_at > now - timeout
                if busy:
                    return row, False
                if row.status == InstallStatus.FAILED and row.updated_at > now - retry:
                    return row, False  # failed a moment ago: the same error, not a second long install
                row.status, row.started_at, row.error_code, row.error = InstallStatus.INSTALLING, now, "", ""
                row.save()
                return row, True
        except IntegrityError:
            continue  # another process created the row first: read it
    raise PackageInstalling(f"could not claim the install of {ref.name}@{version}; try again",
                            details={"package": ref.name, "version": version})


def _install(ref: PackageRef, row: PackageInstall) -> PackageInstall:
    """Run the claimed install (outside any transaction: it takes seconds to minutes) and record the outcome."""
    try:
        done = store.install(ref, row.version, store=settings.TOOLHUB_PACKAGE_STORE, registries=registries(),
                             timeout_s=float(settings.TOOLHUB_PACKAGE_INSTALL_TIMEOUT_S))
    except PackageError as exc:
        row.status, row.error_code, row.error = InstallStatus.FAILED, str(exc.code), exc.message[:4000]
        row.save(update_fields=["status", "error_code", "error", "updated_at"])
        return row
    row.status, row.path, row.size, row.digest = InstallStatus.INSTALLED, done.path, done.size, done.digest
    row.installed_at, row.error_code, row.error = timezone.now(), "", ""
    row.save()
    return row


def _wait(row: PackageInstall, ref: PackageRef) -> PackageInstall:
    """Wait for another caller's install of the row to finish (Test and calls wait rather than time out)."""
    deadline = time.monotonic() + float(settings.TOOLHUB_PACKAGE_INSTALL_TIMEOUT_S)
    while row.status == InstallStatus.INSTALLING:
        if time.monotonic() > deadline:
            raise PackageInstalling(
                f"{ref.name}@{row.version} is still installing after {settings.TOOLHUB_PACKAGE_INSTALL_TIMEOUT_S} s; "
                "try again shortly", details={"package": ref.name, "version": row.version})
        time.sleep(WAIT_POLL_S)
        row.refresh_from_db()
    return row


def _error_of(row: PackageInstall) -> PackageError:
    cls = ERRORS.get(row.error_code, PackageInstallFailed)
    return cls(row.error or f"installing {row.name}@{row.version} failed",
               details={"package": row.name, "version": row.version})


def _switch(link: ToolPackage, install: PackageInstall) -> None:
    """Make a ready install the tool's current one; the old version's sessions go, and so does the old version
    once no tool runs it."""
    old = link.current_id
    if old == install.pk:
        return
    link.current = install
    link.save(update_fields=["current", "updated_at"])
    # Invoke keeps the tool's pool spec (the store path in it) with its snapshot: a new version drops it.
    tenant_id = link.tool.tenant_id
    transaction.on_commit(lambda: hotcache.bump_tenant(tenant_id))
    if old is not None:
        from tools_app.events import release_after_commit

        release_after_commit(link.tool_id)
        transaction.on_commit(lambda: free_unused([old]))


def free_unused(install_ids: list[int]) -> list[str]:
    """Delete the installs (rows and store folders) no tool's link uses any more; the names freed."""
    freed = []
    for row in PackageInstall.objects.filter(pk__in=install_ids):
        in_use = ToolPackage.objects.filter(current_id=row.pk).exists() or \
            ToolPackage.objects.filter(target_id=row.pk).exists()
        if in_use or row.status == InstallStatus.INSTALLING:
            continue
        store.remove(store.folder(settings.TOOLHUB_PACKAGE_STORE, row.manager, row.name, row.version))
        row.delete()
        freed.append(f"{row.name}@{row.version}")
    return freed


def runnable_spec(tool: Tool, spec: ServerSpec) -> ServerSpec:
    """`spec` with a package runner's command replaced by the installed entry point, the store folder mounted
    read-only in the sandbox. Waits for an install in progress; raises the typed error of one that failed."""
    ref = ref_of(tool)
    if ref is None or not isinstance(spec.target, LocalSpec):
        return spec
    install = _ready_install(tool, ref)
    path = os.path.realpath(install.path)  # bound at its real path: the entry point resolves links into it
    entry = store.entry_point(ref, path)
    target = dataclasses.replace(spec.target, command=entry.command, args=(*entry.args, *ref.args))
    sandbox = target.sandbox
    # Where the server runs: its cwd in the tenant workspace (the sandbox's one writable folder).
    workdir = os.path.realpath(os.path.join(sandbox.workspace, target.cwd or "")) if sandbox is not None \
        else (target.cwd or "")
    state = store.state_env(ref, workdir, dict(target.env)) if workdir else {}
    if state:
        target = dataclasses.replace(target, env=(*target.env, *state.items()))
    if sandbox is not None:
        policy = dataclasses.replace(sandbox.policy, store_paths=(*sandbox.policy.store_paths, path))
        target = dataclasses.replace(target, sandbox=dataclasses.replace(sandbox, policy=policy))
    return dataclasses.replace(spec, target=target)


def _ready_install(tool: Tool, ref: PackageRef) -> PackageInstall:
    link = ToolPackage.objects.select_related("current", "target").filter(tool_id=tool.pk).first()
    same = link is not None and (link.manager, link.name, link.spec) == (ref.manager, ref.name, ref.spec)
    if link is not None and same:
        current, target = link.current, link.target
        if current is not None and current.status == InstallStatus.INSTALLED and current.name == ref.name \
                and (target is None or target.pk == current.pk or target.status != InstallStatus.FAILED):
            return current  # ready; a new version installing beside it takes over when it is done
        if current is None and target is not None and target.status == InstallStatus.INSTALLING:
            target = _wait(target, ref)
            if target.status == InstallStatus.INSTALLED:
                link.refresh_from_db()
                _switch(link, target)
                return target
    # Nothing ready for what the config asks now: install it here (the first Test or call includes the install).
    link = tool_package_prepare(tool_id=tool.pk)
    assert link is not None and link.current is not None
    return link.current


def _not_started(tool: Tool) -> dict[str, Any] | None:
    """A package runner tool whose install has not started: queued (install on save), or left to its first Test."""
    try:
        ref = ref_of(tool)
    except PackageNotInstallable as exc:
        return {"manager": None, "name": None, "version": None, "requested": None, "status": InstallStatus.FAILED.value,
                "size": None, "installed_at": None, "serving": None,
                "error": {"code": str(exc.code), "message": exc.message}}
    if ref is None:
        return None
    status = "installing" if settings.TOOLHUB_PACKAGE_INSTALL_ON_SAVE else "pending"
    return {"manager": ref.manager, "name": ref.name, "version": None, "requested": ref.spec or "latest",
            "status": status, "size": None, "installed_at": None, "error": None, "serving": None}


def package_view(tool: Tool) -> dict[str, Any] | None:
    """The tool detail's `package`: {manager, name, version, status, size, installed_at, error} (None without)."""
    link = getattr(tool, "package_link", None) if tool.type == ToolType.LOCAL else None
    if link is None:
        return _not_started(tool)
    shown = link.target or link.current
    if link.error_code:
        status, error, version = InstallStatus.FAILED, link.error, link.spec or None
    elif shown is None:
        status, error, version = InstallStatus.INSTALLING, "", link.spec or None
    else:
        status, error, version = shown.status, shown.error, shown.version
    installed = link.current if shown is None or shown.status != InstallStatus.INSTALLED else shown
    return {
        "manager": link.manager,
        "name": link.name,
        "version": version,
        "requested": link.spec or "latest",
        "status": str(status),
        "size": installed.size if installed is not None else None,
        "installed_at": installed.installed_at if installed is not None else None,
        "error": {"code": link.error_code or (shown.error_code if shown else ""), "message": error} if error else None,
        "serving": link.current.version if link.current is not None else None,
    }
