"""The Responses reader (``core/_responses.py``): Responses API events into the same checked calls.

Every test feeds events as OpenAI sends them (``toolstitch.testing.response_events``), as plain
dicts and as the SDK's own event objects, then breaks one thing. The invariant checked everywhere:
a ``ready`` call holds exactly the text its deltas carried, every statement of that text agreed, the
response completed, and the request allowed the call.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")
from openai._models import construct_type
from openai.types.responses import Response, ResponseStreamEvent

from toolstitch.core import Limits
from toolstitch.core._anomaly import AnomalyCode
from toolstitch.core._responses import ResponseAccumulator, chat_tool_choice, chat_tools
from toolstitch.errors import (
    ContractViolation,
    IncompleteStreamError,
    LimitExceeded,
    MalformedArguments,
    SchemaViolation,
    UnknownTool,
)
from toolstitch.events import ArgumentsDelta, ToolCallIncomplete, ToolCallInvalid, ToolCallReady
from toolstitch.testing import response_events

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
TIME = {"type": "function", "name": "get_time", "parameters": {"type": "object"}, "strict": False}
TOOLS = [WEATHER, TIME]
CALLS = [("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "get_time", '{"tz": "Europe/Paris"}')]


def sdk(events: list[dict[str, Any]]) -> list[Any]:
    """The SDK's own event objects for ``events``, built as the SDK builds them from SSE."""
    return [construct_type(type_=ResponseStreamEvent, value=e) for e in events]


def run(events: list[Any], **kw: Any) -> ResponseAccumulator:
    acc = ResponseAccumulator(kw.pop("tools", TOOLS), **kw)
    for event in events:
        acc.feed(event)
    acc.end()
    return acc


def codes(acc: ResponseAccumulator) -> set[str]:
    return {a.code for a in acc.anomalies}


def find(events: list[dict[str, Any]], kind: str, n: int = 0) -> dict[str, Any]:
    return [e for e in events if e["type"] == kind][n]


# --------------------------------------------------------------------------- the standard stream


@pytest.mark.parametrize("as_sdk", [False, True], ids=["dicts", "sdk-objects"])
def test_a_standard_stream_gives_ready_calls_in_output_order(as_sdk: bool) -> None:
    events = response_events(CALLS, text="Let me look.", reasoning="The user wants weather.")
    acc = run(sdk(events) if as_sdk else events)
    calls = acc.tool_calls
    assert [c.id for c in calls] == ["call_1", "call_2"]
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    assert [c.status for c in calls] == ["ready", "ready"]
    assert calls[0].parsed == {"city": "Paris"}
    assert calls[0].arguments == '{"city": "Paris"}'
    assert [c.index for c in calls] == [2, 3]  # output_index: reasoning and message come first
    assert acc.anomalies == []
    response = acc.get_final_response()
    assert isinstance(response, Response)
    assert response.status == "completed"
    assert [item.type for item in response.output] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]
    assert response.output[2].call_id == "call_1"  # type: ignore[union-attr]
    assert acc.usage is not None
    assert acc.anomalies == []  # the response validated as the SDK's own


def test_events_name_each_step() -> None:
    acc = ResponseAccumulator(TOOLS)
    seen: list[Any] = []
    for event in response_events(CALLS[:1], pieces=4):
        seen.extend(acc.feed(event))
    kinds = [type(e).__name__ for e in seen]
    assert kinds[0] == "ToolCallStarted"
    assert kinds.count("ArgumentsDelta") == 4
    assert "ArgumentsComplete" in kinds
    assert kinds[-2:] == ["ToolCallReady", "ChoiceFinished"]
    assert "".join(e.text for e in seen if isinstance(e, ArgumentsDelta)) == CALLS[0][2]


def test_feed_without_events_writes_the_same_state() -> None:
    events = response_events(CALLS)
    quiet = ResponseAccumulator(TOOLS)
    for event in events:
        assert quiet.feed(event, events=False) == ()
    quiet.end()
    loud = run(events)
    assert [(c.id, c.status, c.arguments) for c in quiet.tool_calls] == [
        (c.id, c.status, c.arguments) for c in loud.tool_calls
    ]


def test_interleaved_deltas_are_kept_apart_by_item_id() -> None:
    events = response_events(CALLS, interleave=True, pieces=5)
    acc = run(events)
    assert [c.arguments for c in acc.tool_calls] == [CALLS[0][2], CALLS[1][2]]
    assert [c.status for c in acc.tool_calls] == ["ready", "ready"]


def test_text_and_reasoning_deltas_become_events() -> None:
    acc = ResponseAccumulator(TOOLS)
    seen: list[Any] = []
    for event in response_events((), text="Hello there", reasoning="hmm"):
        seen.extend(acc.feed(event))
    text = "".join(e.text for e in seen if type(e).__name__ == "ContentDelta")
    reasoning = "".join(e.text for e in seen if type(e).__name__ == "ReasoningDelta")
    assert (text, reasoning) == ("Hello there", "hmm")
    assert acc.tool_calls == []
    assert acc.get_final_response().output_text == "Hello there"


# --------------------------------------------------------------------------- statements disagree


def test_arguments_done_differing_from_the_deltas_refuses_the_call() -> None:
    events = response_events(CALLS)
    find(events, "response.function_call_arguments.done")["arguments"] = '{"city": "Lyon"}'
    acc = run(events)
    first, second = acc.tool_calls
    assert first.status == "invalid"
    assert isinstance(first.error, MalformedArguments)
    assert first.arguments == '{"city": "Paris"}'  # the deltas' text is kept, as received
    assert second.status == "ready"
    assert AnomalyCode.ARGUMENTS_MISMATCH in codes(acc)


def test_output_item_done_differing_from_the_deltas_refuses_the_call() -> None:
    events = response_events(CALLS)
    find(events, "response.output_item.done", 0)["item"]["arguments"] = '{"city": "Paris"} '
    acc = run(events)
    assert acc.tool_calls[0].status == "invalid"


def test_the_final_response_differing_from_the_deltas_refuses_the_call() -> None:
    events = response_events(CALLS)
    events[-1]["response"]["output"][0]["arguments"] = '{"city": "Rome"}'
    acc = run(events)
    assert acc.tool_calls[0].status == "invalid"
    assert acc.tool_calls[1].status == "ready"


@pytest.mark.parametrize("field, value", [("name", "get_time"), ("call_id", "call_9")])
def test_a_done_item_renaming_the_call_refuses_it(field: str, value: str) -> None:
    events = response_events(CALLS[:1])
    find(events, "response.output_item.done")["item"][field] = value
    acc = run(events)
    assert acc.tool_calls[0].status == "invalid"


def test_a_final_response_without_the_call_refuses_it() -> None:
    events = response_events(CALLS)
    del events[-1]["response"]["output"][1]
    acc = run(events)
    assert [c.status for c in acc.tool_calls] == ["ready", "invalid"]


def test_a_delta_after_output_item_done_refuses_the_call() -> None:
    events = response_events(CALLS[:1])
    late = copy.deepcopy(find(events, "response.function_call_arguments.delta"))
    events.insert(-1, late)
    acc = run(events)
    assert acc.tool_calls[0].status == "invalid"


def test_a_repeated_delta_is_caught_by_the_done_statements() -> None:
    events = response_events(CALLS[:1])
    delta = find(events, "response.function_call_arguments.delta", 1)
    events.insert(events.index(delta), copy.deepcopy(delta))
    acc = run(events)
    assert acc.tool_calls[0].status == "invalid"
    assert AnomalyCode.SEQUENCE_NOT_INCREASING in codes(acc)


def test_a_lost_delta_is_caught_by_the_done_statements() -> None:
    events = response_events(CALLS[:1], pieces=4)
    events.remove(find(events, "response.function_call_arguments.delta", 2))
    acc = run(events)
    assert acc.tool_calls[0].status == "invalid"


# --------------------------------------------------------------------------- keyed by item id


def test_a_delta_without_an_item_id_refuses_every_open_call() -> None:
    events = response_events(CALLS, interleave=True)
    del find(events, "response.function_call_arguments.delta", 1)["item_id"]
    acc = run(events)
    assert all(c.status == "invalid" for c in acc.tool_calls)


def test_a_delta_naming_another_output_index_refuses_its_call() -> None:
    events = response_events(CALLS, interleave=True)
    find(events, "response.function_call_arguments.delta", 0)["output_index"] = 1
    acc = run(events)
    assert acc.tool_calls[0].status == "invalid"
    assert acc.tool_calls[1].status == "ready"


def test_a_delta_for_an_unknown_item_is_given_to_no_call() -> None:
    events = response_events(CALLS[:1])
    stray = copy.deepcopy(find(events, "response.function_call_arguments.delta"))
    stray["item_id"] = "fc_elsewhere"
    events.insert(3, stray)
    acc = run(events)
    assert acc.tool_calls[0].status == "ready"
    assert acc.tool_calls[0].arguments == CALLS[0][2]
    assert AnomalyCode.UNKNOWN_ITEM in codes(acc)


def test_a_delta_before_its_item_was_announced_refuses_the_call() -> None:
    events = response_events(CALLS[:1])
    first = find(events, "response.function_call_arguments.delta")
    events.remove(first)
    events.insert(1, first)  # before response.output_item.added
    acc = run(events)
    assert acc.tool_calls[0].status == "invalid"


def test_an_item_announced_twice_is_refused() -> None:
    events = response_events(CALLS[:1])
    added = find(events, "response.output_item.added")
    events.insert(events.index(added) + 2, copy.deepcopy(added))
    acc = run(events)
    assert [c.status for c in acc.tool_calls] == ["invalid"]
    assert AnomalyCode.ITEM_REPEATED in codes(acc)


def test_an_item_of_another_id_claiming_a_calls_call_id_refuses_it() -> None:
    events = response_events(CALLS)
    find(events, "response.output_item.done", 0)["item"]["id"] = "fc_other"
    acc = run(events)
    assert [c.status for c in acc.tool_calls] == ["invalid", "ready"]  # no second call was opened
    events = response_events(CALLS)
    events[-1]["response"]["output"][1]["id"] = "fc_other"
    acc = run(events)
    assert [c.status for c in acc.tool_calls] == ["ready", "invalid"]


def test_text_only_in_the_done_statements_is_read_whole() -> None:
    events = [e for e in response_events(CALLS) if e["type"] != "response.function_call_arguments.delta"]
    acc = run(events)
    assert [c.status for c in acc.tool_calls] == ["ready", "ready"]
    assert acc.tool_calls[0].arguments == CALLS[0][2]
    assert AnomalyCode.ARGUMENTS_WITHOUT_DELTAS in codes(acc)


def test_whole_text_is_refused_when_stray_deltas_could_be_its_own() -> None:
    events = response_events(CALLS[:1])
    for delta in [e for e in events if e["type"] == "response.function_call_arguments.delta"]:
        delta["item_id"] = "fc_other"
    acc = run(events)
    assert acc.tool_calls[0].status == "invalid"


def test_a_call_only_in_the_final_response_is_read_from_there() -> None:
    events = response_events(CALLS)
    streamed = ("response.output_item.added", "response.output_item.done")
    kept = [e for e in events if "item_id" not in e and e["type"] not in streamed]
    acc = run(kept)
    assert [c.status for c in acc.tool_calls] == ["ready", "ready"]
    assert AnomalyCode.ITEM_NOT_STREAMED in codes(acc)


def test_an_output_item_done_without_added_opens_the_call_whole() -> None:
    events = [
        e
        for e in response_events(CALLS[:1])
        if e["type"] not in ("response.output_item.added", "response.function_call_arguments.delta")
        and e["type"] != "response.function_call_arguments.done"
    ]
    acc = run(events)
    assert [c.status for c in acc.tool_calls] == ["ready"]


# --------------------------------------------------------------------------- not completed


@pytest.mark.parametrize("status", ["incomplete", "in_progress", "", "COMPLETED", 1])
def test_output_item_done_with_another_status_leaves_the_call_incomplete(status: Any) -> None:
    events = response_events(CALLS)
    find(events, "response.output_item.done", 0)["item"]["status"] = status
    acc = run(events)
    assert [c.status for c in acc.tool_calls] == ["incomplete", "ready"]
    assert AnomalyCode.ITEM_NOT_DONE in codes(acc)


@pytest.mark.parametrize("as_sdk", [False, True], ids=["dicts", "sdk-objects"])
def test_output_item_done_without_a_status_lets_the_response_decide(as_sdk: bool) -> None:
    """vLLM's gpt-oss sends ``status: null`` on every function_call item (vllm#46940)."""
    completed = response_events(CALLS)
    incomplete = response_events(CALLS, status="incomplete")
    for events in (completed, incomplete):
        for event in events:
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                item["status"] = None
        for item in events[-1]["response"]["output"]:
            item["status"] = None
    acc = run(sdk(completed) if as_sdk else completed)
    assert [c.status for c in acc.tool_calls] == ["ready", "ready"]
    assert AnomalyCode.ITEM_STATUS_MISSING in codes(acc)
    acc = run(sdk(incomplete) if as_sdk else incomplete)
    assert [c.status for c in acc.tool_calls] == ["incomplete", "incomplete"]


def test_items_said_completed_inside_an_incomplete_response_are_not_ready() -> None:
    """vLLM marks every item ``completed``, even the one ``max_output_tokens`` cut (vllm#57998)."""
    events = response_events(CALLS, status="incomplete")
    assert all(i["status"] == "completed" for i in events[-1]["response"]["output"])
    assert not any(c.ready for c in run(events).tool_calls)


def test_arguments_only_in_done_events_without_item_ids() -> None:
    """A Codex model through the ChatGPT backend (litellm#27144): items without ``id``, no delta,
    ``function_call_arguments.done`` without ``item_id``; the call is found by its ``call_id``."""
    events = response_events(CALLS[:1])
    for event in events:
        item = event.get("item")
        if isinstance(item, dict):
            item.pop("id", None)
        event.pop("item_id", None)
    events[-1]["response"]["output"][0].pop("id")
    events = [e for e in events if e["type"] != "response.function_call_arguments.delta"]
    acc = run(events)
    assert [(c.id, c.status, c.arguments) for c in acc.tool_calls] == [("call_1", "ready", CALLS[0][2])]
    assert {AnomalyCode.ARGUMENTS_WITHOUT_DELTAS, AnomalyCode.UNKNOWN_ITEM} <= codes(acc)


def test_a_message_item_closed_but_never_opened_changes_no_call() -> None:
    """The LiteLLM proxy closes a message item it never opened, under a ``chatcmpl-`` id
    (litellm#37852)."""
    events = response_events(CALLS)
    stray = {"id": "chatcmpl-x", "type": "message", "status": "completed", "role": "assistant", "content": []}
    events.insert(-1, {"type": "response.output_item.done", "output_index": 9, "item": stray})
    events.insert(-1, {"type": "response.output_text.done", "item_id": "chatcmpl-x", "text": ""})
    acc = run(events)
    assert [c.status for c in acc.tool_calls] == ["ready", "ready"]


def test_a_missing_output_item_done_leaves_the_call_incomplete() -> None:
    events = response_events(CALLS)
    events.remove(find(events, "response.output_item.done", 1))
    acc = run(events)
    assert [c.status for c in acc.tool_calls] == ["ready", "incomplete"]


def test_response_incomplete_leaves_every_call_incomplete() -> None:
    acc = run(response_events(CALLS, status="incomplete"))
    assert [c.status for c in acc.tool_calls] == ["incomplete", "incomplete"]
    assert "max_output_tokens" in str(acc.tool_calls[0].error)
    response = acc.get_final_response()
    assert response.status == "incomplete"


def test_response_failed_leaves_every_call_incomplete_and_the_response_unbuilt() -> None:
    acc = run(response_events(CALLS, status="failed"))
    assert [c.status for c in acc.tool_calls] == ["incomplete", "incomplete"]
    with pytest.raises(IncompleteStreamError) as caught:
        acc.get_final_response()
    assert len(caught.value.tool_calls) == 2


def test_an_error_event_ends_the_stream() -> None:
    events = response_events(CALLS)[:-3]
    events.append({"type": "error", "code": "server_error", "message": "boom", "sequence_number": 99})
    acc = ResponseAccumulator(TOOLS)
    ended = [e for event in events for e in acc.feed(event)]
    assert acc.ended and acc.status == "error"
    assert all(c.status == "incomplete" for c in acc.tool_calls)
    assert any(isinstance(e, ToolCallIncomplete) for e in ended)
    with pytest.raises(IncompleteStreamError, match="boom"):
        acc.get_final_response()


@pytest.mark.parametrize("cut", range(22))
def test_a_stream_cut_anywhere_never_leaves_a_ready_call(cut: int) -> None:
    events = response_events(CALLS, text="hi")
    assert len(events) == 22  # the last one is response.completed: every cut is before it
    acc = ResponseAccumulator(TOOLS)
    for event in events[:cut]:
        acc.feed(event)
    acc.end(ConnectionError("dropped"))
    assert not any(c.ready for c in acc.tool_calls)
    with pytest.raises(IncompleteStreamError):
        acc.get_final_response()


def test_a_clean_end_without_response_completed_leaves_calls_incomplete() -> None:
    events = response_events(CALLS)[:-1]
    acc = run(events)
    assert [c.status for c in acc.tool_calls] == ["incomplete", "incomplete"]
    assert AnomalyCode.RESPONSE_NOT_COMPLETED in codes(acc)


def test_a_call_announced_after_the_final_event_never_runs() -> None:
    late = [
        e for e in response_events([("call_9", "get_time", '{"tz": "UTC"}')]) if "item_id" in e or "item" in e
    ]
    for event in late:
        if isinstance(event.get("item"), dict):
            event["item"]["id"] = "fc_late"
        if "item_id" in event:
            event["item_id"] = "fc_late"
    acc = run([*response_events(CALLS), *late])
    assert {c.id: c.status for c in acc.tool_calls} == {
        "call_1": "ready",
        "call_2": "ready",
        "call_9": "incomplete",
    }


def test_response_completed_with_another_status_is_not_completed() -> None:
    events = response_events(CALLS)
    events[-1]["response"]["status"] = "incomplete"
    acc = run(events)
    assert not any(c.ready for c in acc.tool_calls)


def test_events_after_the_final_event_change_nothing() -> None:
    events = response_events(CALLS[:1])
    events.append(copy.deepcopy(find(events, "response.function_call_arguments.delta")))
    acc = run(events)
    # The call was sealed ready; a late delta refuses it (a ready call never changes its text).
    assert acc.tool_calls[0].status == "invalid"
    assert acc.tool_calls[0].arguments == CALLS[0][2]
    assert AnomalyCode.CHUNK_AFTER_END in codes(acc)


# --------------------------------------------------------------------------- the request's contract


def test_an_unknown_tool_is_refused() -> None:
    acc = run(response_events(CALLS), tools=[WEATHER])
    assert [c.status for c in acc.tool_calls] == ["ready", "invalid"]
    assert isinstance(acc.tool_calls[1].error, UnknownTool)


def test_no_tools_offered_refuses_every_call() -> None:
    acc = run(response_events(CALLS), tools=[])
    assert all(isinstance(c.error, UnknownTool) for c in acc.tool_calls)


def test_a_schema_violation_is_refused() -> None:
    acc = run(response_events([("call_1", "get_weather", '{"town": "Paris"}')]))
    assert isinstance(acc.tool_calls[0].error, SchemaViolation)


def test_tools_in_the_chat_shape_are_read_too() -> None:
    nested = [{"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}]
    acc = run(response_events([("call_1", "get_weather", '{"town": "Paris"}')]), tools=nested)
    assert isinstance(acc.tool_calls[0].error, SchemaViolation)


@pytest.mark.parametrize(
    "choice, statuses",
    [
        ("none", ["invalid", "invalid"]),
        ("auto", ["ready", "ready"]),
        ("required", ["ready", "ready"]),
        ({"type": "function", "name": "get_weather"}, ["ready", "invalid"]),
        (
            {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_time"}]},
            ["invalid", "ready"],
        ),
        ({"type": "file_search"}, ["invalid", "invalid"]),
        ({"type": "mcp", "server_label": "deepwiki"}, ["invalid", "invalid"]),
    ],
)
def test_tool_choice_is_enforced(choice: Any, statuses: list[str]) -> None:
    acc = run(response_events(CALLS), tool_choice=choice)
    assert [c.status for c in acc.tool_calls] == statuses
    for call in acc.tool_calls:
        if call.status == "invalid":
            assert isinstance(call.error, ContractViolation)


def test_parallel_tool_calls_false_refuses_every_call_after_the_first() -> None:
    acc = run(response_events([*CALLS, ("call_3", "get_time", "{}")]), parallel_tool_calls=False)
    assert [c.status for c in acc.tool_calls] == ["ready", "invalid", "invalid"]


def test_chat_shapes_of_tools_and_tool_choice() -> None:
    assert chat_tools([WEATHER])[0]["function"]["name"] == "get_weather"
    assert chat_tools([{"type": "web_search"}]) == [{"type": "web_search"}]
    assert chat_tool_choice({"type": "function", "name": "x"}) == {
        "type": "function",
        "function": {"name": "x"},
    }
    assert chat_tool_choice("required") == "required"


# --------------------------------------------------------------------------- limits


def test_max_argument_bytes_refuses_the_call() -> None:
    acc = run(
        response_events([("call_1", "get_time", '{"tz": "' + "x" * 500 + '"}')]),
        limits=Limits(max_argument_bytes=100),
    )
    call = acc.tool_calls[0]
    assert call.status == "invalid"
    assert isinstance(call.error, LimitExceeded)
    assert len(call.arguments) <= 2048


def test_max_stream_bytes_refuses_the_call() -> None:
    big = [("call_1", "get_time", '{"tz": "' + "x" * 300 + '"}')] * 1
    acc = run(response_events(big, pieces=10), limits=Limits(max_stream_bytes=100))
    assert acc.tool_calls[0].status == "invalid"
    assert isinstance(acc.tool_calls[0].error, LimitExceeded)


def test_max_calls_per_choice_bounds_the_calls_kept() -> None:
    many = [(f"call_{n}", "get_time", "{}") for n in range(8)]
    acc = run(response_events(many), limits=Limits(max_calls_per_choice=3))
    assert len(acc.tool_calls) <= 4
    assert [c.status for c in acc.tool_calls[:3]] == ["ready"] * 3
    assert all(c.status == "invalid" for c in acc.tool_calls[3:])
    assert AnomalyCode.LIMIT_EXCEEDED in codes(acc)


# --------------------------------------------------------------------------- hostile values


@pytest.mark.parametrize(
    "event",
    [
        None,
        42,
        "response.completed",
        [],
        {},
        {"type": 7},
        {"type": "x" * 100},
        {"type": "response.output_item.added", "item": "no"},
        {"type": "response.output_item.added", "item": {"type": "function_call", "id": 5, "call_id": []}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_2", "delta": {"a": 1}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_2", "delta": None},
        {"type": "response.output_item.done", "item": None},
        {"type": "response.completed", "response": "done"},
        {"type": "response.completed", "response": {"status": "completed", "output": "all"}},
        {"sequence_number": -1, "type": "response.in_progress", "response": {"id": 5}},
    ],
)
def test_a_hostile_event_never_raises_and_never_leaves_a_wrong_ready_call(event: Any) -> None:
    events: list[Any] = response_events(CALLS)
    events.insert(len(events) // 2, event)
    acc = run(events)
    for call in acc.tool_calls:
        if call.ready:
            assert (call.id, call.name, call.arguments) in CALLS


def test_random_mutations_never_make_a_wrong_call_ready() -> None:
    rng = random.Random(25)
    base = response_events(CALLS, text="t", interleave=True)
    for _ in range(300):
        events = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            n = rng.randrange(len(events))
            action = rng.choice(["drop", "dup", "swap", "blank_id", "text"])
            if action == "drop":
                events.pop(n)
            elif action == "dup":
                events.insert(n, copy.deepcopy(events[n]))
            elif action == "swap" and n + 1 < len(events):
                events[n], events[n + 1] = events[n + 1], events[n]
            elif action == "blank_id":
                events[n].pop("item_id", None)
            elif action == "text" and "delta" in events[n]:
                events[n]["delta"] = events[n]["delta"] + "!"
        acc = run(events)
        for call in acc.tool_calls:
            if call.ready:
                assert (call.id, call.name, call.arguments) in CALLS, events


# --------------------------------------------------------------------------- a whole Response


def test_read_response_reads_a_non_streamed_response() -> None:
    final = response_events(CALLS)[-1]["response"]
    for response in (final, Response.model_validate(final)):
        acc = ResponseAccumulator(TOOLS)
        acc.read_response(response)
        acc.end()
        assert [c.status for c in acc.tool_calls] == ["ready", "ready"]
        assert acc.anomalies == []


@pytest.mark.parametrize("status", ["incomplete", "in_progress", "failed", "cancelled", None])
def test_read_response_of_an_unfinished_response_leaves_calls_incomplete(status: str | None) -> None:
    final = copy.deepcopy(response_events(CALLS)[-1]["response"])
    final["status"] = status
    acc = ResponseAccumulator(TOOLS)
    acc.read_response(final)
    acc.end()
    assert [c.status for c in acc.tool_calls] == ["incomplete", "incomplete"]


def test_a_missing_call_id_is_synthesized_once_and_kept_in_the_response() -> None:
    events = response_events(CALLS[:1])
    for event in events:
        item = event.get("item")
        if isinstance(item, dict):
            item.pop("call_id", None)
    for item in events[-1]["response"]["output"]:
        item.pop("call_id", None)
    acc = run(events)
    call = acc.tool_calls[0]
    assert call.ready and call.id and call.id.startswith("call_ts")
    # The response is the server's, never rebuilt: it says what the server said (no call_id).
    assert not getattr(acc.get_final_response().output[0], "call_id", None)


def test_ready_and_invalid_events_for_the_loop() -> None:
    acc = ResponseAccumulator([WEATHER])
    seen = [e for event in response_events(CALLS) for e in acc.feed(event)]
    # The second call can never match its schema: refused while it streams (early), before the
    # response completes and seals the first; each call is announced once.
    verdicts = [e for e in seen if isinstance(e, ToolCallReady | ToolCallInvalid)]
    assert [type(e) for e in verdicts] == [ToolCallInvalid, ToolCallReady]
    assert [e.call for e in verdicts] == acc.tool_calls[::-1]


def test_the_responses_accumulator_is_a_sibling_not_a_chat_accumulator() -> None:
    acc = run(response_events(CALLS))
    from toolstitch import Accumulator

    assert not isinstance(acc, Accumulator)
    assert not hasattr(acc, "get_final_completion")


ODD_TYPES = [["function_call"], {"type": "function_call"}, 1, "\ud800", "x" * 100_000]


@pytest.mark.parametrize("item_type", ODD_TYPES)
@pytest.mark.parametrize("event", ["response.output_item.added", "response.output_item.done"])
def test_an_item_whose_type_is_no_call_type_is_no_call(item_type: Any, event: str) -> None:
    # A list or an object there once raised inside the reader (an ``internal_error``): it names no
    # call item, as an unknown string does, and the call beside it is read as ever.
    acc = ResponseAccumulator()
    odd = {"type": item_type, "id": "x_1", "call_id": "c0", "name": "f", "arguments": "{}"}
    call = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}"}
    acc.feed({"type": event, "output_index": 0, "item": odd})
    acc.feed({"type": "response.output_item.done", "output_index": 1, "item": call})
    response = {
        "id": "r",
        "object": "response",
        "created_at": 0,
        "model": "m",
        "output": [odd, call],
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    acc.feed({"type": "response.completed", "response": response})
    acc.end()
    assert [(c.id, c.status) for c in acc.tool_calls] == [("c1", "ready")]
    assert "internal_error" not in {a.code for a in acc.anomalies}
