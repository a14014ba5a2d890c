"""django-oauth-toolkit's own admin pages are not tenant-scoped and show token and code rows: only its clients
(Applications) stay, for superusers; tokens are seen and revoked per agent (the agent's page) and per member."""

from __future__ import annotations

from django.contrib import admin
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

for model in (get_access_token_model(), get_refresh_token_model(), get_grant_model(), get_id_token_model()):
    if admin.site.is_registered(model):
        admin.site.unregister(model)
