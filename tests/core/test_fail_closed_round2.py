"""Fail closed, round 2 (the core's part): values the strict parse refuses, a completion's two
"choice 0", memory across calls and choices, and previews that stay linear."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

import toolstitch as ts
from toolstitch.text import _preview


def head(i: int, name: str = "f", choice: int = 0, cid: str | None = None) -> dict[str, Any]:
    entry = {
        "index": i,
        "id": cid or f"call_{choice}_{i}",
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }
    return {"choices": [{"index": choice, "delta": {"tool_calls": [entry]}}]}


def text(i: int, args: str, choice: int = 0) -> dict[str, Any]:
    return {
        "choices": [
            {"index": choice, "delta": {"tool_calls": [{"index": i, "function": {"arguments": args}}]}}
        ]
    }


def done(choice: int = 0) -> dict[str, Any]:
    return {"choices": [{"index": choice, "delta": {}, "finish_reason": "tool_calls"}]}


def one_call(args: str, tools: Any = None) -> ts.ToolCall:
    acc = ts.Accumulator(tools=tools)
    for chunk in (head(0), text(0, args), done()):
        acc.feed(chunk)
    (call,) = acc.tool_calls
    return call


@pytest.mark.parametrize(
    "args",
    [
        '{"x": 1e400}',
        '{"x": -1e400}',
        '{"x": 1' + "0" * 400 + "}",
        '{"city": "Paris", "city": "London"}',
        '{"a": {"b": 1, "b": 1}}',
        '{"a": [{"k": 1, "k": 2}]}',
        '{"x": NaN}',
        '{"x": Infinity}',
        '{"x": -Infinity}',
        '{"x": "\\udc00"}',
        '{"x": "\\ud83d"}',
        '{"\\ud800": 1}',
    ],
)
def test_values_parsers_read_differently_refuse_the_call(args: str) -> None:
    call = one_call(args)
    assert call.status == "invalid" and isinstance(call.error, ts.errors.MalformedArguments)
    assert call.parsed is None


@pytest.mark.parametrize("args", ['{"x": 1e308}', '{"x": "\\ud83d\\ude00"}', '{"a": 1, "b": {"a": 2}}'])
def test_values_every_parser_reads_alike_are_ready(args: str) -> None:
    call = one_call(args)
    assert call.ready and call.parsed == json.loads(args)


def test_a_completions_two_choice_zero_do_not_merge_and_none_of_their_calls_runs() -> None:
    def message(*ids: str) -> dict[str, Any]:
        calls = [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]
        return {"role": "assistant", "content": None, "tool_calls": calls}

    completion = {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "tool_calls", "message": message("a")},
            {"index": 0, "finish_reason": "tool_calls", "message": message("b", "c")},
        ],
    }
    calls = ts.calls_of(completion, choice=None)
    assert calls and all(c.status == "invalid" for c in calls)


def test_two_pieces_of_one_chunk_for_one_choice_refuse_its_calls() -> None:
    acc = ts.Accumulator()
    acc.feed(head(0))
    piece = {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}
    acc.feed({"choices": [piece, dict(piece, finish_reason="tool_calls")]})
    acc.feed(done())
    assert [c.status for c in acc.tool_calls] == ["invalid"]


def test_a_ready_call_of_a_tool_without_parameters_says_its_arguments_parse() -> None:
    tools = [
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
    ]
    acc = ts.Accumulator(tools=tools)
    for chunk in (head(0, "now"), done()):
        acc.feed(chunk)
    (call,) = acc.tool_calls
    assert call.ready and call.parsed == {}
    (message_call,) = acc.get_final_completion().choices[0].message.tool_calls or []
    assert json.loads(message_call.function.arguments) == call.parsed


@pytest.mark.parametrize(("calls", "choices"), [(40, 1), (1, 40), (8, 5)])
def test_every_byte_kept_across_calls_and_choices_counts_against_the_stream(calls: int, choices: int) -> None:
    limits = ts.Limits(max_stream_bytes=4_000_000, max_argument_bytes=1_000_000)
    acc = ts.Accumulator(limits=limits)
    tracemalloc.start()
    try:
        for c in range(choices):
            for i in range(calls):
                acc.feed(head(i, choice=c), events=False)
                acc.feed(text(i, '{"t": "', choice=c), events=False)
                for k in range(200):  # 200 distinct pieces of 4,000 bytes: 800 KB per call
                    acc.feed(text(i, f"{k:04d}" * 1000, choice=c), events=False)
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    sent = calls * choices * 800_000
    assert sent > 3 * limits.max_stream_bytes
    assert kept < 2 * limits.max_stream_bytes, kept
    refused = [c for c in acc.calls() if c.status == "invalid"]
    assert refused and all(isinstance(c.error, ts.errors.LimitExceeded) for c in refused)


def test_previews_read_after_every_fragment_stay_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted, not timed: the characters copied into previews grow linearly with the text."""
    copied = [0]
    real = _preview._copy

    def counting(value: Any) -> Any:
        copied[0] += len(json.dumps(value))
        return real(value)

    monkeypatch.setattr(_preview, "_copy", counting)

    def run(body: str) -> int:
        copied[0] = 0
        acc = ts.Accumulator()
        acc.feed(head(0), events=False)
        for i in range(0, len(body), 16):
            acc.feed(text(0, body[i : i + 16]), events=False)
            acc.tool_calls[0].preview  # noqa: B018 - a UI reading after every fragment
        return copied[0]

    for make in (
        lambda n: '{"t": "' + "x" * n + '"}',
        lambda n: "{" + ",".join(f'"k{i}": {i}' for i in range(n // 8)) + "}",
        lambda n: '{"a": [' + ",".join(str(i % 10) for i in range(n // 2)) + "]}",
        lambda n: '{"t": "' + "\\ud83d\\ude00" * (n // 12) + '"}',
    ):
        small, large = run(make(30_000)), run(make(120_000))
        assert large < 6 * small, (small, large)  # 4x the text: about 4x the copying, not 16x


@pytest.mark.parametrize("reenter", ["feed", "end"])
def test_a_clock_that_feeds_or_ends_the_accumulator_again_refuses_the_open_calls(reenter: str) -> None:
    """A caller's clock runs inside a read: calling back into the accumulator from it cannot leave
    a call ready on a view of the stream that changed under the read."""
    acc: ts.Accumulator
    armed = [False]

    def clock() -> float:
        if armed[0]:
            armed[0] = False
            if reenter == "feed":
                acc.feed(text(0, '"x"}'))
            else:
                acc.end()
        return 1.0

    acc = ts.Accumulator(clock=clock, limits=ts.Limits(max_stream_bytes=64))
    acc.feed(head(0))
    armed[0] = True  # the first argument text asks the clock (first_argument_at)
    acc.feed(text(0, '{"a": 1}'))
    acc.feed(done())
    acc.end()
    assert [c.status for c in acc.tool_calls] != ["ready"]
    assert all(c.status in ("invalid", "incomplete") for c in acc.tool_calls)


class Hostile:
    """A value whose comparisons, hash and truth all raise."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __bool__(self) -> bool:
        raise RuntimeError("bool")


@pytest.mark.parametrize("field", ["model", "id", "system_fingerprint", "service_tier", "created", "object"])
def test_an_envelope_value_that_raises_when_compared_changes_nothing(field: str) -> None:
    acc = ts.Accumulator()
    acc.feed(head(0))
    acc.feed({field: Hostile(), **text(0, '{"a": 1}')})
    acc.feed(done())
    (call,) = acc.tool_calls
    assert call.ready and call.parsed == {"a": 1}


class Chunk(dict):  # type: ignore[type-arg]
    """A ``dict`` subclass: not what the SDK decodes, so the reader cannot vouch for what it holds."""


@pytest.mark.parametrize("odd", [Chunk(text(0, "1}")), ["not", "a", "chunk"], "data: {}", 7, None])
def test_a_chunk_that_cannot_be_read_refuses_every_open_call(odd: Any) -> None:
    acc = ts.Accumulator()
    acc.feed(head(0))
    acc.feed(text(0, '{"a": '))
    acc.feed(odd)
    acc.feed(text(0, "1}"))
    acc.feed(done())
    (call,) = acc.tool_calls
    assert call.status == "invalid"
    assert "malformed_chunk" in [a.code for a in acc.anomalies]


def test_finished_stays_bounded_however_many_finish_reasons_arrive() -> None:
    acc = ts.Accumulator()
    acc.feed(head(0))
    acc.feed(text(0, "{}"))
    for _ in range(10_000):
        acc.feed(done(), events=False)
    acc.feed(head(1))  # a call opened after the finish: the next finish decides it, and says so
    acc.feed(text(1, "{}"))
    acc.feed(done(), events=False)
    assert acc.finished == [0, 0]
    assert len(acc.finish_reasons[0]) <= 16


def test_many_unreadable_pieces_in_one_chunk_cost_what_is_still_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile chunk of 5,000 choice pieces without a usable index, after 40 choices of 50 calls:
    each piece refuses every open call, and asking costs only what is still open (counted)."""
    acc = ts.Accumulator()
    for c in range(40):
        for i in range(50):
            acc.feed(head(i, choice=c), events=False)
    looked = [0]

    def open_calls(self: Any) -> Any:
        looked[0] += len(self._live)
        return real_open(self)

    real_open = ts.Accumulator._open_calls
    monkeypatch.setattr(ts.Accumulator, "_open_calls", open_calls)
    pieces = [{"index": True, "delta": {"content": "x"}} for _ in range(5_000)]
    acc.feed({"choices": pieces}, events=False)
    assert all(c.status == "invalid" for c in acc.calls())
    assert looked[0] < 2 * 40 * 50 + 5_000  # not 5,000 x 2,000


def test_sdk_objects_missing_a_declared_field_are_read_as_sent() -> None:
    """The SDK's own classes keep every declared field in ``__dict__``; one that lacks one (built by
    hand, or edited) is read as it is, the field absent, never an internal failure."""
    from openai.types.chat import ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import (
        Choice,
        ChoiceDelta,
        ChoiceDeltaToolCall,
        ChoiceDeltaToolCallFunction,
    )

    def without(obj: Any, *names: str) -> Any:
        for name in names:
            del obj.__dict__[name]
        return obj

    def piece(entry: Any, finish: str | None = None) -> Any:
        delta = without(ChoiceDelta.construct(tool_calls=[entry] if entry is not None else None), "role")
        choice = without(Choice.construct(delta=delta, finish_reason=finish), "index", "logprobs")
        return without(ChatCompletionChunk.construct(choices=[choice]), "usage")

    acc = ts.Accumulator()
    function = without(ChoiceDeltaToolCallFunction.construct(name="f"), "arguments")
    acc.feed(piece(ChoiceDeltaToolCall.construct(index=0, id="call_1", type="function", function=function)))
    function = without(ChoiceDeltaToolCallFunction.construct(arguments='{"a": 1}'), "name")
    acc.feed(piece(without(ChoiceDeltaToolCall.construct(function=function), "index", "id", "type")))
    acc.feed(piece(None, "tool_calls"))
    (call,) = acc.tool_calls
    assert call.ready and call.parsed == {"a": 1}
    assert "internal_error" not in [a.code for a in acc.anomalies]
