"""OpenTelemetry traces, exported over OTLP/HTTP when an endpoint is configured; without one, nothing is set up.

`configure()` runs once per process from the entry points (config.wsgi, config.asgi, config.celery) and reads
the standard variables: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL) or OTEL_EXPORTER_OTLP_ENDPOINT (a
base URL; /v1/traces is added), OTEL_SERVICE_NAME (default `toolhub`). Without either endpoint the SDK is
never imported, `span()` hands back one shared no-op context and the HTTP middleware removes itself, so
tracing that is off costs a global lookup per hook.

Django-free (runtime packages use `span` around the model call).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

_NOOP: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
_tracer: Any = None
_provider: Any = None


def enabled() -> bool:
    return _tracer is not None


def endpoint_from_env(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    full = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if full:
        return full
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return f"{base.rstrip('/')}/v1/traces" if base else ""


def configure(endpoint: str | None = None, *, service_name: str | None = None, install_global: bool = True,
              exporter: Any = None) -> bool:
    """Start exporting spans to `endpoint` (default: from the environment); False when there is none.

    `install_global` also makes this the process's global provider (once per process), so libraries that
    trace through the OpenTelemetry API (the MCP SDK does) join the same traces. `exporter` replaces the
    OTLP exporter (tests).
    """
    global _tracer, _provider
    url = endpoint if endpoint is not None else endpoint_from_env()
    if not url and exporter is None:
        return False
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=url)
    name = service_name or os.environ.get("OTEL_SERVICE_NAME", "") or "toolhub"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    if install_global:
        trace.set_tracer_provider(provider)  # the API keeps the first one set; later calls only warn
    shutdown()
    _provider, _tracer = provider, provider.get_tracer("toolhub")
    return True


def shutdown() -> None:
    """Flush and stop the exporter; tracing is off afterwards."""
    global _tracer, _provider
    provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def flush(timeout_ms: int = 5000) -> bool:
    return bool(_provider.force_flush(timeout_ms)) if _provider is not None else True


def span(name: str, attributes: Mapping[str, Any] | None = None, *, kind: str = "internal",
         context: Any = None, current: bool = True) -> contextlib.AbstractContextManager[Any]:
    """A span around a block (the span is what `with` yields), or the shared no-op when tracing is off.

    `current=False` leaves the span out of the context: for a block that yields (a generator may be resumed
    in another thread or context, where the span could not be detached again).
    """
    if _tracer is None:
        return _NOOP
    return _started(name, attributes, kind, context, current)


@contextlib.contextmanager
def _started(name: str, attributes: Mapping[str, Any] | None, kind: str, context: Any,
             current: bool) -> Iterator[Any]:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    kinds = {"server": SpanKind.SERVER, "client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL}
    clean = {k: v for k, v in (attributes or {}).items() if v is not None}
    options = {"context": context, "kind": kinds.get(kind, SpanKind.INTERNAL), "attributes": clean}
    if current:
        with _tracer.start_as_current_span(name, **options) as started:
            yield started
        return
    started = _tracer.start_span(name, **options)
    try:
        yield started
    except BaseException as exc:
        started.record_exception(exc)
        started.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        started.end()


def set_attributes(current: Any, **attributes: Any) -> None:
    """Add attributes to a span from `span()` (nothing when tracing is off)."""
    if current is not None and _tracer is not None:
        current.set_attributes({k: v for k, v in attributes.items() if v is not None})


def rename(current: Any, name: str) -> None:
    """Rename a span from `span()` once its name is known (nothing when tracing is off, or was turned off since
    the span's `with` began: that span is the no-op)."""
    if current is not None and _tracer is not None:
        current.update_name(name)


def current_context() -> Any:
    """The active trace context (to hand to work that runs in another task), None when tracing is off."""
    if _tracer is None:
        return None
    from opentelemetry import context

    return context.get_current()


def extract(headers: Mapping[str, str]) -> Any:
    """The caller's trace context from W3C `traceparent`/`tracestate` headers (None when tracing is off)."""
    if _tracer is None:
        return None
    from opentelemetry.propagate import extract as otel_extract

    return otel_extract({k.lower(): v for k, v in headers.items()})
