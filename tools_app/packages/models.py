"""Installed packages (one per manager, name and version, shared by every tenant) and the tools that run them."""

from __future__ import annotations

from django.db import models

from tools_app.models import Tool


class InstallStatus(models.TextChoices):
    INSTALLING = "installing"
    INSTALLED = "installed"
    FAILED = "failed"


class PackageInstall(models.Model):
    """One package@version in the store. Not a tenant's: one install serves every tool that runs it."""

    manager = models.CharField(max_length=10)  # npm | pypi
    name = models.CharField(max_length=255)
    version = models.CharField(max_length=100)
    status = models.CharField(max_length=12, choices=InstallStatus.choices, default=InstallStatus.INSTALLING)
    path = models.CharField(max_length=1000, blank=True, default="")
    size = models.BigIntegerField(default=0)
    digest = models.CharField(max_length=64, blank=True, default="")
    error_code = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    installed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["manager", "name", "version"], name="package_install_unique")]

    def __str__(self) -> str:
        return f"{self.manager}:{self.name}@{self.version} ({self.status})"


class ToolPackage(models.Model):
    """The package a LOCAL tool's command runs: what the config asks for (`spec`), what serves now (`current`) and
    what is being made ready (`target`: a new version installs beside the current one and replaces it when done)."""

    tool = models.OneToOneField(Tool, on_delete=models.CASCADE, related_name="package_link")
    manager = models.CharField(max_length=10)
    name = models.CharField(max_length=255)
    spec = models.CharField(max_length=200, blank=True, default="")  # as the command wrote it; "" = latest
    current = models.ForeignKey(PackageInstall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    target = models.ForeignKey(PackageInstall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Why the package could not be resolved (no such package or version, a refused registry); "" when it could.
    error_code = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.tool_id}: {self.manager}:{self.name}{'@' + self.spec if self.spec else ''}"
