"""Expose your own Django models to agents: `records.register(Model, fields=..., search_fields=..., row_filter=...)`.

Registered models are what the record tools (query_records, read_record, create_record, update_record,
delete_record) and show_data reach, as the calling user, within their tenant.
"""

from __future__ import annotations

from tools_app.records.registry import (
    RecordModel,
    RecordRegistryError,
    get_record_model,
    register,
    registered,
    unregister,
)
from tools_app.records.saved import register_query, saved_queries

__all__ = [
    "RecordModel",
    "RecordRegistryError",
    "get_record_model",
    "register",
    "register_query",
    "registered",
    "saved_queries",
    "unregister",
]
