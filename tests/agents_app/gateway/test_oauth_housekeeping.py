"""Abandoned dynamically registered clients are pruned; clients a member authorized are kept."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from agents_app.tasks import prune_oauth_clients
from tests.agents_app.gateway.oauth_support import register, tokens_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_clients_that_never_got_a_grant_are_pruned_after_a_day(served: Any, setup: Any) -> None:
    abandoned = register(served.base_url).json()["client_id"]
    used, issued = tokens_for(served, setup)
    fresh = register(served.base_url).json()["client_id"]
    Application.objects.exclude(client_id=fresh).update(created=timezone.now() - timedelta(days=2))

    assert prune_oauth_clients() == 1
    assert set(Application.objects.values_list("client_id", flat=True)) == {used, fresh}
    assert not AccessToken.objects.filter(application__client_id=abandoned).exists()
    assert AccessToken.objects.filter(application__client_id=used, user=setup.api.user).exists()
    assert issued["access_token"]
