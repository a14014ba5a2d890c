"""Small things on the agents' admin pages: help texts keep their placeholders, the ChatModel URL box is wide."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tenants_app.models import Role
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(tenant: Any) -> Client:
    user = UserFactory(username="ida", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    client = Client()
    client.force_login(user)
    return client


def test_intent_help_text_shows_the_ref_placeholder(staff: Client) -> None:
    html = staff.get("/admin/agents_app/intentnode/add/").content.decode()
    # Shown as text (<tool>__<function>), never eaten as an HTML tag ("One __ per line").
    assert "<code>&lt;tool&gt;__&lt;function&gt;</code>" in html
    assert "<tool>" not in html and " __ " not in html


def test_agent_help_text_shows_the_ref_placeholder(staff: Client) -> None:
    html = staff.get("/admin/agents_app/agent/add/").content.decode()
    assert "<code>&lt;tool&gt;__&lt;function&gt;</code>" in html and "<tool>" not in html


def test_chat_model_base_url_box_is_wide(staff: Client) -> None:
    html = staff.get("/admin/agents_app/chatmodel/add/").content.decode()
    assert '<input type="url" name="base_url" size="70"' in html
