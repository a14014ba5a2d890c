"""Open registration leaves clients behind that never finished a sign-in: a client registered (or described by a
metadata document, which is fetched again on its next use) more than a day ago that holds no member's grant or
token is removed (with its registration token), and expired codes with it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)

ABANDONED_AFTER = timedelta(days=1)


@transaction.atomic
def oauth_clients_prune() -> int:
    """Remove abandoned dynamically registered clients and expired authorization codes; the clients removed."""
    Application = get_application_model()
    now = timezone.now()
    get_grant_model().objects.filter(expires__lt=now).delete()

    def held(model: Any) -> Exists:
        return Exists(model.objects.filter(application=OuterRef("pk"), user__isnull=False))

    abandoned = (Application.objects
                 .filter(registration_source__in=[Application.RegistrationSource.DCR, Application.RegistrationSource.CIMD],
                         created__lt=now - ABANDONED_AFTER)
                 .exclude(held(get_access_token_model()))
                 .exclude(held(get_refresh_token_model()))
                 .exclude(held(get_grant_model())))
    count = 0
    for app in abandoned:
        app.delete()  # one by one: the delete signals drop remembered principals
        count += 1
    return count
