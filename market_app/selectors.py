"""Market reads: a tenant sees the global sources (tenant null) and its own, and only their entries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from core.ids import as_id
from market_app.errors import EntryNotFound, SourceNotFound
from market_app.models import EntryStatus, MarketEntry, MarketSource
from tenants_app.models import Tenant


def _visible(tenant: Tenant | None, prefix: str = "") -> Q:
    """Global rows plus the tenant's own (tenant None: global rows only, the superuser admin's view)."""
    return Q(**{f"{prefix}tenant": tenant}) | Q(**{f"{prefix}tenant__isnull": True})


def source_list(*, tenant: Tenant | None) -> QuerySet[MarketSource]:
    """Global sources plus the tenant's own, with their entry counts (counts are per visible source)."""
    return (
        MarketSource.objects.filter(_visible(tenant))
        .annotate(entry_count=Count("entries", filter=~Q(entries__status=EntryStatus.REMOVED)))
        .order_by("name", "id")
    )


def _as_int(value: Any) -> int | None:
    return as_id(value)


def source_get(*, tenant: Tenant | None, source_id: Any) -> MarketSource:
    """A visible source; SourceNotFound for a missing or foreign one alike."""
    pk = _as_int(source_id)
    source = source_list(tenant=tenant).filter(pk=pk).first() if pk is not None else None
    if source is None:
        raise SourceNotFound()
    return source


@dataclass(frozen=True)
class EntryFilters:
    source: int | None = None
    q: str = ""
    kind: str = ""
    status: str = ""  # "" hides removed entries; "all" shows every status

    @classmethod
    def from_query(cls, params: Any) -> EntryFilters:
        return cls(
            source=_as_int(params.get("source")) if params.get("source") else None,
            q=params.get("q", "").strip(),
            kind=params.get("kind", "").strip().upper(),
            status=params.get("status", "").strip().lower(),
        )

    def apply(self, qs: QuerySet[MarketEntry]) -> QuerySet[MarketEntry]:
        if self.source is not None:
            qs = qs.filter(source_id=self.source)
        if self.q:
            qs = qs.filter(Q(name__icontains=self.q) | Q(title__icontains=self.q) | Q(description__icontains=self.q))
        if self.kind:
            qs = qs.filter(kind=self.kind)
        if self.status == "all":
            return qs
        if self.status:
            return qs.filter(status=self.status)
        return qs.exclude(status=EntryStatus.REMOVED)


def entry_list(*, tenant: Tenant, filters: EntryFilters | None = None) -> QuerySet[MarketEntry]:
    qs = MarketEntry.objects.filter(_visible(tenant, "source__")).select_related("source")
    return (filters or EntryFilters()).apply(qs).order_by("name", "id")


def entry_get(*, tenant: Tenant, entry_id: Any) -> MarketEntry:
    """A visible entry of any status; EntryNotFound for a missing or foreign one alike."""
    pk = _as_int(entry_id)
    entry = (
        MarketEntry.objects.filter(_visible(tenant, "source__"), pk=pk).select_related("source").first()
        if pk is not None else None
    )
    if entry is None:
        raise EntryNotFound()
    return entry


def sources_due(*, now: datetime | None = None) -> list[int]:
    """System read for the beat task: ids of enabled sources never refreshed or whose interval has passed.

    Sources are few (dozens), so the interval arithmetic is done here rather than in portable SQL.
    """
    now = now or timezone.now()
    rows = (
        MarketSource.objects.filter(enabled=True)
        .filter(Q(refreshing_until__isnull=True) | Q(refreshing_until__lt=now))
        .values_list("id", "last_refresh_at", "refresh_interval_min")
        .order_by("id")
    )
    return [
        pk for pk, last, interval in rows
        if last is None or last + timedelta(minutes=interval) <= now
    ]


def sources_overview(*, tenant: Tenant, limit: int = 20) -> list[tuple[MarketSource, int]]:
    """The dashboard's market box: visible sources, each with how many of this tenant's tools loaded from
    it have a newer catalog entry (update available); 2 queries."""
    from django.db.models import F

    from tools_app.models import Tool

    sources = list(source_list(tenant=tenant)[:limit])
    updates = dict(
        Tool.objects.filter(tenant=tenant, market_entry__source__in=sources)
        .exclude(market_entry__status=EntryStatus.REMOVED)
        .exclude(market_hash=F("market_entry__content_hash"))
        .values("market_entry__source").annotate(n=Count("pk")).values_list("market_entry__source", "n")
    )
    return [(source, int(updates.get(source.pk, 0))) for source in sources]
