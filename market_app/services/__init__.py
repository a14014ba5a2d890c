"""Market writes: sources, refresh and loading. Each module holds one family; import them from here."""

from market_app.services.kinds import KINDS, InstallKind, install_kind
from market_app.services.load import (
    Loaded,
    UpdatePlan,
    UpdateRow,
    build_config,
    entries_batch_load,
    entry_load,
    tool_market_update,
    tool_market_update_preview,
)
from market_app.services.refresh import (
    RefreshCounts,
    acquire_lease,
    market_policy,
    release_lease,
    source_apply_catalog,
    source_refresh,
)
from market_app.services.sources import (
    SourceInput,
    ensure_can_manage,
    merge_auth_headers,
    source_create,
    source_delete,
    source_update,
)

__all__ = [
    "InstallKind",
    "Loaded",
    "RefreshCounts",
    "SourceInput",
    "UpdatePlan",
    "UpdateRow",
    "acquire_lease",
    "build_config",
    "ensure_can_manage",
    "entries_batch_load",
    "entry_load",
    "install_kind",
    "KINDS",
    "market_policy",
    "merge_auth_headers",
    "release_lease",
    "source_apply_catalog",
    "source_create",
    "source_delete",
    "source_refresh",
    "source_update",
    "tool_market_update",
    "tool_market_update_preview",
]
