"""Fail closed, round 3: the probes for each class of issue 29 that lives in the core.

Each test is the probe that would have found its class: a statement after the fact, one item
twice, a final response rebuilt by toolstitch, a finish that decides again, memory kept by routing,
a real long id, and anomaly codes that mislead. Every probe runs on plain dicts and on the SDK's own
objects, and the invariant is the one of docs/design.md rule 9: a ``ready`` call holds exactly what
arrived, every statement of it agreed, and nothing that was refused runs.
"""

from __future__ import annotations

import copy
import gc
import importlib.util
import json
import tracemalloc
from typing import Any

import pytest
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

import toolstitch as ts
from toolstitch.core import Limits, ResponseAccumulator
from toolstitch.testing import response_events

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"],
    },
}
PARIS = [("call_1", "get_weather", '{"city": "Paris"}')]


HAS_RESPONSES = importlib.util.find_spec("openai.types.responses") is not None
responses_api = pytest.mark.skipif(not HAS_RESPONSES, reason="this openai release has no Responses API")


def as_sdk(events: list[dict[str, Any]]) -> list[Any]:
    from openai.types.responses import ResponseStreamEvent

    return [construct_type(type_=ResponseStreamEvent, value=copy.deepcopy(e)) for e in events]


def run(events: list[Any], tools: Any = (WEATHER,)) -> ResponseAccumulator:
    acc = ResponseAccumulator(list(tools))
    for event in events:
        acc.feed(event)
    acc.end()
    return acc


def both(events: list[dict[str, Any]]) -> list[ResponseAccumulator]:
    return [run(copy.deepcopy(events)), run(as_sdk(events))]


def at(events: list[dict[str, Any]], kind: str) -> int:
    return next(i for i, e in enumerate(events) if e["type"] == kind)


# -- 1. a statement after the fact --------------------------------------------------------------


@responses_api
@pytest.mark.parametrize("late", [', "unit": "f"}', " ", "\n"])
def test_text_after_the_done_statement_refuses_the_call(late: str) -> None:
    """Deltas ``{"city": "Paris"``, a ``.done`` that says the same, then more text: refused, even
    when the final statements carry the whole text (the issue's example) or the text is blank."""
    events = response_events([("call_1", "get_weather", '{"city": "Paris"' + late)])
    for e in events:
        if e["type"] == "response.function_call_arguments.delta":
            e["delta"] = ""
    deltas = [
        {"type": "response.function_call_arguments.delta", "item_id": "fc_0", "output_index": 0, "delta": d}
        for d in ('{"city": ', '"Paris"')
    ]
    done = at(events, "response.function_call_arguments.done")
    events[done]["arguments"] = '{"city": "Paris"'
    late_delta = {
        "type": "response.function_call_arguments.delta",
        "item_id": "fc_0",
        "output_index": 0,
        "delta": late,
    }
    events = events[:done] + deltas + [events[done], late_delta] + events[done + 1 :]
    events = [e for e in events if not (e["type"].endswith("arguments.delta") and e["delta"] == "")]
    for acc in both(events):
        (call,) = acc.tool_calls
        assert call.status == "invalid", call
        assert isinstance(call.error, ts.errors.TransitionRefused)
        assert call.arguments == '{"city": "Paris"'


@responses_api
def test_a_delta_after_output_item_done_refuses_the_call() -> None:
    events = response_events(PARIS)
    done = at(events, "response.output_item.done")
    late = {
        "type": "response.function_call_arguments.delta",
        "item_id": "fc_0",
        "output_index": 0,
        "delta": " ",
    }
    events.insert(done + 1, late)
    for acc in both(events):
        assert [c.status for c in acc.tool_calls] == ["invalid"]


# -- 2. one item twice --------------------------------------------------------------------------


@responses_api
def test_a_final_output_that_repeats_an_item_refuses_it_and_opens_no_second_call() -> None:
    events = response_events(PARIS)
    final = events[-1]["response"]
    copy_of = dict(final["output"][0], arguments='{"city": "Rome"}')
    final["output"].append(copy_of)
    for acc in both(events):
        assert [c.status for c in acc.tool_calls] == ["invalid"]
        assert "arguments_mismatch" in {a.code for a in acc.anomalies}


@responses_api
def test_two_items_claiming_one_call_id_are_both_refused() -> None:
    events = response_events(
        [("call_1", "get_weather", '{"city": "Paris"}'), ("call_1", "get_weather", '{"city": "Rome"}')]
    )
    for acc in both(events):
        assert [c.status for c in acc.tool_calls] == ["invalid", "invalid"]


# -- 3. the final response is the server's --------------------------------------------------------


@responses_api
def test_get_final_response_is_the_servers_payload_and_a_disagreement_refuses() -> None:
    events = response_events(PARIS)
    events[-1]["response"]["output"] = []
    for acc in both(events):
        assert [c.status for c in acc.tool_calls] == ["invalid"]
        assert acc.get_final_response().output == []
        assert "output_missing" in {a.code for a in acc.anomalies}
    events = response_events(PARIS)
    sdk_events = as_sdk(events)
    acc = run(sdk_events)
    assert acc.get_final_response() is sdk_events[-1].response  # exactly as the SDK decoded it


@responses_api
def test_other_arguments_in_the_final_output_refuse_the_call_and_are_kept_as_sent() -> None:
    events = response_events(PARIS)
    events[-1]["response"]["output"][0]["arguments"] = '{"city": "Rome"}'
    for acc in both(events):
        assert [c.status for c in acc.tool_calls] == ["invalid"]
        assert acc.get_final_response().output[0].arguments == '{"city": "Rome"}'  # type: ignore[union-attr]


# -- 4. a finish that decides again ---------------------------------------------------------------


@responses_api
@pytest.mark.parametrize("status", ["incomplete", "failed", "in_progress", "cancelled", None, 5])
def test_a_completed_event_whose_response_is_not_completed_decides_with_calls_not_ready(status: Any) -> None:
    events = response_events(PARIS)
    events[-1]["response"]["status"] = status
    acc = ResponseAccumulator([WEATHER])
    decided_at = None
    for i, event in enumerate(events):
        before = len(acc.finished)
        acc.feed(event)
        if len(acc.finished) > before:
            decided_at = i
    assert decided_at == len(events) - 1
    assert [c.status for c in acc.tool_calls] != ["ready"]


@responses_api
def test_a_completed_event_after_an_error_event_is_signalled() -> None:
    events = response_events(PARIS)
    events.insert(len(events) - 1, {"type": "error", "code": "server_error", "message": "boom"})
    acc = ResponseAccumulator([WEATHER])
    for event in events[:-1]:
        acc.feed(event)
    before = len(acc.finished)
    acc.feed(events[-1])
    assert len(acc.finished) > before and acc.tool_calls[0].status != "ready"


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_a_second_chat_finish_after_a_late_fragment_decides_again() -> None:
    entry = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    late = {"index": 0, "function": {"arguments": " "}}
    for sdk in (False, True):
        acc = ts.Accumulator()
        seen = []
        for c in [
            chunk({"tool_calls": [entry]}),
            chunk({}, "tool_calls"),
            chunk({"tool_calls": [late]}),
            chunk({}, "tool_calls"),
        ]:
            fed = construct_type(type_=ChatCompletionChunk, value=c) if sdk else c
            before = len(acc.finished)
            acc.feed(fed)
            seen.append(len(acc.finished) > before)
        assert seen == [False, True, False, True]
        assert acc.tool_calls[0].status == "invalid"


# -- 6. memory kept by routing --------------------------------------------------------------------


def test_refused_calls_keep_no_fragment_past_the_stream_budget() -> None:
    """128 calls of 400 KB under the default 16 MiB budget: what stays after ``end()`` is bounded
    by the budget, routing's own bookkeeping included (it once kept each call's last fragment)."""
    limits = Limits()
    gc.collect()
    tracemalloc.start()  # before the text exists: every copy of it that stays is counted
    acc = ts.Accumulator(limits=limits)
    for i in range(128):
        text = '{"a": "' + str(i) * 400_000
        entry = {"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": text}}
        acc.feed(chunk({"tool_calls": [entry]}))
        del text, entry
    acc.end()
    gc.collect()
    kept, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert kept < limits.max_stream_bytes + 4 * 1024 * 1024, kept
    assert sum(c.status == "invalid" for c in acc.calls()) >= 80


# -- 7. a real long id ----------------------------------------------------------------------------


def test_a_long_real_id_is_kept_and_never_replaced() -> None:
    long_id = "call_" + "0123456789abcdef" * 2 + "__thought__" + "Q" * 5499
    entry = {
        "index": 0,
        "id": long_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    for sdk in (False, True):
        acc = ts.Accumulator(
            tools=[
                {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER["parameters"]}}
            ]
        )
        for c in [chunk({"tool_calls": [entry]}), chunk({}, "tool_calls")]:
            acc.feed(construct_type(type_=ChatCompletionChunk, value=c) if sdk else c)
        (call,) = acc.tool_calls
        assert call.ready and call.id == long_id
        completion = acc.get_final_completion()
        assert completion.choices[0].message.tool_calls[0].id == long_id  # type: ignore[index]


def test_an_id_past_its_bound_refuses_naming_the_id() -> None:
    entry = {"index": 0, "id": "c" * 200, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    acc = ts.Accumulator(limits=Limits(max_id_chars=100))
    for c in [chunk({"tool_calls": [entry]}), chunk({}, "tool_calls")]:
        acc.feed(c)
    (call,) = acc.tool_calls
    assert call.status == "invalid" and isinstance(call.error, ts.errors.LimitExceeded)
    assert call.error.limit == "max_id_chars" and "id of 200 characters" in call.error.message


# -- 8. codes that say what happened ----------------------------------------------------------------


def test_length_has_its_own_code_and_a_repeated_type_is_told_once() -> None:
    entry = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": '}}
    more = {"index": 0, "type": "function", "function": {"arguments": "1"}}
    acc = ts.Accumulator()
    for c in [
        chunk({"tool_calls": [entry]}),
        *[chunk({"tool_calls": [more]}) for _ in range(5)],
        chunk({}, "length"),
    ]:
        acc.feed(c)
    codes = [a.code for a in acc.anomalies]
    assert "finish_reason_length" in codes and "finish_reason_stop_with_tool_calls" not in codes
    assert codes.count("type_repeated") == 1
    assert json.dumps([a.code for a in acc.tool_calls[0].anomalies]).count("type_repeated") == 1


@pytest.mark.parametrize("events", [True, False])
def test_a_resent_whole_over_the_streams_bound_replaces_nothing(events: bool) -> None:
    # Arguments sent as an object replace the text so far. When that whole is over
    # Limits.max_stream_bytes, the call is refused with the text it held: the refused value is not
    # kept (it would hold more than the bound allows), and its bytes are counted once.
    def piece(entry: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
        delta = {"tool_calls": [entry]} if entry else {}
        return {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    acc = ts.Accumulator(limits=Limits(max_stream_bytes=16))
    acc.feed(
        piece({"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": '{"p": '}}),
        events=events,
    )
    acc.feed(piece({"index": 0, "function": {"arguments": {"p": "0123456789"}}}), events=events)
    acc.feed(piece(None, "tool_calls"), events=events)
    (call,) = acc.tool_calls
    assert call.status == "invalid" and call.error.limit == "max_stream_bytes"  # type: ignore[union-attr]
    assert call.arguments == '{"p": '
    assert call.metrics.bytes == len('{"p": ') + len('{"p": "0123456789"}')
