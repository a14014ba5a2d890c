"""`manage.py toolhub_packages install|list`: pre-warm the package store from command lines, and list what it holds.

`install "npx -y @scope/server@1.2.3" "uvx mcp-server-time==2026.10.19"` resolves and installs each runner line as a
LOCAL tool with that command would, without a tool or a tenant (for an image build, or a store copied to an
air-gapped host); `list` prints every installed package@version with its size and the tools that run it.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tools_app.packages.models import PackageInstall, ToolPackage
from tools_app.packages.services import registries
from tools_app.runtime.packages import refs, registry, store
from tools_app.runtime.packages.errors import PackageError


class Command(BaseCommand):
    help = "Install package runner command lines into the package store (install), or list the store (list)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("action", choices=["install", "list"])
        parser.add_argument("lines", nargs="*", help='runner command lines, each quoted: "npx -y @scope/pkg@1.2.3"')

    def handle(self, *args: Any, action: str, lines: list[str], **options: Any) -> None:
        if action == "list":
            self._list()
            return
        if not lines:
            raise CommandError('give one or more runner command lines, e.g. "npx -y @scope/pkg@1.2.3"')
        failed = 0
        for line in lines:
            argv = shlex.split(line)
            try:
                ref = refs.parse(argv[0], argv[1:]) if argv else None
                if ref is None:
                    raise CommandError(f"{line!r} is not a package runner command line (npx, uvx, pipx run, "
                                       "npm exec, bunx)")
                version = refs.exact_version(ref)
                regs = registries()
                if not (version and store.installed(settings.TOOLHUB_PACKAGE_STORE, ref.manager, ref.name, version)):
                    version = registry.resolve(ref, regs, timeout_s=float(settings.TOOLHUB_PACKAGE_RESOLVE_TIMEOUT_S))
                done = store.install(ref, version, store=settings.TOOLHUB_PACKAGE_STORE, registries=regs,
                                     timeout_s=float(settings.TOOLHUB_PACKAGE_INSTALL_TIMEOUT_S))
            except PackageError as exc:
                failed += 1
                self.stderr.write(f"{line}: {exc.code}: {exc.message}")
                continue
            self.stdout.write(f"{ref.manager} {ref.name}@{version}: installed, {done.size / 1e6:.1f} MB in {done.path}")
        if failed:
            raise CommandError(f"{failed} of {len(lines)} could not be installed")

    def _list(self) -> None:
        rows = {(r.manager, r.name, r.version): r for r in PackageInstall.objects.all()}
        users: dict[int, int] = {}
        for link in ToolPackage.objects.exclude(current=None).values_list("current_id", flat=True):
            users[link] = users.get(link, 0) + 1
        root = Path(settings.TOOLHUB_PACKAGE_STORE)
        for manager_dir in sorted(p for p in root.glob("*") if p.is_dir()):
            for version_dir in sorted(manager_dir.glob("*/*")):
                found = store.installed(root, manager_dir.name, version_dir.parent.name.replace("+", "/"),
                                        version_dir.name)
                if found is None:
                    continue
                name = version_dir.parent.name.replace("+", "/")
                row = rows.get((manager_dir.name, name, version_dir.name))
                tools = users.get(row.pk, 0) if row is not None else 0
                self.stdout.write(f"{manager_dir.name} {name}@{version_dir.name}: {found.size / 1e6:.1f} MB, "
                                  f"{tools} tool(s)")
