"""The SCIM views (and scim2-models, ~0.6 s of CPU to import) load at the first SCIM request, not with the URL conf."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.waiting import PROCESS_BOUND_S

# A fresh interpreter: the test process has imported scim2-models long before (its own SCIM tests, their helpers).
SCRIPT = """
import sys
import django
django.setup()
from django.test import Client
from django.urls import resolve
resolve("/scim/v2/Users")  # the URL conf is loaded
print("after the URL conf:", "scim2_models" in sys.modules, "identity_app.scim.views" in sys.modules)
response = Client(HTTP_HOST="localhost").get("/scim/v2/Users")  # no bearer token: answered before any database read
print("after a request:", "scim2_models" in sys.modules, response.status_code, response["Content-Type"],
      response["WWW-Authenticate"])
"""


def test_the_url_conf_loads_without_scim2_models_and_the_first_request_imports_it() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                          timeout=PROCESS_BOUND_S, cwd=str(Path(__file__).resolve().parents[2]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "after the URL conf: False False",
        'after a request: True 401 application/scim+json Bearer realm="scim"',
    ]
