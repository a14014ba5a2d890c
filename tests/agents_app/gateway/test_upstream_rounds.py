"""An upstream server's sampling request (`sampling/createMessage`) through the gateway, for clients of both eras.

A 2026-07-28 upstream asks in an `input_required` round: a 2025 gateway client gets it as a server-initiated request
on its session, a 2026-07-28 client as an input request of the gateway's own `input_required` result (the upstream's
round sealed in the gateway's requestState, so the answer may land on any gateway process), and its answer goes back
upstream. A 2025 upstream's sampling request reaches a 2026 client the same way. Declined, and never put to the client,
when the tool's `sampling` setting is off or the client did not declare sampling.

A call of several rounds is one call: one audit row (`awaiting_input` until the last round settles it) and one count
against the quotas and the throttle; a replayed round is a new call.

One modern_only.py upstream (REMOTE, streamable HTTP) and two gateways are started for the whole module."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.agents_app.gateway.clients import connect, refusal
from tests.agents_app.gateway.conftest import Served, running_server
from tests.agents_app.gateway.modern import client
from tests.agents_app.support import make_agent
from tests.fixtures.mcp_servers import CLIENT_PROBE, MODERN_MINI, MODERN_ONLY, http_server
from tools_app.models import CallStatus, ToolCall
from tools_app.wiring.pool import pool

pytestmark = pytest.mark.django_db(transaction=True)

SUMMARIZE = ("modern__summarize", {"text": "a long story about tools"})
ASKED = "Summarize: a long story about tools"


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with http_server(MODERN_ONLY) as url:
        yield url


@pytest.fixture(scope="module")
def gateways(django_db_setup: Any, django_db_blocker: Any) -> Iterator[tuple[Served, Served]]:
    with django_db_blocker.unblock(), running_server() as first, running_server() as second:
        yield first, second


@pytest.fixture(autouse=True)
def _fresh_pool() -> Iterator[None]:
    yield
    pool().close_all()


def _agent(tenant: Any, member_client: Any, url: str, **config: Any) -> tuple[int, str]:
    api = member_client(tenant, Role.ADMIN)
    resp = api.post("/api/v1/tools/", {"name": "modern", "type": "REMOTE", "config": {
        "url": url, "timeout_s": 20, **config}}, format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["protocol_version"] == "2026-07-28"
    return make_agent(api, model=None, tools=[{"tool": tool_id}], name="summarizer"), token_for_user(user=api.user)


@pytest.fixture
def sampling_agent(tenant: Any, member_client: Any, upstream_url: str) -> tuple[int, str]:
    return _agent(tenant, member_client, upstream_url, sampling=True)


class Model:
    """The gateway client's sampling callback: records what it was asked, answers a fixed completion."""

    def __init__(self) -> None:
        self.asked: list[types.CreateMessageRequestParams] = []

    async def __call__(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append(params)
        return types.CreateMessageResult(role="assistant", model="client-model-7",
                                         content=types.TextContent(type="text", text="Tools help agents."))


async def _call(url: str, token: str, era: str, name: str, arguments: dict[str, Any], **callbacks: Any) -> Any:
    if era == "2025":
        async with connect(url, token, **callbacks) as (session, _):
            return await session.call_tool(name, arguments)
    async with client(url, token, **callbacks) as connected:
        assert connected.protocol_version == "2026-07-28"
        return await connected.call_tool(name, arguments)


def _text(result: Any) -> str:
    return str(result.content[0].text)


def _said(message: Any) -> str:
    """A sampling or prompt message's text."""
    content = message.content
    assert isinstance(content, types.TextContent), content
    return content.text


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_a_2026_upstreams_sampling_request_is_answered_by_the_gateway_clients_model(
        gateways: tuple[Served, Served], sampling_agent: tuple[int, str], era: str) -> None:
    agent_id, token = sampling_agent
    model = Model()
    answered = asyncio.run(_call(gateways[0].endpoint("acme", agent_id), token, era, *SUMMARIZE,
                                 sampling_callback=model))
    (asked,) = model.asked
    assert [_said(m) for m in asked.messages] == [ASKED]
    assert asked.system_prompt == "You summarize in five words." and asked.max_tokens == 50
    assert not answered.is_error, answered
    assert json.loads(_text(answered)) == {"summary": "Tools help agents.", "model": "client-model-7"}


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_a_client_that_did_not_declare_sampling_is_not_asked(gateways: tuple[Served, Served],
                                                             sampling_agent: tuple[int, str], era: str) -> None:
    agent_id, token = sampling_agent
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="decline")

    answered = asyncio.run(_call(gateways[0].endpoint("acme", agent_id), token, era, *SUMMARIZE,
                                 elicitation_callback=on_elicit))
    assert answered.is_error and "did not declare sampling" in _text(answered), answered
    assert asked == []


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_a_tool_without_sampling_never_puts_its_servers_request_to_the_client(
        gateways: tuple[Served, Served], tenant: Any, member_client: Any, upstream_url: str, era: str) -> None:
    """Off by default: Toolhub does not offer sampling to the server, whose call fails; the client is not asked."""
    agent_id, token = _agent(tenant, member_client, upstream_url)
    model = Model()
    answered = asyncio.run(_call(gateways[0].endpoint("acme", agent_id), token, era, *SUMMARIZE,
                                 sampling_callback=model))
    assert answered.is_error and "Tools help agents" not in _text(answered), answered
    assert model.asked == []


# --- a LOCAL upstream on a runner (TOOLHUB_RUNNERS): the same rounds cross the runner's call-stream and answer ----


@pytest.fixture
def on_a_runner() -> Iterator[Any]:
    """This process's pool sends LOCAL servers to a runner (its app served for real on a loopback port, over a pool of
    its own), as under `make prod-local`; the gateways run in this process, so their calls go there too."""
    import threading

    import uvicorn

    from tests.fixtures.mcp_servers import free_port, wait_listening
    from tests.tools_app.runtime.mcp.conftest import LOOPBACK
    from tests.tools_app.runtime.runner.test_streamed_calls import SECRET, OneRunner
    from tools_app.runtime.mcp import SessionPool
    from tools_app.runtime.runner.app import build_app
    from tools_app.runtime.runner.client import RunnerPool
    from tools_app.wiring.pool import swap_pool

    hosted = SessionPool(policy=LOOPBACK)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(hosted, SECRET, allow_unsandboxed=True), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_listening(port)
    facade = RunnerPool(SessionPool(policy=LOOPBACK), OneRunner(f"http://127.0.0.1:{port}"), SECRET)  # type: ignore[arg-type]
    replaced = swap_pool(facade)
    try:
        yield hosted  # the runner's own pool
    finally:
        swap_pool(replaced)
        facade.shutdown()
        server.should_exit = True
        thread.join(10)
        hosted.shutdown()


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_a_local_2026_upstream_on_a_runner_has_its_sampling_request_answered_by_the_gateway_clients_model(
        gateways: tuple[Served, Served], tenant: Any, member_client: Any, on_a_runner: Any, era: str) -> None:
    """A LOCAL 2026-only upstream on a runner: a 2025 client is asked in place (the runner's `ask` event, its
    `answer`), a 2026 client by the gateway's input request (the round handed back across the runner, resumed across
    it on the retry); either way one call, one audit row settled OK. The upstream is modern_mini.py (modern_only.py's
    stdio answers without the SDK's ~1.2 s of CPU a start, twice a test: the refresh's probe and the call; what is
    tested is the runner's and the gateway's side, test_modern_mini.py compares the two servers)."""
    from tools_app.runtime.runner.client import RunnerPool

    assert isinstance(pool(), RunnerPool)
    api = member_client(tenant, Role.ADMIN)
    resp = api.post("/api/v1/tools/", {"name": "modern", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(MODERN_MINI)], "call_timeout_s": 20, "sampling": True}},
        format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["protocol_version"] == "2026-07-28"
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="summarizer")
    model = Model()
    answered = asyncio.run(_call(gateways[0].endpoint("acme", agent_id), token_for_user(user=api.user), era,
                                 *SUMMARIZE, sampling_callback=model))
    (asked,) = model.asked
    assert [_said(m) for m in asked.messages] == [ASKED] and asked.max_tokens == 50
    assert not answered.is_error, answered
    assert json.loads(_text(answered)) == {"summary": "Tools help agents.", "model": "client-model-7"}
    (row,) = _rows("summarize")
    assert row.status == CallStatus.OK and "Tools help agents." in row.result_excerpt
    web = pool()
    assert isinstance(web, RunnerPool)
    assert on_a_runner.stats()["open_sessions"] == 1 and web.local.stats()["open_sessions"] == 0  # it ran there


# --- by hand: the round sealed in the gateway's requestState, answered on the other gateway -----------------------


async def _by_hand(url: str, token: str, name: str, arguments: dict[str, Any],
                   responses: dict[str, Any] | None = None, state: str | None = None) -> Any:
    """One round, driven by hand (the SDK's client would answer and retry on its own)."""
    async def on_sample(context: Any, params: Any) -> types.CreateMessageResult:
        raise AssertionError("driven by hand")

    async with client(url, token, sampling_callback=on_sample) as connected:
        return await connected.session.call_tool(name, arguments, input_responses=responses, request_state=state,
                                                 allow_input_required=True)


def test_a_sampling_round_asked_on_one_gateway_is_answered_on_another(gateways: tuple[Served, Served],
                                                                     sampling_agent: tuple[int, str]) -> None:
    """The upstream's sampling request rides the gateway's input_required result under the upstream's key; the
    retry on the other gateway carries the completion upstream. A retry that leaves it unanswered is asked again."""
    agent_id, token = sampling_agent
    url_a, url_b = (g.endpoint("acme", agent_id) for g in gateways)

    first = asyncio.run(_by_hand(url_a, token, *SUMMARIZE))
    assert isinstance(first, types.InputRequiredResult), first
    ((key, request),) = (first.input_requests or {}).items()
    assert isinstance(request, types.CreateMessageRequest), request
    assert _said(request.params.messages[0]) == ASKED
    assert "Summarize" not in (first.request_state or "")  # sealed: the client reads nothing of the upstream's round

    unanswered = asyncio.run(_by_hand(url_b, token, *SUMMARIZE, {}, first.request_state))
    assert isinstance(unanswered, types.InputRequiredResult), unanswered
    assert list(unanswered.input_requests or {}) == [key]

    completion = types.CreateMessageResult(role="assistant", model="by-hand",
                                           content=types.TextContent(type="text", text="Five words, by hand."))
    done = asyncio.run(_by_hand(url_b, token, *SUMMARIZE, {key: completion}, unanswered.request_state))
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    assert json.loads(_text(done)) == {"summary": "Five words, by hand.", "model": "by-hand"}


def test_a_2025_upstreams_sampling_request_reaches_a_2026_client(gateways: tuple[Served, Served], tenant: Any,
                                                                member_client: Any) -> None:
    """A 2025 upstream asks by a request on its session: the call waits in this process, the request rides the
    gateway's input_required result (`upstream-sampling`), and the client's completion answers the upstream."""
    api = member_client(tenant, Role.ADMIN)
    resp = api.post("/api/v1/tools/", {"name": "probe", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(CLIENT_PROBE)], "call_timeout_s": 20, "sampling": True}}, format="json")
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").status_code == 200
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="prober")
    model = Model()
    answered = asyncio.run(_call(gateways[0].endpoint("acme", agent_id), token_for_user(user=api.user), "2026",
                                 "probe__summarize", {"text": "a long story about tools"}, sampling_callback=model))
    (asked,) = model.asked
    assert [_said(m) for m in asked.messages] == [ASKED]
    assert not answered.is_error, answered
    assert json.loads(_text(answered))["model"] == "client-model-7"


# --- a call of several rounds: one audit row, counted once ----------------------------------------------------------


def _one_call_a_day(tenant: Any, member_client: Any) -> None:
    """The tenant's quota: one call a day (the counters are this test's: its tenant is new)."""
    api = member_client(tenant, Role.ADMIN)
    made = api.post("/api/v1/quotas/", {"scope": "tenant", "per_day": 1}, format="json")
    assert made.status_code == 201, made.content


def _rows(function: str) -> list[ToolCall]:
    return list(ToolCall.objects.filter(function=function, via="gateway").order_by("id"))


def test_a_call_of_two_rounds_is_audited_and_counted_once(gateways: tuple[Served, Served], tenant: Any,
                                                         member_client: Any, sampling_agent: tuple[int, str]) -> None:
    agent_id, token = sampling_agent
    _one_call_a_day(tenant, member_client)
    url = gateways[0].endpoint("acme", agent_id)
    answered = asyncio.run(_call(url, token, "2026", *SUMMARIZE, sampling_callback=Model()))
    assert not answered.is_error, answered  # its second round was not counted: the quota allows one call
    (row,) = _rows("summarize")
    assert row.status == CallStatus.OK and "Tools help agents." in row.result_excerpt, row.result_excerpt

    again = asyncio.run(_call(url, token, "2026", *SUMMARIZE, sampling_callback=Model()))
    assert again.is_error and refusal(again)["error_code"] == "QUOTA_EXCEEDED", again
    assert [r.status for r in _rows("summarize")] == [CallStatus.OK, CallStatus.DENIED]


def test_a_replayed_round_is_a_new_call(gateways: tuple[Served, Served], tenant: Any, member_client: Any,
                                        sampling_agent: tuple[int, str]) -> None:
    """The round's row waits as `awaiting_input`; the answer on the other gateway settles it; the same requestState
    sent again is a call of its own, counted (here: refused by the spent quota) and audited on its own."""
    agent_id, token = sampling_agent
    _one_call_a_day(tenant, member_client)
    url_a, url_b = (g.endpoint("acme", agent_id) for g in gateways)
    first = asyncio.run(_by_hand(url_a, token, *SUMMARIZE))
    assert isinstance(first, types.InputRequiredResult), first
    (row,) = _rows("summarize")
    assert row.status == CallStatus.AWAITING_INPUT

    ((key, _),) = (first.input_requests or {}).items()
    completion = types.CreateMessageResult(role="assistant", model="by-hand",
                                           content=types.TextContent(type="text", text="Once."))
    done = asyncio.run(_by_hand(url_b, token, *SUMMARIZE, {key: completion}, first.request_state))
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    (row,) = _rows("summarize")
    assert row.status == CallStatus.OK and "Once." in row.result_excerpt

    replayed = asyncio.run(_by_hand(url_b, token, *SUMMARIZE, {key: completion}, first.request_state))
    assert isinstance(replayed, types.CallToolResult) and replayed.is_error, replayed
    assert refusal(replayed)["error_code"] == "QUOTA_EXCEEDED"
    assert [r.status for r in _rows("summarize")] == [CallStatus.OK, CallStatus.DENIED]


def test_a_prompt_get_of_two_rounds_is_audited_once(gateways: tuple[Served, Served],
                                                    sampling_agent: tuple[int, str]) -> None:
    """The same for a prompts/get whose upstream asks first (modern_only.py's `booking` prompt)."""
    agent_id, token = sampling_agent

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"people": 6})

    async def scenario() -> Any:
        async with client(gateways[1].endpoint("acme", agent_id), token, elicitation_callback=on_elicit) as connected:
            return await connected.get_prompt("modern__booking", {})

    prompt = asyncio.run(scenario())
    assert _said(prompt.messages[0]) == "Book a table for 6."
    (row,) = _rows("prompts/get")
    assert row.status == CallStatus.OK and "Book a table for 6." in row.result_excerpt


# --- a call whose client never answers: swept once its requestState expired ----------------------------------------


def _errors(tenant: Any) -> float:
    from core import metrics

    value = metrics.REGISTRY.get_sample_value("toolhub_tool_call_errors_total",
                                              {"tenant": str(tenant.pk), "tool": "modern", "code": "TIMEOUT"})
    return value or 0.0


def test_a_call_whose_client_never_answers_ends_as_abandoned_once_its_state_expired(
        gateways: tuple[Served, Served], tenant: Any, sampling_agent: tuple[int, str]) -> None:
    """The row waits as `awaiting_input` while the requestState may still come back; the beat task leaves it then.
    Past the state's TTL (shifted by the setting) the task ends it once (`error`, TIMEOUT, counted once by the metrics
    and the usage report); a retry whose state still verifies is a new call: the abandoned one cannot be revived."""
    from datetime import timedelta

    from django.test import override_settings
    from django.utils import timezone

    from tools_app import usage
    from tools_app.tasks import sweep_abandoned_input

    agent_id, token = sampling_agent
    url = gateways[0].endpoint("acme", agent_id)
    first = asyncio.run(_by_hand(url, token, *SUMMARIZE))
    assert isinstance(first, types.InputRequiredResult), first
    errors_before = _errors(tenant)

    assert sweep_abandoned_input() == 0  # the state is good for TOOLHUB_MCP_REQUEST_STATE_TTL_S (900 s)
    (row,) = _rows("summarize")
    assert row.status == CallStatus.AWAITING_INPUT and row.input_asked_at is not None
    since, until = row.created_at - timedelta(minutes=1), timezone.now() + timedelta(minutes=1)
    assert usage.tool_usage(tenant=tenant, since=since, until=until) == []  # not counted while it may go on

    with override_settings(TOOLHUB_MCP_REQUEST_STATE_TTL_S=0):  # time moved past the state's expiry
        assert sweep_abandoned_input() == 1
        assert sweep_abandoned_input() == 0  # idempotent
    (row,) = _rows("summarize")
    assert row.status == CallStatus.ERROR and row.error_code == "TIMEOUT", row
    assert row.error.startswith("abandoned:") and row.input_asked_at is None
    assert _errors(tenant) == errors_before + 1
    (used,) = usage.tool_usage(tenant=tenant, since=since, until=until)
    assert used["calls"] == 1 and used["errors"] == {"TIMEOUT": 1}, used

    # The state, still good for the gateway (its sealer took the TTL when it started), no longer continues the swept
    # call: its retry is a call of its own, with a row of its own; the abandoned row stays as it ended.
    ((key, _),) = (first.input_requests or {}).items()
    completion = types.CreateMessageResult(role="assistant", model="late",
                                           content=types.TextContent(type="text", text="Too late."))
    asyncio.run(_by_hand(url, token, *SUMMARIZE, {key: completion}, first.request_state))
    swept, retried = _rows("summarize")
    assert swept.pk == row.pk and swept.status == CallStatus.ERROR and swept.error_code == "TIMEOUT"
    assert retried.status != CallStatus.AWAITING_INPUT
    assert sweep_abandoned_input() == 0


def test_the_sweep_is_a_beat_task() -> None:
    from django.conf import settings

    entry = settings.CELERY_BEAT_SCHEDULE["abandoned-input-sweep"]
    assert entry["task"] == "tools.sweep_abandoned_input" and float(entry["schedule"]) <= 60  # type: ignore[arg-type]
