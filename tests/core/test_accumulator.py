"""The sans-I/O core: keying, sealing, statuses, limits, and the finished ChatCompletion."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import toolstitch as ts
from toolstitch.testing import chunk


def tc(
    index: int | None = None, id: str | None = None, name: str | None = None, args: Any = None
) -> dict[str, Any]:
    """One ``delta.tool_calls`` entry, with only the keys given."""
    entry: dict[str, Any] = {}
    if index is not None:
        entry["index"] = index
    if id is not None:
        entry["id"] = id
        entry["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    if function:
        entry["function"] = function
    return entry


def calls_chunk(*entries: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return chunk(delta={"tool_calls": list(entries)}, finish_reason=finish)


# The seed case from the core issue: nine fragments of two interleaved calls.
SEED_FRAGMENTS = [
    tc(0, "call_a1", "get_weather", ""),
    tc(1, "call_b2", "get_weather", ""),
    tc(0, args='{"ci'),
    tc(1, args='{"ci'),
    tc(0, args='ty":"深'),
    tc(1, args='ty":"上'),
    tc(0, args='圳"}'),
    tc(1, args='海","unit":"\\"'),
    tc(1, args='u\\""}'),
]


def seed_stream() -> list[dict[str, Any]]:
    return [
        chunk(delta={"role": "assistant", "content": None}),
        *(calls_chunk(f) for f in SEED_FRAGMENTS),
        chunk(delta={}, finish_reason="tool_calls"),
    ]


def feed_all(acc: ts.Accumulator, chunks: list[dict[str, Any]]) -> list[Any]:
    events: list[Any] = []
    for c in chunks:
        events.extend(acc.feed(c))
    return events


def test_seed_case_two_interleaved_calls_keyed_by_index() -> None:
    assert len(SEED_FRAGMENTS) == 9
    acc = ts.Accumulator()
    feed_all(acc, seed_stream())
    calls = acc.tool_calls
    assert [(c.id, c.name, c.status) for c in calls] == [
        ("call_a1", "get_weather", "ready"),
        ("call_b2", "get_weather", "ready"),
    ]
    assert calls[0].parsed == {"city": "深圳"}
    assert calls[1].parsed == {"city": "上海", "unit": '"u"'}
    assert calls[1].arguments == '{"city":"上海","unit":"\\"u\\""}'
    # Keying by id, as many hand-written mergers do, would have made three keys: the two ids and
    # None for every fragment after the first (later fragments carry no id).
    by_id_keys = {f.get("id") for f in SEED_FRAGMENTS}
    assert by_id_keys == {"call_a1", "call_b2", None}


def test_seed_case_through_sdk_chunk_objects() -> None:
    acc = ts.Accumulator()
    for c in seed_stream():
        acc.feed(ChatCompletionChunk.model_validate(c))
    assert [c.parsed for c in acc.tool_calls] == [{"city": "深圳"}, {"city": "上海", "unit": '"u"'}]


def test_id_and_name_are_written_once_and_never_appended() -> None:
    acc = ts.Accumulator()
    feed_all(
        acc,
        [
            calls_chunk(tc(0, "call_x", "lookup", '{"q":')),
            calls_chunk(tc(0, "call_x", "lookup", '"a"}')),
            chunk(delta={}, finish_reason="tool_calls"),
        ],
    )
    (call,) = acc.tool_calls
    assert call.id == "call_x"
    assert call.name == "lookup"
    assert call.parsed == {"q": "a"}
    assert {a.code for a in call.anomalies} >= {"id_repeated", "name_repeated"}


@pytest.mark.parametrize(
    "entry",
    [
        tc(0, args=""),
        {"index": 0, "function": {"name": None}},
        {"index": 0},
        {"index": 0, "function": None},
    ],
    ids=["empty-string", "missing-arguments", "missing-function", "null-function"],
)
def test_empty_missing_arguments_and_function_add_nothing(entry: dict[str, Any]) -> None:
    acc = ts.Accumulator()
    feed_all(
        acc,
        [
            calls_chunk(tc(0, "call_1", "f", "")),
            calls_chunk(tc(0, args='{"a":')),
            calls_chunk(entry),
            calls_chunk(tc(0, args="1}")),
            chunk(delta={}, finish_reason="tool_calls"),
        ],
    )
    (call,) = acc.tool_calls
    assert call.arguments == '{"a":1}'
    assert call.status == "ready"


def test_empty_arguments_are_not_an_empty_object() -> None:
    acc = ts.Accumulator()
    feed_all(acc, [calls_chunk(tc(0, "call_1", "ping", "")), chunk(delta={}, finish_reason="tool_calls")])
    (call,) = acc.tool_calls
    assert call.status == "invalid"
    assert isinstance(call.error, ts.errors.EmptyArguments)
    assert call.parsed is None
    # The final message keeps exactly what arrived.
    message = acc.get_final_completion().choices[0].message
    assert message.tool_calls is not None
    assert message.tool_calls[0].function.arguments == ""


def test_empty_arguments_policy_is_explicit_and_recorded() -> None:
    acc = ts.Accumulator(empty_arguments="object")
    feed_all(acc, [calls_chunk(tc(0, "call_1", "ping", "")), chunk(delta={}, finish_reason="tool_calls")])
    (call,) = acc.tool_calls
    assert call.status == "ready"
    assert call.parsed == {}
    assert "empty_arguments_as_object" in {a.code for a in call.anomalies}


def test_call_is_open_until_finish_reason_even_when_json_is_complete() -> None:
    acc = ts.Accumulator()
    events = feed_all(acc, [calls_chunk(tc(0, "call_1", "f", '{"a": 1}'))])
    (call,) = acc.tool_calls
    assert call.status == "open"
    assert call.scanner.complete
    assert any(isinstance(e, ts.events.ArgumentsComplete) for e in events)
    assert not any(isinstance(e, ts.events.ToolCallReady) for e in events)
    events = acc.feed(chunk(delta={}, finish_reason="tool_calls"))
    assert call.status == "ready"
    assert [type(e) for e in events] == [ts.events.ToolCallReady, ts.events.ChoiceFinished]


def test_malformed_arguments_are_reported_early_and_keep_raw_text() -> None:
    acc = ts.Accumulator()
    events = feed_all(acc, [calls_chunk(tc(0, "call_1", "f", '{"a": 1]'))])
    malformed = [e for e in events if isinstance(e, ts.events.ArgumentsMalformed)]
    assert malformed and malformed[0].position == 7
    acc.feed(chunk(delta={}, finish_reason="tool_calls"))
    (call,) = acc.tool_calls
    assert call.status == "invalid"
    assert isinstance(call.error, ts.errors.MalformedArguments)
    assert call.error.raw == '{"a": 1]'


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[1, 2]", ts.errors.ArgumentsNotAnObject),
        ('{"a": NaN}', ts.errors.MalformedArguments),
        ('{"a": 1} trailing', ts.errors.MalformedArguments),
        ('{"a": tru}', ts.errors.MalformedArguments),
    ],
)
def test_strict_parse_at_seal(text: str, error: type[Exception]) -> None:
    acc = ts.Accumulator()
    feed_all(acc, [calls_chunk(tc(0, "call_1", "f", text)), chunk(delta={}, finish_reason="tool_calls")])
    (call,) = acc.tool_calls
    assert call.status == "invalid"
    assert isinstance(call.error, error)
    assert call.error.raw == text


def test_stream_that_ends_early_leaves_calls_incomplete_and_raises() -> None:
    acc = ts.Accumulator()
    feed_all(acc, [calls_chunk(tc(0, "call_1", "f", '{"a": 1}'))])
    with pytest.raises(ts.IncompleteStreamError) as info:
        acc.get_final_completion()
    (call,) = acc.tool_calls
    assert call.status == "incomplete"
    assert isinstance(call.error, ts.errors.CallIncomplete)
    assert info.value.tool_calls == [call]
    partial = info.value.partial
    assert partial.choices[0].message.tool_calls[0].function.arguments == '{"a": 1}'
    assert partial.choices[0].finish_reason is None


def test_finish_reason_length_never_makes_a_call_ready() -> None:
    acc = ts.Accumulator()
    feed_all(acc, [calls_chunk(tc(0, "call_1", "f", '{"a": 1}')), chunk(delta={}, finish_reason="length")])
    (call,) = acc.tool_calls
    assert call.status == "incomplete"


def test_sdk_error_marks_open_calls_incomplete() -> None:
    acc = ts.Accumulator()
    feed_all(acc, [calls_chunk(tc(0, "call_1", "f", '{"a": 1}'))])
    boom = RuntimeError("connection dropped")
    acc.end(boom)
    assert acc.tool_calls[0].status == "incomplete"
    with pytest.raises(ts.IncompleteStreamError, match="connection dropped"):
        acc.get_final_completion()


def test_late_fragment_does_not_change_a_sealed_call() -> None:
    acc = ts.Accumulator()
    feed_all(
        acc,
        [
            calls_chunk(tc(0, "call_1", "f", '{"a": 1}')),
            chunk(delta={}, finish_reason="tool_calls"),
            calls_chunk(tc(0, args=', "b": 2}')),
        ],
    )
    (call,) = acc.tool_calls
    assert call.arguments == '{"a": 1}'
    assert call.status == "invalid"
    assert isinstance(call.error, ts.errors.LateFragment)
    assert call.error.raw == ', "b": 2}'


def test_argument_byte_limit_makes_the_call_invalid_and_keeps_a_sample() -> None:
    limits = ts.Limits(max_argument_bytes=100, sample_chars=10)
    acc = ts.Accumulator(limits=limits)
    big = '{"text": "' + "é" * 200 + '"}'
    events = feed_all(
        acc,
        [
            calls_chunk(tc(0, "call_1", "write", big[:60])),
            calls_chunk(tc(0, args=big[60:])),
            calls_chunk(tc(1, "call_2", "small", '{"x": 1}')),
            chunk(delta={"content": "still flowing"}),
            chunk(delta={}, finish_reason="tool_calls"),
        ],
    )
    first, second = acc.tool_calls
    assert first.status == "invalid"
    assert isinstance(first.error, ts.errors.LimitExceeded)
    assert first.error.limit == "max_argument_bytes"
    assert len(first.arguments) == 10
    assert first.error.raw == big[:10]
    assert second.status == "ready"
    assert any(isinstance(e, ts.events.ToolCallInvalid) and e.call is first for e in events)
    assert acc.get_final_completion().choices[0].message.content == "still flowing"


def test_calls_per_choice_limit() -> None:
    acc = ts.Accumulator(limits=ts.Limits(max_calls_per_choice=2))
    feed_all(
        acc,
        [
            calls_chunk(*(tc(i, f"call_{i}", "f", "{}") for i in range(3))),
            chunk(delta={}, finish_reason="tool_calls"),
        ],
    )
    assert [c.status for c in acc.tool_calls] == ["ready", "ready", "invalid"]
    error = acc.tool_calls[2].error
    assert isinstance(error, ts.errors.LimitExceeded) and error.limit == "max_calls_per_choice"


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]


def test_schema_check_against_request_tools() -> None:
    acc = ts.Accumulator(tools=TOOLS)
    feed_all(
        acc,
        [
            calls_chunk(tc(0, "call_1", "get_weather", '{"city": "Oslo"}')),
            calls_chunk(tc(1, "call_2", "get_weather", '{"unit": "k"}')),
            calls_chunk(tc(2, "call_3", "launch_rocket", "{}")),
            chunk(delta={}, finish_reason="tool_calls"),
        ],
    )
    ok, bad, unknown = acc.tool_calls
    assert ok.status == "ready"
    assert bad.status == "invalid" and isinstance(bad.error, ts.errors.SchemaViolation)
    assert bad.parsed == {"unit": "k"}
    assert any("city" in e for e in bad.error.errors) and any("unit" in e for e in bad.error.errors)
    assert unknown.status == "invalid" and isinstance(unknown.error, ts.errors.UnknownTool)


def test_final_completion_carries_everything() -> None:
    lp = {"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}
    chunks = [
        chunk(
            choices=[
                {"index": 0, "delta": {"role": "assistant", "content": "Hi", "reasoning_content": "think "}},
                {"index": 1, "delta": {"role": "assistant", "content": "Yo"}},
            ],
            system_fingerprint="fp_1",
            service_tier="default",
        ),
        chunk(choices=[{"index": 0, "delta": {"reasoning_content": "more"}, "logprobs": {"content": [lp]}}]),
        chunk(choices=[{"index": 0, "delta": {"content": "!"}, "logprobs": {"content": [lp]}}]),
        chunk(choices=[{"index": 1, "delta": {"tool_calls": [tc(0, "call_9", "f", '{"k": [1]}')]}}]),
        chunk(
            choices=[
                {"index": 0, "delta": {}, "finish_reason": "stop"},
                {"index": 1, "delta": {}, "finish_reason": "tool_calls"},
            ]
        ),
        chunk(choices=[], usage={"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}),
    ]
    acc = ts.Accumulator()
    feed_all(acc, chunks)
    completion = acc.get_final_completion()
    assert isinstance(completion, ChatCompletion)
    assert completion.id == "chatcmpl-test" and completion.object == "chat.completion"
    assert completion.system_fingerprint == "fp_1" and completion.service_tier == "default"
    assert completion.usage is not None and completion.usage.total_tokens == 8
    first, second = completion.choices
    assert first.message.content == "Hi!"
    assert first.finish_reason == "stop"
    assert first.message.model_extra == {"reasoning_content": "think more"}
    assert first.logprobs is not None and first.logprobs.content is not None
    assert len(first.logprobs.content) == 2
    assert second.message.tool_calls is not None
    assert second.message.tool_calls[0].function.arguments == '{"k": [1]}'
    assert acc.calls(1)[0].parsed == {"k": [1]}
    assert acc.tool_calls == []  # choice 0 has none
    # Round-trips through the SDK's own serialisation.
    again = ChatCompletion.model_validate(completion.model_dump())
    assert again == completion
    assert (
        json.loads(completion.model_dump_json())["choices"][0]["message"]["reasoning_content"] == "think more"
    )


def test_refusal_is_kept() -> None:
    acc = ts.Accumulator()
    feed_all(
        acc,
        [
            chunk(delta={"role": "assistant", "refusal": "I can't "}),
            chunk(delta={"refusal": "help with that."}),
            chunk(delta={}, finish_reason="stop"),
        ],
    )
    message = acc.get_final_completion().choices[0].message
    assert message.refusal == "I can't help with that."
    assert message.content is None


def test_unusable_chunks_become_anomalies_and_the_stream_goes_on() -> None:
    acc = ts.Accumulator()
    for bad in (None, 42, "text", {"choices": "nope"}, {"choices": [None, 3]}):
        acc.feed(bad)
    feed_all(acc, seed_stream())
    assert len(acc.tool_calls) == 2
    assert all(c.ready for c in acc.tool_calls)
    assert "malformed_chunk" in {a.code for a in acc.anomalies}


def test_sequence_numbers_drop_replayed_chunks() -> None:
    acc = ts.Accumulator()
    stream = seed_stream()
    for seq, c in enumerate(stream):
        acc.feed(c, seq=seq)
    for seq, c in enumerate(stream):  # a proxy reconnects and replays from the start
        acc.feed(c, seq=seq)
    assert [c.parsed for c in acc.tool_calls] == [{"city": "深圳"}, {"city": "上海", "unit": '"u"'}]
    assert "replayed_chunk" in {a.code for a in acc.anomalies}


def test_events_describe_the_stream_in_order() -> None:
    acc = ts.Accumulator()
    events = feed_all(acc, seed_stream())
    kinds = [type(e).__name__ for e in events]
    assert kinds[:2] == ["ToolCallStarted", "ToolCallStarted"]
    assert kinds.count("ArgumentsComplete") == 2
    assert kinds[-3:] == ["ToolCallReady", "ToolCallReady", "ChoiceFinished"]
    assert acc.metrics.chunks == len(seed_stream())
    call = acc.tool_calls[1]
    assert call.metrics.fragments == 5
    assert call.metrics.bytes == len(call.arguments.encode())
    assert call.metrics.sealed_at is not None and call.metrics.arguments_complete_at is not None


def test_strict_tools_accept_an_omitted_nullable_property() -> None:
    """Strict mode spells "optional" as required-but-nullable; a server that ignores ``strict`` lets the
    model omit such a property, which means the same (use the default). A missing non-nullable
    property is still a violation."""
    strict = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"anyOf": [{"enum": ["c", "f"]}, {"type": "null"}]},
                },
                "required": ["city", "unit"],
                "additionalProperties": False,
            },
        },
    }
    acc = ts.Accumulator(tools=[strict])
    feed_all(
        acc,
        [
            calls_chunk(tc(0, "call_1", "get_weather", '{"city": "Oslo"}')),
            calls_chunk(tc(1, "call_2", "get_weather", '{"unit": "c"}')),
            chunk(delta={}, finish_reason="tool_calls"),
        ],
    )
    omitted_unit, omitted_city = acc.tool_calls
    assert omitted_unit.status == "ready"
    assert omitted_city.status == "invalid" and isinstance(omitted_city.error, ts.errors.SchemaViolation)
    # Without strict the schema is taken literally.
    loose = {"type": "function", "function": {**strict["function"], "strict": False}}
    acc = ts.Accumulator(tools=[loose])
    feed_all(
        acc,
        [
            calls_chunk(tc(0, "call_1", "get_weather", '{"city": "Oslo"}')),
            chunk(delta={}, finish_reason="tool_calls"),
        ],
    )
    assert acc.tool_calls[0].status == "invalid"
