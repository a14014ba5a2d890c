"""Packages LOCAL servers come from (npm, PyPI): parse a runner command line, resolve, install into the store.

Django-free. `refs` reads a runner command (`npx -y pkg`, `uvx pkg`, ...) into a PackageRef; `registry` resolves a
ref to one version against the registry an operator allows; `store` installs it outside the sandbox into the
package store (npm with its lockfile's integrity, pip with hashes) and names the installed entry point.
"""
