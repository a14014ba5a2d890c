"""What a process start does not import (issue 35: every process start, and every child process the tests start, pays
for its imports): DRF's serializers wait for the first API request, scim2-models for the first SCIM request, and the
MCP SDK, redis, numpy and sqlglot for the first thing that needs them (a pool, a Redis store, a route, a query)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.waiting import PROCESS_BOUND_S

# Third-party packages a process's start leaves to their first use: the MCP SDK (mcp_types, its pydantic models), what
# it imports (starlette, uvicorn), redis (which pulls OpenTelemetry's SDK and psutil), numpy (the intent router) and
# sqlglot (the SQL tool's guard).
HEAVY = ("mcp", "mcp_types", "starlette", "uvicorn", "redis", "numpy", "sqlglot")

# A fresh interpreter: the test process imported all of these long before (other tests, their helpers).
SCRIPT = """
import sys
import django
HEAVY = sys.argv[1:]
django.setup()
print("heavy after setup:", sorted(name for name in HEAVY if name in sys.modules))
# DRF's serializers pulled in django.contrib.postgres and psycopg (psycopg itself is loaded by a PostgreSQL database).
print("after setup:", "rest_framework.response" in sys.modules, "rest_framework.serializers" in sys.modules)
from django.test import Client
from django.urls import resolve
resolve("/scim/v2/Users")  # the URL conf is loaded
print("after the URL conf:", "scim2_models" in sys.modules, "identity_app.scim.views" in sys.modules)
print("heavy after the URL conf:", sorted(name for name in HEAVY if name in sys.modules))
response = Client(HTTP_HOST="localhost").get("/scim/v2/Users")  # no bearer token: answered before any database read
print("after a SCIM request:", "scim2_models" in sys.modules, response.status_code, response["Content-Type"],
      response["WWW-Authenticate"])
response = Client(HTTP_HOST="localhost").get("/api/v1/tools/")  # the API's error envelope (core.exceptions)
print("an API request:", response.status_code, sorted(response.json()["error"]))
"""


def test_setup_and_the_url_conf_leave_drf_serializers_scim2_models_and_the_mcp_sdk_to_their_first_use() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, *HEAVY], env=env, capture_output=True, text=True,
                          timeout=PROCESS_BOUND_S, cwd=str(Path(__file__).resolve().parents[2]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "heavy after setup: []",
        "after setup: False False",
        "after the URL conf: False False",
        "heavy after the URL conf: []",
        'after a SCIM request: True 401 application/scim+json Bearer realm="scim"',
        "an API request: 401 ['code', 'details', 'message']",
    ]
