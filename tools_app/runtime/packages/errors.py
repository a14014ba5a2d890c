"""Typed errors of the package store: each names the package, the registry and what to do."""

from __future__ import annotations

from core.codes import ApiCode, ResultCode
from tools_app.runtime.errors import RuntimeToolError


class PackageError(RuntimeToolError):
    """A package a LOCAL server runs from could not be made ready."""

    code = ApiCode.PACKAGE_INSTALL_FAILED
    result_code = ResultCode.EXECUTION_ERROR


class PackageNotInstallable(PackageError):
    """A package runner command Toolhub cannot install from a registry (a git URL, a local path, `npx -c`)."""

    code = ApiCode.PACKAGE_NOT_INSTALLABLE
    result_code = ResultCode.INVALID_PARAMS


class PackageNotFound(PackageError):
    """The registry has no such package, or no such version of it."""

    code = ApiCode.PACKAGE_NOT_FOUND
    result_code = ResultCode.INVALID_PARAMS


class PackageRegistryRefused(PackageError):
    """The registry the install would use is not one the operator allows (TOOLHUB_PACKAGE_REGISTRY_HOSTS)."""

    code = ApiCode.PACKAGE_REGISTRY_REFUSED
    result_code = ResultCode.REFUSED


class PackageManagerMissing(PackageError):
    """The program an install or the server needs (node, npm) is not installed on this host."""

    code = ApiCode.PACKAGE_MANAGER_MISSING


class PackageInstallFailed(PackageError):
    """The install ran and failed (its output's tail is in the message)."""

    code = ApiCode.PACKAGE_INSTALL_FAILED


class PackageInstalling(PackageError):
    """An install of the package is still running after the wait allowed for it."""

    code = ApiCode.PACKAGE_INSTALLING
    result_code = ResultCode.TIMEOUT


class PackageStoreUnavailable(PackageError):
    """The process that starts the server (a runner) does not see the installed package at the path the web process
    resolved: the package store is not shared with it (TOOLHUB_PACKAGE_STORE)."""

    code = ApiCode.PACKAGE_STORE_UNAVAILABLE
