"""Demo data of the agents app for `make run`: an inventory assistant on the demo inventory tool."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from agents_app.models import Agent, ChatModel
from tenants_app.models import Tenant
from tools_app.models import Tool

AGENT_NAME = "inventory-assistant"
RECORDS_AGENT_NAME = "records-analyst"


def seed_agents(tenant: Tenant, user: Any) -> list[str]:
    """Create the demo agent when the demo inventory tool exists; keep it when it already does."""
    from agents_app.services import AgentInput, ToolLink, agent_create

    tool = Tool.objects.filter(tenant=tenant, name="inventory").first()
    if tool is None:
        return []
    agent = Agent.objects.filter(tenant=tenant, name=AGENT_NAME).first()
    if agent is None:
        model = ChatModel.objects.filter(tenant=tenant).order_by("pk").first()
        agent = agent_create(
            tenant=tenant,
            actor=user,
            data=AgentInput(
                name=AGENT_NAME,
                description="Answers stock questions with the inventory demo tool.",
                system_prompt="You answer questions about stock levels. Use the inventory tool; never guess.",
                model=model.pk if model is not None else None,
                tools=[ToolLink(tool=tool.pk)],
            ),
        )
    using = agent.model.name if agent.model is not None else (
        "the demo model" if settings.TOOLHUB_DEMO_MODEL_URL else "no model yet (set one in the admin)")
    return [f"  Demo agent: '{AGENT_NAME}' (id {agent.pk}) using {using} — open /playground/ and ask about DEMO-001"]


def seed_records_agent(tenant: Tenant, user: Any) -> list[str]:
    """An agent on the record tools (read side) and show_data, for the demo's customers, products and orders."""
    from agents_app.services import AgentInput, ToolLink, agent_create

    tools = list(Tool.objects.filter(tenant=tenant, name__in=["query_records", "read_record", "show_data"]))
    if not tools:
        return []
    agent = Agent.objects.filter(tenant=tenant, name=RECORDS_AGENT_NAME).first()
    if agent is None:
        model = ChatModel.objects.filter(tenant=tenant).order_by("pk").first()
        agent = agent_create(
            tenant=tenant,
            actor=user,
            data=AgentInput(
                name=RECORDS_AGENT_NAME,
                description="Answers questions about customers, products and orders, with charts.",
                system_prompt="You answer questions about the shop's records. Query them; show charts with "
                              "show_data rather than markdown tables.",
                model=model.pk if model is not None else None,
                tools=[ToolLink(tool=t.pk) for t in tools],
            ),
        )
    return [f"  Demo agent: '{RECORDS_AGENT_NAME}' (id {agent.pk}) — ask it for a chart of orders by status"]
