"""URL resolution remembered per path: the same path always resolves to the same view and arguments.

Django walks the URLconf's nested includes with a regex per pattern on every request: about 20 pattern matches
and 9 nested resolvers for an API path here, 13% of the request thread's CPU of GET /api/v1/tools/ (cProfile,
bench/load/PROFILE.md). The answer depends only on the resolver (one per URLconf; a changed ROOT_URLCONF or
clear_url_caches() makes a new one, so the old answers are never found again) and the path, so it is kept in a
bounded LRU. Misses (Resolver404) are not kept: a scan of random paths cannot evict the real ones with them, and
a 404 costs what it did. Each hit is a copy with its own argument containers, as a fresh resolve would give.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.urls import ResolverMatch, URLResolver

# Distinct paths remembered (ids in paths make many); an entry is one ResolverMatch, a few hundred bytes.
MAX_PATHS = 4096


@lru_cache(maxsize=MAX_PATHS)
def _resolved(resolver: URLResolver, path: str) -> ResolverMatch:
    return resolver.resolve(path)


def resolve(resolver: URLResolver, path: str) -> ResolverMatch:
    """`resolver.resolve(path)`, from the cache when this path was resolved before."""
    found = _resolved(resolver, path)
    match: Any = ResolverMatch.__new__(ResolverMatch)  # not copy.copy: ResolverMatch refuses to be reduced
    match.__dict__.update(found.__dict__)
    match.args, match.kwargs = tuple(found.args), dict(found.kwargs)
    for name in ("captured_kwargs", "extra_kwargs"):
        held = getattr(found, name)
        setattr(match, name, None if held is None else dict(held))
    return match  # type: ignore[no-any-return]


def clear() -> None:
    _resolved.cache_clear()
