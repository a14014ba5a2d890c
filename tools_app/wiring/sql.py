"""The SQL built-ins' database (URL) and the tables a tenant's queries may read."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from tenants_app.models import Tenant
from tools_app.runtime.builtins.sql_demo import demo_url


def sqlite_path(url: str) -> Path:
    """The absolute file of a `sqlite:///...` URL (three or four slashes both mean an absolute path here)."""
    return Path("/" + url.removeprefix("sqlite:").lstrip("/"))


def sql_url() -> str:
    """The SQL built-ins' database: the TOOLHUB_AGENT_SQL_DB alias when configured, else TOOLHUB_AGENT_SQL_URL."""
    db = settings.DATABASES.get(settings.TOOLHUB_AGENT_SQL_DB)
    if not db:
        url = str(settings.TOOLHUB_AGENT_SQL_URL)
        return demo_url(sqlite_path(url)) if url.startswith("sqlite:") else url
    if db["ENGINE"].endswith("sqlite3"):
        return demo_url(Path(db["NAME"]))
    user = db.get("USER") or ""
    auth = f"{user}:{db['PASSWORD']}@" if db.get("PASSWORD") else (f"{user}@" if user else "")
    return f"postgresql://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def sql_tables(tenant: Tenant) -> frozenset[str]:
    tables = tenant.sql_allowed_tables or settings.TOOLHUB_SQL_ALLOWED_TABLES
    return frozenset(str(t) for t in tables if t and t != "*")
