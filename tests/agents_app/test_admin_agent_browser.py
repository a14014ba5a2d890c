"""The agent and intent pages in headless Chromium: the function picker, and refused saves that keep input."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agents_app.intents import routing
from agents_app.models import Agent, IntentNode
from tenants_app.models import Role
from tests.browser import MARKS, dead_links, overflows, shot, signed_in_page
from tests.factories import MembershipFactory, ToolFactory, UserFactory
from tests.fixtures.hashed_embedder import hashed_embedder
from tools_app.models import ToolFunction

pytestmark = MARKS


def tool_with(tenant: Any, name: str, *functions: str) -> Any:
    tool = ToolFactory(tenant=tenant, name=name)
    for fn in functions:
        ToolFunction.objects.create(tool=tool, name=fn, description=f"{fn} of {name}", input_schema={"type": "object"})
    return tool


def test_link_a_tool_with_the_function_picker(live_server: Any, tenant: Any, browser: Any) -> None:
    from playwright.sync_api import expect

    user = UserFactory(username="ada", password="pw-agent-1", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    inventory = tool_with(tenant, "inventory", "get_stock", "list_products", "set_price")
    page = signed_in_page(browser, live_server.url, user)
    page.goto(f"{live_server.url}/admin/agents_app/agent/add/")
    page.fill("#id_name", "stock-helper")
    page.fill("#id_system_prompt", "Answer stock questions briefly.")
    row = page.locator("#agent_tools-0")
    expect(row.locator("div.toolhub-fn-picker")).to_be_empty()
    # The tool is an autocomplete: type, pick, and its functions appear as checkboxes.
    row.locator(".select2-selection").click()
    page.locator(".select2-search__field").fill("inv")
    page.locator(".select2-results__option", has_text="inventory").click()
    picker = row.locator("div.toolhub-fn-picker")
    expect(picker.locator("input[type=checkbox]")).to_have_count(3)
    picker.get_by_label("get_stock").check()
    expect(row.locator("input[value=only]")).to_be_checked()  # ticking one means "only these"
    row.get_by_label("Always ask: every call from this agent waits for a person").check()
    assert not overflows(page)
    row.scroll_into_view_if_needed()
    shot(page, "admin-agent-function-picker", docs="agent-function-picker")
    page.click("input[name=_continue]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    link = Agent.objects.get(name="stock-helper").agent_tools.get()
    assert (link.tool_id, link.allowed_functions, link.requires_approval) == (inventory.pk, ["get_stock"], True)
    expect(page.locator("#agent_tools-0 input[value=get_stock]")).to_be_checked()
    expect(page.locator("#agent_tools-0 input[value=set_price]")).not_to_be_checked()

    # A name the tool does not offer is refused by the service, at the picker, with the ticks kept. (The
    # checkboxes only offer known names: the server drops `set_price` between loading the page and saving.)
    page.locator("#agent_tools-0").get_by_label("set_price").check()
    ToolFunction.objects.filter(tool=inventory, name="set_price").delete()
    page.click("input[name=_continue]")
    error = page.locator("#agent_tools-0 .errorlist")
    expect(error).to_contain_text("offers no function set_price; accepted: get_stock, list_products")
    expect(page.locator("#agent_tools-0 input[value=set_price]")).to_be_checked()
    expect(page.locator("#agent_tools-0 input[value=get_stock]")).to_be_checked()
    shot(page, "admin-agent-function-picker-refused", full_page=False)
    links = list(Agent.objects.get(name="stock-helper").agent_tools.values_list("pk", "allowed_functions"))
    assert links == [(link.pk, ["get_stock"])], (link.pk, links)  # nothing changed
    page.locator("#agent_tools-0").get_by_label("set_price").uncheck()
    page.locator("#agent_tools-0").get_by_label("list_products").check()
    page.click("input[name=_continue]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    link = Agent.objects.get(name="stock-helper").agent_tools.get()  # links are replaced on save
    assert link.allowed_functions == ["get_stock", "list_products"]


@pytest.fixture
def hashed_vectors() -> Iterator[None]:
    """The deterministic embedder (tests/fixtures/hashed_embedder.py) for a saved intent's examples: the page is
    what is tested, not how well the vectors route, and the real model's load is ~3 s of CPU in this process."""
    with hashed_embedder():
        routing.clear_cache()
        yield
        routing.clear_cache()  # no router built on hashed vectors outlives the test


def test_a_refused_intent_save_keeps_what_was_typed(live_server: Any, tenant: Any, browser: Any,
                                                    hashed_vectors: None) -> None:
    from playwright.sync_api import expect

    user = UserFactory(username="ida", password="pw-intent-1", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    weather = tool_with(tenant, "weather", "forecast")
    page = signed_in_page(browser, live_server.url, user)
    page.goto(f"{live_server.url}/admin/agents_app/intentnode/add/")
    expect(page.locator(".field-function_refs .help")).to_contain_text("as <tool>__<function>")
    page.fill("#id_code", "info-weather")
    page.fill("#id_name", "Weather questions")
    page.fill("#id_description", "Forecasts for the next days")
    page.get_by_label("forecast", exact=True).check()
    page.fill("#id_examples-0-text", "will it rain in Paris tomorrow")
    ToolFunction.objects.filter(tool=weather).delete()
    page.click("input[name=_save]")
    # The refusal (here: a function of another tenant would be the same) comes back at the picker; to make one,
    # the tool loses its function between loading the form and saving it.
    errors = page.locator(".field-function_refs .errorlist")
    expect(errors).to_contain_text("unknown function(s) weather__forecast")
    expect(page.locator("#id_name")).to_have_value("Weather questions")
    expect(page.locator("#id_description")).to_have_value("Forecasts for the next days")
    expect(page.locator("#id_examples-0-text")).to_have_value("will it rain in Paris tomorrow")
    expect(page.locator("input[name=function_refs][value=weather__forecast]")).to_be_checked()
    shot(page, "admin-intent-refused-keeps-input")
    ToolFunction.objects.create(tool=weather, name="forecast", input_schema={"type": "object"})
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    node = IntentNode.objects.get(tenant=tenant, code="info-weather")
    assert [e.text for e in node.examples.all()] == ["will it rain in Paris tomorrow"]


def test_a_chat_held_destructive_call_approved_from_the_queue_links_call_conversation_and_agent(
        live_server: Any, tenant: Any, start_llm: Any, browser: Any) -> None:
    """A DESTRUCTIVE call held in a chat: Approve in the queue asks for confirmation first and links the
    conversation, which finishes the run when reopened; the approval then links the call that ran, and that
    call's page links its approval, its conversation and its agent (and the conversation its calls)."""
    from playwright.sync_api import expect

    from tests.agents_app.support import builtin, chat, make_agent, make_model
    from tests.conftest import make_client
    from tests.fixtures.fake_llm import call, text
    from tools_app.models import Approval
    from tools_app.wiring.workspaces import workspace_for

    user = UserFactory(username="oli", password="pw-approve-1", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    api = make_client(user, tenant.slug)
    target = workspace_for(tenant) / "old.log"
    target.write_text("x")
    deleter = builtin(tenant, "delete_file", enable=True)
    llm = start_llm([call("delete_file__delete_file", {"path": "old.log"}), text("Deleted old.log.")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": deleter.pk}], name="janitor")
    paused = chat(api, agent_id, "please delete old.log")
    assert paused["status"] == "paused" and target.exists()
    approval = Approval.objects.get(tenant=tenant)
    conversation_id = approval.tool_call.conversation_id
    assert conversation_id is not None

    page = signed_in_page(browser, live_server.url, user, height=800)
    page.goto(f"{live_server.url}/admin/tools_app/approval/")
    page.locator("#result_list tbody tr", has_text="old.log").locator("button.toolhub-approve").click()
    expect(page.locator("#destructive-warning")).to_contain_text("This call is DESTRUCTIVE")
    assert target.exists()  # nothing decided before the confirmation
    approval.refresh_from_db()
    assert approval.status == "pending"
    page.click("#confirm-batch")
    message = page.locator(".messagelist")
    expect(message).to_contain_text("approved; the conversation continues when it is resumed")
    expect(message.locator("a", has_text="the conversation")).to_have_attribute(
        "href", f"/admin/agents_app/conversation/{conversation_id}/change/")

    page.goto(f"{live_server.url}/playground/?conversation={conversation_id}")  # reopened: the run resumes
    expect(page.locator(".assistant").last).to_have_text("Deleted old.log.")
    assert not target.exists()

    page.goto(f"{live_server.url}/admin/tools_app/approval/{approval.pk}/change/")
    assert dead_links(page) == {}
    page.click("#toolhub-result-call")
    page.wait_for_url("**/admin/tools_app/toolcall/*/change/")
    expect(page.locator("#toolhub-approval")).to_contain_text(f"approval #{approval.pk}")
    expect(page.locator(".field-agent a")).to_have_text("janitor")
    conversation = page.locator(".field-conversation a")
    expect(conversation).to_have_attribute("href", f"/admin/agents_app/conversation/{conversation_id}/change/")
    shot(page, "admin-approval-result-call", full_page=False, docs="approval-result-call")
    expect(page.locator(".field-actor_name")).to_contain_text("oli")
    assert dead_links(page) == {}  # a tenant admin cannot open Django's user admin: no link there
    conversation.click()
    expect(page.locator(".field-agent a")).to_have_text("janitor")
    assert dead_links(page) == {}
    page.click("#toolhub-conversation-calls")
    expect(page.locator("#result_list tbody tr")).to_have_count(2)  # the held call and the one that ran
