"""show_data in headless Chromium: the playground draws the chart where the tool was called, text under it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Permission

from tenants_app.models import Role
from tests.agents_app.support import builtin, make_agent, make_model
from tests.browser import MARKS, login, take
from tests.factories import MembershipFactory, UserFactory
from tests.fixtures.fake_llm import calls, text
from toolhub_demo.records import seed_records

pytestmark = MARKS


def test_show_data_chart_in_the_playground(live_server: Any, tenant: Any, api: Any, start_llm: Any,
                                           browser: Any) -> None:
    from playwright.sync_api import expect

    user = UserFactory(username="dana", password="pw-browser-2", is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.MEMBER)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="toolhub_demo",
                                                         codename__startswith="view_"))
    seed_records(tenant, None)
    tool = builtin(tenant, "show_data", enable=True)
    llm = start_llm([
        calls(("show_data__show_data", {"query_name": "orders_by_status", "widget": "chart",
                                        "props": {"type": "bar", "x": "status", "y": ["orders", "units"],
                                                  "title": "Orders by status"}}),
              ("show_data__show_data", {"query": {"model": "order", "aggregates": [
                  {"fn": "sum", "field": "quantity", "as": "units"}]}, "widget": "kpi",
                  "props": {"value": "units", "label": "Units ordered"}})),
        text("Most orders have shipped; two are still pending."),
    ])
    make_agent(api, model=make_model(api, llm), tools=[{"tool": tool.pk}], name="analyst")
    shots = Path(settings.BASE_DIR) / "var" / "screenshots"

    page = browser.new_page(viewport={"width": 1000, "height": 800})
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(live_server.url)
            and not r.url.startswith("data:") else None)
    login(page, live_server.url, "dana", "pw-browser-2", "/playground/")
    page.fill("#message", "orders by status, as a chart please")
    page.click("#send")
    widget = page.locator(".widget.widget-chart")
    expect(widget).to_be_visible()
    expect(widget.locator(".widget-title")).to_have_text("Orders by status")
    expect(page.locator(".assistant").last).to_have_text("Most orders have shipped; two are still pending.")
    expect(page.locator(".widget-kpi .kpi-value")).to_have_text("9")
    expect(page.locator(".widget-kpi .kpi-label")).to_have_text("Units ordered")
    drawn = page.evaluate("""() => {
        const chart = Chart.getChart(document.querySelector('.widget-chart canvas'));
        return {labels: chart.data.labels, sets: chart.data.datasets.map(d => [d.label, d.data]),
                type: chart.config.type, width: chart.width};
    }""")
    assert drawn["labels"] == ["cancelled", "pending", "shipped"]
    assert drawn["sets"] == [["orders", [1, 2, 3]], ["units", [1, 4, 4]]] and drawn["type"] == "bar"
    assert drawn["width"] > 100
    # The widget sits where the tool was called: after its result line, before the model's text.
    order = page.evaluate("""() => Array.from(document.querySelectorAll('#log > *')).map(n =>
        n.classList.contains('widget') ? 'widget' : n.classList.contains('assistant') ? 'text' :
        n.classList.contains('tool-result') ? 'result' : n.classList.contains('tool-call') ? 'call' : 'other')""")
    assert order.count("widget") == 2 and order[-1] == "text", order
    assert all(order[i - 1] == "result" for i, kind in enumerate(order) if kind == "widget"), order
    scripts = page.evaluate("() => Array.from(document.scripts).map(s => s.src).filter(Boolean)")
    assert any("/static/agents_app/vendor/chart-4.6.1.umd.min.js" in s for s in scripts), scripts
    assert outside == [], outside  # no CDN, nothing fetched from anywhere but Toolhub
    take(page, shots / "show_data_chart.png", full_page=True)
    # Every other widget, drawn by the same script from rows shaped like show_data's answer.
    drawn_text = page.evaluate(r"""() => {
        const rows = [{status: "pending", orders: 2, units: 4}, {status: "shipped", orders: 3, units: 4}];
        const columns = ["status", "orders", "units"];
        const props = {
            table: {columns: ["status", "units"]}, kpi: {value: "orders", label: "Orders"},
            card: {title: "status", fields: ["orders"]}, list: {primary: "status", secondary: "units"},
            progress: {value: "orders", max: "units", label: "status"},
            flow: {step: "status", value: "orders", stages: ["pending", "shipped", "delivered"]},
            pivot: {rows: "status", columns: "units", value: "orders", agg: "sum"},
        };
        const out = {};
        for (const [type, p] of Object.entries(props)) {
            const holder = document.createElement("div");
            document.body.appendChild(holder);
            window.ToolhubWidgets.render({widget: {type: type, props: p}, columns: columns, rows: rows}, holder);
            out[type] = holder.innerText.replace(/\s+/g, " ").trim();
        }
        return out;
    }""")
    assert drawn_text["table"] == "status units pending 4 shipped 4", drawn_text
    assert drawn_text["kpi"] == "2 Orders"
    assert drawn_text["card"] == "pending orders 2 shipped orders 3"
    assert drawn_text["list"] == "pending · 4 shipped · 4"
    assert drawn_text["progress"] == "pending 2 / 4 shipped 3 / 4"
    assert drawn_text["flow"] == "pending 2 → shipped 3 → delivered 0"
    assert drawn_text["pivot"] == "status \\ units 4 pending 2 shipped 3"
