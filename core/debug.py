"""Django's debug page (DEBUG, `make run`) and error reports without secrets.

Django's own filter hides settings and variables by *name* (`*KEY*`, `*SECRET*`, ...) and, under DEBUG, nothing
else: a tool's decrypted config, its static headers or an OAuth client's secret sit in local variables named
`spec`, `tool`, `registration` and were shown to whoever hit the error, a plain member included. Here every
frame variable but a number, a boolean or None is shown as its type only, POST values and the query string are
hidden, DEBUG or not. The traceback (files, lines, code) stays: that is what a developer reads the page for.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.views.debug import ExceptionReporter, SafeExceptionReporterFilter

SHOWN = (bool, int, float, type(None))


class SecretSafeExceptionReporterFilter(SafeExceptionReporterFilter):
    """DEFAULT_EXCEPTION_REPORTER_FILTER: values that may hold a secret are never rendered."""

    def is_active(self, request: HttpRequest | None) -> bool:
        return True  # Django's turns itself off under DEBUG, exactly when the page is shown to a browser

    def hidden(self, value: Any) -> str:
        return f"{self.cleansed_substitute} ({type(value).__name__})"

    def get_traceback_frame_variables(self, request: HttpRequest | None, tb_frame: Any) -> Any:
        variables = super().get_traceback_frame_variables(request, tb_frame)
        return [(name, value if isinstance(value, SHOWN) else self.hidden(value)) for name, value in variables]

    def get_post_parameters(self, request: HttpRequest | None) -> Any:
        if request is None:
            return {}
        cleansed = request.POST.copy()
        for key in cleansed:
            cleansed[key] = self.cleansed_substitute
        return cleansed

    def get_safe_request_meta(self, request: HttpRequest) -> dict[str, Any]:
        meta = super().get_safe_request_meta(request)
        if meta.get("QUERY_STRING"):
            meta["QUERY_STRING"] = self.cleansed_substitute  # an OAuth callback's code, a key in a link
        return meta


class SecretSafeExceptionReporter(ExceptionReporter):
    """DEFAULT_EXCEPTION_REPORTER: the request's query (GET items, the URL's query string) is not rendered either;
    Django shows those unfiltered."""

    def get_traceback_data(self) -> dict[str, Any]:
        data = super().get_traceback_data()
        substitute = SafeExceptionReporterFilter.cleansed_substitute
        if data.get("request_GET_items"):
            data["request_GET_items"] = [(key, substitute) for key, _ in data["request_GET_items"]]
        if self.request is not None:
            data["request_insecure_uri"] = self.request.path  # without the query string
        return data
