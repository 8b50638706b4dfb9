"""OpenTelemetry: ``execute_tool`` spans, span events for each call's lifecycle and for anomalies, and
the time metrics, read back with the SDK's in-memory exporter and reader, with and without the
official openai instrumentation (``opentelemetry-instrumentation-openai-v2``)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import toolstitch as ts
from tests.conftest import ROOT
from tests.tools._support import text_reply, tool_messages_of, user
from toolstitch.testing import LocalServer, StreamScript, chunk

EXPORTER = InMemorySpanExporter()
READER = InMemoryMetricReader()
_PROVIDERS: tuple[TracerProvider, MeterProvider] | None = None


def providers() -> tuple[TracerProvider, MeterProvider]:
    """The process's global providers, set once (OpenTelemetry allows one per process)."""
    global _PROVIDERS
    if _PROVIDERS is None:
        tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(EXPORTER))
        mp = MeterProvider(metric_readers=[READER])
        trace.set_tracer_provider(tp)
        metrics.set_meter_provider(mp)
        _PROVIDERS = (tp, mp)
    return _PROVIDERS


@pytest.fixture(autouse=True)
def _otel() -> Iterator[None]:
    providers()
    EXPORTER.clear()
    yield
    EXPORTER.clear()


@pytest.fixture(params=["latest", "legacy"])
def instrumented(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The official openai instrumentation, on for one test: in its current mode (the ``chat`` span
    stays current while the stream is read) and in its legacy one (it does not)."""
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    if request.param == "legacy":
        monkeypatch.setattr(instrumentation, "is_experimental_mode", lambda: False)
    tp, mp = providers()
    instrumentor = instrumentation.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tp, meter_provider=mp)
    yield
    instrumentor.uninstrument()


tracer = trace.get_tracer("tests")


@ts.tool
def get_time(tz: str) -> str:
    with tracer.start_as_current_span("inside get_time"):
        return "12:00"


@ts.tool
async def lookup(q: str) -> str:
    with tracer.start_as_current_span("inside lookup"):
        return f"found {q}"


@ts.tool
def flaky() -> str:
    raise ConnectionError("db at 10.0.0.5 refused")


def calls_from_one(body: dict[str, Any]) -> StreamScript:
    """Three calls whose id is repeated on every fragment (an anomaly: vLLM does it)."""
    if tool_messages_of(body):
        return text_reply("done")
    specs = [
        ("c_time", "get_time", '{"tz": "UTC"}'),
        ("c_look", "lookup", '{"q": "x"}'),
        ("c_flaky", "flaky", "{}"),
    ]
    chunks = [chunk(delta={"role": "assistant"})]
    for i, (cid, name, args) in enumerate(specs):
        head = {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
        chunks.append(chunk(delta={"tool_calls": [head]}))
        chunks.append(chunk(delta={"tool_calls": [{"index": i, "id": cid, "function": {"arguments": args}}]}))
    chunks.append(chunk(delta={}, finish_reason="tool_calls"))
    return StreamScript(chunks)


def spans() -> dict[str, ReadableSpan]:
    return {s.name: s for s in EXPORTER.get_finished_spans()}


def events(span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, dict(e.attributes or {})) for e in span.events]


def counts() -> dict[str, int]:
    data = READER.get_metrics_data()
    out: dict[str, int] = {}
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = out.get(m.name, 0) + sum(dp.count for dp in m.data.data_points)
    return out


def check_tool_spans(by_name: dict[str, ReadableSpan], parent: ReadableSpan) -> None:
    for name, call_id in (("get_time", "c_time"), ("lookup", "c_look"), ("flaky", "c_flaky")):
        span = by_name[f"execute_tool {name}"]
        assert span.parent is not None and span.parent.span_id == parent.context.span_id
        assert span.attributes is not None
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.name"] == name
        assert span.attributes["gen_ai.tool.call.id"] == call_id
    failed = by_name["execute_tool flaky"]
    assert failed.attributes is not None and failed.attributes["error.type"] == "ConnectionError"
    assert failed.status.status_code is StatusCode.ERROR
    assert "error.type" not in (by_name["execute_tool get_time"].attributes or {})
    # The tools' own spans nest under their execute_tool span (sync in a worker thread, and async).
    for tool_name in ("get_time", "lookup"):
        inner = by_name[f"inside {tool_name}"]
        assert inner.parent is not None
        assert inner.parent.span_id == by_name[f"execute_tool {tool_name}"].context.span_id


def stream_events_of(span: ReadableSpan) -> list[str]:
    return [
        n
        for n, _ in events(span)
        if not n.startswith("toolstitch.tool_call.dispatched") and not n.endswith("finished")
    ]


def run_once(server: LocalServer, caplog: pytest.LogCaptureFixture) -> ts.RunResult:
    server.handler = calls_from_one
    with (
        caplog.at_level(logging.INFO, logger="toolstitch"),
        tracer.start_as_current_span("agent"),
        server.client() as client,
        ts.Toolbox([get_time, lookup, flaky]) as box,
    ):
        return ts.run(client, model="m", messages=user(), toolbox=box)


def test_spans_events_and_metrics_without_the_openai_instrumentation(
    server: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    before = counts()
    result = run_once(server, caplog)
    assert result.stop_reason == "done"
    by_name = spans()
    agent = by_name["agent"]
    check_tool_spans(by_name, agent)
    names = [n for n, _ in events(agent)]
    # Stream lifecycle and the anomaly on the current span (ours: there is no chat span).
    assert names.count("toolstitch.tool_call.started") == 3 and names.count("toolstitch.tool_call.ready") == 3
    assert names.count("toolstitch.tool_call.arguments_complete") == 3
    anomalies = [a for n, a in events(agent) if n == "toolstitch.anomaly"]
    assert {a["toolstitch.anomaly.code"] for a in anomalies} >= {"id_repeated"}
    # After the stream: dispatched and finished, with the outcome.
    finished = {a["gen_ai.tool.call.id"]: a for n, a in events(agent) if n == "toolstitch.tool_call.finished"}
    assert finished["c_flaky"]["toolstitch.tool_call.status"] == "error"
    assert finished["c_time"]["toolstitch.tool_call.status"] == "ok"
    assert names.count("toolstitch.tool_call.dispatched") == 3
    # Anomalies are logged at INFO too.
    assert any(r.levelno == logging.INFO and "id_repeated" in r.getMessage() for r in caplog.records)
    after = counts()
    assert (
        after["gen_ai.client.operation.time_to_first_chunk"]
        - before.get("gen_ai.client.operation.time_to_first_chunk", 0)
        == 2
    )
    grown = after["toolstitch.tool_call.time_to_complete_arguments"] - before.get(
        "toolstitch.tool_call.time_to_complete_arguments", 0
    )
    assert grown == 3
    assert after["gen_ai.execute_tool.duration"] - before.get("gen_ai.execute_tool.duration", 0) == 3


def test_stream_events_nest_under_the_openai_instrumentation_chat_span(
    server: LocalServer, caplog: pytest.LogCaptureFixture, instrumented: None
) -> None:
    result = run_once(server, caplog)
    assert result.stop_reason == "done"
    finished = EXPORTER.get_finished_spans()
    agent = next(s for s in finished if s.name == "agent")
    chats = [s for s in finished if s.name.startswith("chat")]
    assert len(chats) == 2 and all(
        c.parent is not None and c.parent.span_id == agent.context.span_id for c in chats
    )
    first = min(chats, key=lambda s: s.start_time or 0)
    names = [n for n, _ in events(first)]
    assert names.count("toolstitch.tool_call.started") == 3 and names.count("toolstitch.tool_call.ready") == 3
    assert "toolstitch.anomaly" in names
    # Tool execution is the agent's (siblings of the chat spans), and so are the post-stream events.
    check_tool_spans(spans(), agent)
    assert [n for n, _ in events(agent)].count("toolstitch.tool_call.finished") == 3
    assert "toolstitch.tool_call.started" not in [n for n, _ in events(agent)]


async def test_the_async_twin_with_the_openai_instrumentation(
    server: LocalServer, instrumented: None
) -> None:
    server.handler = calls_from_one
    with tracer.start_as_current_span("agent"):
        async with server.async_client() as client:
            with ts.Toolbox([get_time, lookup, flaky]) as box:
                result = await ts.arun(client, model="m", messages=user(), toolbox=box)
    assert result.stop_reason == "done"
    finished = EXPORTER.get_finished_spans()
    agent = next(s for s in finished if s.name == "agent")
    chats = [s for s in finished if s.name.startswith("chat")]
    assert len(chats) == 2
    assert any("toolstitch.tool_call.ready" in [n for n, _ in events(c)] for c in chats)
    check_tool_spans(spans(), agent)


def test_a_call_awaiting_approval_is_an_event(server: LocalServer) -> None:
    @ts.tool(confirm=True)
    def pay(amount: int) -> str:
        return "paid"

    server.handler = lambda body: StreamScript(
        [
            chunk(
                delta={
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c_pay",
                            "type": "function",
                            "function": {"name": "pay", "arguments": '{"amount": 3}'},
                        }
                    ]
                }
            ),
            chunk(delta={}, finish_reason="tool_calls"),
        ]
    )
    with tracer.start_as_current_span("agent"), server.client() as client, ts.Toolbox([pay]) as box:
        result = ts.run(client, model="m", messages=user(), toolbox=box)
    assert result.stop_reason == "awaiting_approval"
    agent = spans()["agent"]
    assert (
        "toolstitch.tool_call.awaiting_approval",
        {"gen_ai.tool.call.id": "c_pay", "gen_ai.tool.name": "pay", "toolstitch.tool_call.index": 0},
    ) in events(agent)
    assert not any(s.name.startswith("execute_tool") for s in EXPORTER.get_finished_spans())


WITHOUT_OTEL = """
import sys, json
sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
import toolstitch as ts
from toolstitch.testing import LocalServer
from tests.tools._support import calls_reply, text_reply, tool_messages_of, user

@ts.tool
def get_time(tz: str) -> str:
    return "12:00"

with LocalServer() as srv:
    calls = [("c1", "get_time", '{"tz": "UTC"}')]
    srv.handler = lambda b: text_reply("ok") if tool_messages_of(b) else calls_reply(calls)
    with srv.client() as client, ts.Toolbox([get_time]) as box:
        result = ts.run(client, model="m", messages=user(), toolbox=box)
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry") and sys.modules[m] is not None)
print(json.dumps({"stop": result.stop_reason, "loaded": loaded}))
"""


def test_the_run_timeline_stages_are_span_events(server: LocalServer) -> None:
    server.handler = calls_from_one
    with (
        tracer.start_as_current_span("agent"),
        server.client() as client,
        ts.Toolbox([get_time, lookup, flaky]) as box,
    ):
        result = ts.run(client, model="m", messages=user(), toolbox=box)
    assert result.timeline is not None
    agent = spans()["agent"]
    stages = [e for e in agent.events if e.name == "toolstitch.stage"]
    expected = [(s.name, None) for st in result.timeline.steps for s in st.stages]
    expected += [(s.name, c.id) for st in result.timeline.steps for c in st.calls for s in c.stages]
    got = [
        (e.attributes["toolstitch.stage.name"], e.attributes.get("toolstitch.stage.call.id")) for e in stages
    ]
    assert sorted(got, key=str) == sorted(expected, key=str)
    execution = next(
        e
        for e in stages
        if e.attributes["toolstitch.stage.name"] == "execution"
        and e.attributes["toolstitch.stage.call.id"] == "c_time"
    )
    lane = next(c for c in result.timeline.calls if c.id == "c_time")
    stage = lane.stage("execution")
    assert stage is not None and execution.attributes["toolstitch.stage.start"] == stage.start
    # Each event is stamped with its stage's own start (Unix time, nanoseconds).
    assert abs(execution.timestamp - (result.timeline.started_at + stage.start / 1000) * 1e9) < 1e6


def test_without_opentelemetry_nothing_is_imported_and_runs_work() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OTEL],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == {"stop": "done", "loaded": []}
    # And importing toolstitch never imports it, even when it is installed. Other installed
    # packages may load it with the SDK (logfire registers a pydantic plugin, which pydantic loads
    # with the first model class): pydantic's plugins are switched off for this probe.
    probe = "import sys, toolstitch; print(any(m.startswith('opentelemetry') for m in sys.modules))"
    env["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "False"
