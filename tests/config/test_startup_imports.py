"""What a process start does not import (issue 35: every process start, and every child process the tests start, pays
for its imports): DRF's serializers wait for the first API request, scim2-models for the first SCIM request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.waiting import PROCESS_BOUND_S

# A fresh interpreter: the test process imported all of these long before (other tests, their helpers).
SCRIPT = """
import sys
import django
django.setup()
# DRF's serializers pulled in django.contrib.postgres and psycopg (psycopg itself is loaded by a PostgreSQL database).
print("after setup:", "rest_framework.response" in sys.modules, "rest_framework.serializers" in sys.modules)
from django.test import Client
from django.urls import resolve
resolve("/scim/v2/Users")  # the URL conf is loaded
print("after the URL conf:", "scim2_models" in sys.modules, "identity_app.scim.views" in sys.modules)
response = Client(HTTP_HOST="localhost").get("/scim/v2/Users")  # no bearer token: answered before any database read
print("after a SCIM request:", "scim2_models" in sys.modules, response.status_code, response["Content-Type"],
      response["WWW-Authenticate"])
response = Client(HTTP_HOST="localhost").get("/api/v1/tools/")  # the API's error envelope (core.exceptions)
print("an API request:", response.status_code, sorted(response.json()["error"]))
"""


def test_setup_and_the_url_conf_leave_drf_serializers_and_scim2_models_to_their_first_request() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                          timeout=PROCESS_BOUND_S, cwd=str(Path(__file__).resolve().parents[2]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "after setup: False False",
        "after the URL conf: False False",
        'after a SCIM request: True 401 application/scim+json Bearer realm="scim"',
        "an API request: 401 ['code', 'details', 'message']",
    ]
