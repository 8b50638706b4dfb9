"""Fail closed (issue 10, the core's part): nothing altered, unchecked or forbidden becomes ``ready``.

Each class of failure is tried as plain chunk dicts and, where the SDK is involved in how the value
arrives (lone surrogates from JSON escapes), over real HTTP with the real ``openai`` client against
the project's local server. The invariant checked everywhere: a ``ready`` call holds exactly the
text that arrived, valid, and allowed by the request.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

import toolstitch as ts
from toolstitch.core import sealed_call
from toolstitch.testing import LocalServer, StreamScript

F = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
G = {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}}
NO_PARAMS = {
    "type": "function",
    "function": {"name": "now", "parameters": {"type": "object", "properties": {}}},
}
BARE = {"type": "function", "function": {"name": "ping"}}
CITY = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def entry(index: Any = 0, id: Any = None, name: Any = None, args: Any = None) -> dict[str, Any]:
    e: dict[str, Any] = {"index": index, "function": {}}
    if id is not None:
        e["id"] = id
        e["type"] = "function"
    if name is not None:
        e["function"]["name"] = name
    if args is not None:
        e["function"]["arguments"] = args
    return e


def calls(*entries: dict[str, Any], choice: int = 0, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": choice, "delta": {"tool_calls": list(entries)}, "finish_reason": finish}],
    }


def done(choice: int = 0, reason: str = "tool_calls") -> dict[str, Any]:
    return {"choices": [{"index": choice, "delta": {}, "finish_reason": reason}]}


def run(chunks: list[Any], **kw: Any) -> ts.Accumulator:
    acc = ts.Accumulator(**kw)
    for c in chunks:
        acc.feed(c)
    acc.end()
    return acc


def codes(acc: ts.Accumulator) -> set[str]:
    return {a.code for a in acc.anomalies}


def assert_ready_is_exact(acc: ts.Accumulator) -> None:
    for call in acc.calls():
        if call.ready:
            call.arguments.encode("utf-8")  # valid Unicode
            assert json.loads(call.arguments) == call.parsed


# --------------------------------------------------------------------------- (a) text kept exactly


def test_a_lone_surrogate_in_arguments_refuses_the_call_and_keeps_the_text() -> None:
    text = '{"cmd": "rm -rf /data/archive/old\udc80"}'
    acc = run([calls(entry(0, "call_1", "f", text[:20])), calls(entry(0, args=text[20:])), done()])
    (call,) = acc.tool_calls
    assert call.status == "invalid"
    assert call.arguments == text
    assert isinstance(call.error, ts.errors.MalformedArguments)
    assert "Unicode" in call.error.message
    assert "internal_error" not in codes(acc)
    assert call.metrics.bytes == len(text.encode("utf-8", "surrogatepass"))


def test_a_surrogate_pair_split_across_fragments_joins_into_its_character() -> None:
    pair = "😀".encode("utf-16-le").decode("utf-16-le", "surrogatepass")  # one code point
    high, low = "\ud83d", "\ude00"
    acc = run(
        [
            calls(entry(0, "call_1", "f", '{"face": "' + high)),
            calls(entry(0, args=low + '"}')),
            done(),
        ],
    )
    (call,) = acc.tool_calls
    assert call.ready, call.error
    assert call.arguments == '{"face": "😀"}' == '{"face": "' + pair + '"}'
    assert call.parsed == {"face": "😀"}


def test_a_lone_surrogate_in_the_name_of_a_call_without_id_does_not_crash() -> None:
    acc = run([calls({"index": 0, "function": {"name": "f\udc80", "arguments": "{}"}}), done()])
    (call,) = acc.tool_calls
    assert call.status == "invalid"
    assert call.id and call.id.startswith("call_ts")
    assert "internal_error" not in codes(acc)
    acc.get_final_completion()


def test_a_lone_surrogate_over_real_http(server: LocalServer) -> None:
    # The SDK decodes the JSON escape \udc80 into a Python str holding a lone surrogate.
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    first = json.dumps(
        {
            **head,
            "choices": [
                {"index": 0, "delta": {"tool_calls": [entry(0, "call_1", "sh", '{"c": "rm -rf /x/old')]}}
            ],
        }
    )
    # Written by hand: json.dumps would escape the backslash of the surrogate escape.
    second = (
        '{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": '
        '{"arguments": "\\udc80\\"}"}}]}, "finish_reason": "tool_calls"}]}'
    )
    server.enqueue(StreamScript([f"data: {first}\n\n", f"data: {second}\n\n"]))
    acc = ts.Accumulator()
    stream = server.client().chat.completions.create(model="m", messages=[], stream=True)
    for chunk in stream:
        acc.feed(chunk)
    acc.end()
    (call,) = acc.tool_calls
    assert call.status == "invalid"
    assert call.arguments == '{"c": "rm -rf /x/old\udc80"}'


# --------------------------------------------------------------------------- (b) containment


def test_a_logprobs_value_of_the_wrong_type_keeps_the_finish_reason() -> None:
    bad = {"choices": [{"index": 0, "delta": {}, "logprobs": {"content": 5}, "finish_reason": "tool_calls"}]}
    acc = run([calls(entry(0, "call_1", "f", '{"a": 1}')), bad])
    (call,) = acc.tool_calls
    assert call.ready
    assert acc.get_final_completion().choices[0].finish_reason == "tool_calls"


def test_an_internal_failure_refuses_the_calls_the_chunk_touched_and_reads_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolstitch.core._owner import TRANSITIONS, Cell

    real = TRANSITIONS["open"]["fragment"]

    def broken(owner: Any, call: Any, fragment: Any, events: Any) -> Any:
        error = real.action(owner, call, fragment, events)  # type: ignore[misc]
        if fragment[0] == "BOOM":
            raise RuntimeError("a bug after the text was appended")
        return error

    monkeypatch.setitem(TRANSITIONS["open"], "fragment", Cell(broken, real.to))
    acc = ts.Accumulator()
    acc.feed(calls(entry(0, "call_1", "f", '{"a": 1}')))
    acc.feed(calls(entry(1, "call_2", "f", '{"b": 2}')))
    chunk = {
        "choices": [
            {"index": 0, "delta": {"tool_calls": [entry(0, args="BOOM")]}, "finish_reason": "tool_calls"},
            {"index": 1, "delta": {"content": "other choice"}, "finish_reason": "stop"},
        ]
    }
    events = acc.feed(chunk)
    first, second = acc.tool_calls
    assert first.status == "invalid" and isinstance(first.error, ts.errors.InternalFault)
    assert second.ready  # not touched by the failing fragment
    assert acc.finish_reasons == {0: ["tool_calls"], 1: ["stop"]}
    assert not any(isinstance(e, ts.events.ToolCallReady) and e.call is first for e in events)
    assert "internal_error" in codes(acc)
    assert acc.get_final_completion().choices[1].message.content == "other choice"


def test_a_failure_while_sealing_withdraws_ready(monkeypatch: pytest.MonkeyPatch) -> None:

    from toolstitch.core._owner import TRANSITIONS, Cell

    real = TRANSITIONS["open"]["finish"]

    def broken(owner: Any, call: Any, finish: Any, events: Any) -> Any:
        real.action(owner, call, finish, events)  # type: ignore[misc]
        raise RuntimeError("a bug after the call looked ready")

    monkeypatch.setitem(TRANSITIONS["open"], "finish", Cell(broken, real.to))
    acc = ts.Accumulator()
    acc.feed(calls(entry(0, "call_1", "f", '{"a": 1}')))
    events = acc.feed(done())
    (call,) = acc.tool_calls
    assert call.status == "invalid"
    assert not any(isinstance(e, ts.events.ToolCallReady) for e in events)
    assert any(isinstance(e, ts.events.ToolCallInvalid) for e in events)


def test_a_failure_in_end_leaves_nothing_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolstitch.core._seal import CallChecks

    def broken(self: Any, call: Any, parsed: Any, first: bool, as_object: bool, notes: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(CallChecks, "verdict", broken)
    acc = ts.Accumulator()
    acc.feed(calls(entry(0, "call_1", "f", '{"a": 1}')))
    acc.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    acc.end()
    assert all(not c.ready for c in acc.calls())
    assert "internal_error" in codes(acc)


# --------------------------------------------------------------------------- (c) hostile values


HOSTILE_INDEXES = ["²", "①", "1" * 5000, True, False, 10**5000, float("nan"), float("inf"), -1]


@pytest.mark.parametrize("index", HOSTILE_INDEXES, ids=[str(i) for i in range(len(HOSTILE_INDEXES))])
def test_hostile_indexes_never_raise(index: Any) -> None:
    acc = run([calls(entry(index, "call_1", "f", '{"a": 1}')), done()])
    assert "internal_error" not in codes(acc)
    assert "non_integer_index" in codes(acc)
    assert_ready_is_exact(acc)
    acc.get_final_completion()


@pytest.mark.parametrize(
    "choice", ["0", True, 10**5000, -3, None], ids=["str", "bool", "huge", "negative", "none"]
)
def test_hostile_choice_indexes_never_raise(choice: Any) -> None:
    acc = run([{"choices": [{"index": choice, "delta": {"content": "x"}, "finish_reason": "stop"}]}])
    assert "internal_error" not in codes(acc)
    acc.get_final_completion()


def _deep(n: int) -> Any:
    value: Any = "leaf"
    for _ in range(n):
        value = {"k": value}
    return value


def test_provider_fields_nested_900_deep_are_dropped_never_a_crash() -> None:
    deep = _deep(900)
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "deep_envelope": deep,
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2, "x": deep},
        "choices": [
            {
                "index": 0,
                "delta": {
                    "reasoning_details": [deep],
                    "tool_calls": [{**entry(0, "call_1", "f", '{"a": 1}'), "extra_content": deep}],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    acc = run([chunk])
    assert "too_deep" in codes(acc)
    assert "internal_error" not in codes(acc)
    completion = acc.get_final_completion()
    completion.model_dump_json()
    assert acc.tool_calls[0].ready


@pytest.mark.parametrize(
    "arguments",
    [{"a": {1, 2}}, {"a": float("nan")}, {"a": object()}, {1: "x"}, _deep(900), [math.inf]],
)
def test_arguments_sent_as_an_object_that_is_not_json_refuse_the_call(arguments: Any) -> None:
    acc = run([calls(entry(0, "call_1", "f", arguments)), done()])
    (call,) = acc.tool_calls
    assert call.status == "invalid"
    assert isinstance(call.error, ts.errors.MalformedArguments)
    assert "internal_error" not in codes(acc)
    acc.get_final_completion()


# --------------------------------------------------------------------------- (d) the contract


def test_tool_choice_none_refuses_every_call() -> None:
    acc = run([calls(entry(0, "call_1", "f", "{}")), done()], tools=[F], tool_choice="none")
    (call,) = acc.tool_calls
    assert call.status == "invalid" and isinstance(call.error, ts.errors.ContractViolation)
    assert call.error.code == "contract_violation"
    assert "contract_violation" in codes(acc)


def test_a_forced_tool_choice_refuses_another_function() -> None:
    forced = {"type": "function", "function": {"name": "f"}}
    acc = run(
        [calls(entry(0, "call_1", "g", "{}"), entry(1, "call_2", "f", "{}")), done()],
        tools=[F, G],
        tool_choice=forced,
    )
    g, f = acc.tool_calls
    assert g.status == "invalid" and isinstance(g.error, ts.errors.ContractViolation)
    assert f.ready


def test_allowed_tools_refuses_the_others() -> None:
    choice = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "f"}}]},
    }
    acc = run(
        [calls(entry(0, "a", "g", "{}"), entry(1, "b", "f", "{}")), done()], tools=[F, G], tool_choice=choice
    )
    assert [c.status for c in acc.tool_calls] == ["invalid", "ready"]


def test_parallel_tool_calls_false_refuses_all_but_the_first() -> None:
    acc = run(
        [
            calls(entry(1, "b", "f", "{}")),
            calls(entry(0, "a", "g", "{}")),
            calls(entry(2, "c", "f", "{}")),
            done(),
        ],
        tools=[F, G],
        parallel_tool_calls=False,
    )
    assert [(c.index, c.status) for c in acc.tool_calls] == [(0, "ready"), (1, "invalid"), (2, "invalid")]
    assert all(isinstance(c.error, ts.errors.ContractViolation) for c in acc.tool_calls[1:])


@pytest.mark.parametrize("choice", ["auto", "required", None])
def test_permissive_contracts_change_nothing(choice: Any) -> None:
    from openai import NOT_GIVEN

    for value in (choice, NOT_GIVEN):
        acc = run(
            [calls(entry(0, "a", "f", "{}"), entry(1, "b", "g", "{}")), done()],
            tools=[F, G],
            tool_choice=value,
            parallel_tool_calls=NOT_GIVEN,
        )
        assert [c.status for c in acc.tool_calls] == ["ready", "ready"]


@pytest.mark.parametrize(
    "make", [lambda t: iter(t), lambda t: {i: x for i, x in enumerate(t)}.values(), lambda t: map(dict, t)]
)
def test_tools_from_any_iterable_are_read_once_and_checked(make: Any) -> None:
    acc = run(
        [calls(entry(0, "a", "f", "{}"), entry(1, "b", "unoffered", "{}")), done()],
        tools=make([F]),
        recover_text_tool_calls=True,
    )
    f, other = acc.tool_calls
    assert f.ready
    assert isinstance(other.error, ts.errors.UnknownTool)


# --------------------------------------------------------------------------- (e) limits


@pytest.mark.parametrize(
    "bad",
    [
        {"max_argument_bytes": 0},
        {"max_calls_per_choice": -1},
        {"max_calls_per_choice": math.nan},
        {"sample_chars": 10.0},
        {"max_stream_bytes": math.inf},
        {"max_choices": True},
        {"max_depth": "3"},
    ],
)
def test_limits_reject_unusable_values(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ts.Limits(**bad)


def test_the_stream_total_bounds_content_reasoning_and_arguments() -> None:
    limits = ts.Limits(max_stream_bytes=1000, sample_chars=16)
    big = "x" * 600
    acc = run(
        [
            {"choices": [{"index": 0, "delta": {"content": big}}]},
            {"choices": [{"index": 0, "delta": {"reasoning_content": big}}]},
            calls(entry(0, "call_1", "f", '{"a": "' + big + '"}')),
            done(),
        ],
        limits=limits,
    )
    (call,) = acc.tool_calls
    assert call.status == "invalid" and isinstance(call.error, ts.errors.LimitExceeded)
    assert call.error.limit == "max_stream_bytes"
    assert len(call.arguments) <= 16
    message = acc.get_final_completion().choices[0].message
    assert message.content == big
    assert not getattr(message, "reasoning_content", None)
    assert "limit_exceeded" in codes(acc)


def test_calls_beyond_the_per_choice_limit_keep_nothing() -> None:
    acc = ts.Accumulator(limits=ts.Limits(max_calls_per_choice=2, sample_chars=8))
    for i in range(5000):
        acc.feed(calls(entry(i, f"call_{i}", "f", '{"a": "' + "y" * 100 + '"}')))
    acc.feed(done())
    kept = acc.tool_calls
    assert len(kept) == 3  # two calls and one refused sample
    assert kept[2].status == "invalid" and len(kept[2].arguments) <= 8
    assert acc.get_final_completion()


def test_an_anomaly_never_keeps_a_huge_raw_value() -> None:
    huge = {"a": "z" * 5_000_000}
    acc = run(
        [calls(entry(0, "call_1", "f", huge), entry(0, "call_1", "f", "")), done()],
        limits=ts.Limits(max_argument_bytes=1000),
    )
    for anomaly in acc.anomalies:
        assert len(repr(anomaly.raw)) < 100_000


def test_choices_are_bounded() -> None:
    acc = ts.Accumulator(limits=ts.Limits(max_choices=4))
    for i in range(1000):
        acc.feed({"choices": [{"index": i, "delta": {"content": "x"}, "finish_reason": "stop"}]})
    assert len(acc.finish_reasons) == 4
    assert acc.dropped_choices == 996


def test_end_is_linear_in_open_choices() -> None:
    # 40,000 open choices used to take 40 s (quadratic); counted in operations, not timed.
    acc = ts.Accumulator(limits=ts.Limits(max_choices=50_000))
    for i in range(20_000):
        acc.feed(calls(entry(0, f"c{i}", "f", '{"a": 1}'), choice=i))
    events = acc.end()
    assert sum(isinstance(e, ts.events.ToolCallIncomplete) for e in events) == 20_000


# --------------------------------------------------------------------------- (f) real streams


def test_mistral_further_values_stay_one_refused_call() -> None:
    acc = run(
        [
            calls(entry(0, "abc123xyz", "get_capital", '{"country": ""}')),
            calls(entry(0, name="", args='{"country": "Italy"}')),
            calls(entry(0, name="", args="{}")),
            done(),
        ],
        tools=[{"type": "function", "function": {"name": "get_capital", "parameters": {"type": "object"}}}],
    )
    (call,) = acc.tool_calls
    assert call.status == "invalid"
    assert call.arguments == '{"country": ""}{"country": "Italy"}{}'
    assert "further_json_value" in codes(acc)


def test_an_exact_resend_of_a_complete_value_is_still_a_resend() -> None:
    acc = run([calls(entry(0, "a", "f", '{"x": 1}')), calls(entry(0, args='{"x": 1}')), done()])
    (call,) = acc.tool_calls
    assert call.ready and call.arguments == '{"x": 1}'


@pytest.mark.parametrize("tool", [NO_PARAMS, BARE])
def test_empty_arguments_for_a_tool_without_properties_read_as_an_empty_object(tool: Any) -> None:
    name = tool["function"]["name"]
    acc = run([calls(entry(0, "a", name, "")), done()], tools=[tool])
    (call,) = acc.tool_calls
    assert call.ready and call.parsed == {} and call.arguments == ""
    assert "empty_arguments_no_parameters" in codes(acc)


def test_empty_arguments_for_a_tool_with_properties_stay_invalid() -> None:
    acc = run([calls(entry(0, "a", "weather", "")), done()], tools=[CITY])
    (call,) = acc.tool_calls
    assert isinstance(call.error, ts.errors.EmptyArguments)


# --------------------------------------------------------------------------- read-only calls, sealed_call


def test_tool_calls_are_read_only_for_users() -> None:
    acc = run([calls(entry(0, "a", "f", '{"x": 1')), done()])
    (call,) = acc.tool_calls
    for attr, value in [
        ("status", "ready"),
        ("arguments", "{}"),
        ("parsed", {}),
        ("error", None),
        ("name", "g"),
    ]:
        with pytest.raises(AttributeError):
            setattr(call, attr, value)
    for method in ("append", "seal", "invalidate", "mark_incomplete"):
        assert not hasattr(call, method)
    assert call.status == "invalid"


def test_sealed_call_builds_a_checked_call() -> None:
    ok = sealed_call(index=0, id="call_1", name="weather", arguments='{"city": "Oslo"}', tools=[CITY])
    assert ok.ready and ok.parsed == {"city": "Oslo"} and ok.id == "call_1"
    bad = sealed_call(index=1, id="call_2", name="weather", arguments='{"city": 3}', tools=[CITY])
    assert isinstance(bad.error, ts.errors.SchemaViolation)
    unknown = sealed_call(index=0, id="x", name="nope", arguments="{}", tools=iter([CITY]))
    assert isinstance(unknown.error, ts.errors.UnknownTool)
    empty = sealed_call(index=0, id="x", name="now", arguments="", tools=[NO_PARAMS])
    assert empty.ready and empty.parsed == {}
    for hostile in ({"a": 1}, 5, '{"a": "\udc80"}'.replace("\\udc80", "\udc80"), "{"):
        call = sealed_call(index=0, id="x", name="weather", arguments=hostile, tools=[CITY])
        assert call.status == "invalid"
    assert sealed_call(index=0, id=None, name=None, arguments="{}").status == "invalid"


# --------------------------------------------------------------------------- last nets and bounded lists


def test_a_hostile_in_band_error_body_ends_the_stream_without_raising() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    for body in (deep, 10**5000, {"message": "x" * 1_000_000}):
        acc = ts.Accumulator()
        acc.feed(calls(entry(0, "a", "f", "{}")))
        acc.feed({"error": body})
        assert acc.ended and isinstance(acc.error, ts.errors.InBandError)
        assert len(str(acc.error)) < 5000
        assert acc.tool_calls[0].status == "incomplete"


def test_feed_has_a_last_net(monkeypatch: pytest.MonkeyPatch) -> None:
    acc = ts.Accumulator()
    acc.feed(calls(entry(0, "a", "f", "{}")))

    def broken(self: Any, chunk: Any, out: Any, want: bool) -> Any:
        raise MemoryError("and the finer nets fail too")

    monkeypatch.setattr(ts.Accumulator, "_read", broken)
    monkeypatch.setattr(ts.Accumulator, "_record", lambda *a: (_ for _ in ()).throw(RuntimeError("x")))
    assert acc.feed(done()) is not None
    assert acc.tool_calls[0].status == "invalid"


def test_many_tiny_pieces_are_kept_as_few_strings() -> None:
    acc = ts.Accumulator()
    acc.feed(calls(entry(0, "a", "f", '{"t": "')))
    for _ in range(20_000):
        acc.feed({"choices": [{"index": 0, "delta": {"content": "c", "tool_calls": [entry(0, args="x")]}}]})
    acc.feed(calls(entry(0, args='"}')))
    for _ in range(100):
        acc.feed(done())
    (call,) = acc.tool_calls
    assert len(call._parts) < 1100 and len(acc._choices[0].content) < 1100  # not 20,000
    assert call.ready and call.parsed == {"t": "x" * 20_000}
    assert acc.get_final_completion().choices[0].message.content == "c" * 20_000
    assert len(acc.finish_reasons[0]) <= 16


def test_identity_fields_cannot_grow_without_bound() -> None:
    huge = "n" * 70_000  # past Limits.max_id_chars (65,536): real ids of thousands of characters fit
    acc = run([calls(entry(0, huge, huge, "{}")), done()])
    (call,) = acc.tool_calls
    assert call.status == "invalid" and isinstance(call.error, ts.errors.ToolCallError)
    # Refused, it keeps the id the server sent (the history answers it, issue 42): the stream's byte
    # budget bounds it (past it only a prefix is kept: tests/core/test_fail_closed_round4.py).
    assert call.id == huge
    acc = ts.Accumulator()
    acc.feed(calls(entry(0, "a", "f")))
    for _ in range(5_000):  # name pieces without end, before any argument text
        acc.feed(calls(entry(0, name="xy")))
    acc.feed(calls(entry(0, args="{}")))
    acc.feed(done())
    (call,) = acc.tool_calls
    assert call.status == "invalid" and len(call.name or "") <= 1024
    long_finish = {"choices": [{"index": 0, "delta": {"role": "r" * 10_000}, "finish_reason": "x" * 10_000}]}
    acc = run([calls(entry(0, "a", "f", "{}")), long_finish])
    assert acc.tool_calls[0].status == "incomplete"


def test_a_failure_building_the_message_keeps_its_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    chunk = calls({**entry(0, "a", "f", "{}"), "extra_content": {"k": 1}}, finish="tool_calls")
    acc = run([chunk, {"choices": [{"index": 0, "delta": {"reasoning_details": [{"x": 1}]}}]}])

    def broken(value: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr("toolstitch.core._accumulator._dump", broken)
    message = acc.get_final_completion().choices[0].message
    assert [c.id for c in message.tool_calls or []] == ["a"]
    assert "internal_error" in codes(acc)


def test_a_late_fragment_leaves_an_incomplete_call_incomplete() -> None:
    """Found by the fuzzer: a call sealed ``incomplete`` (finish_reason ``length``) is frozen too; a
    later fragment is an anomaly, never a change of status (and never ``ready``)."""
    acc = ts.Accumulator()
    acc.feed({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a"}]}}]})
    acc.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    assert acc.calls()[0].status == "incomplete"
    late = {"index": 0, "function": {"arguments": "{}"}}
    acc.feed({"choices": [{"index": 0, "delta": {"tool_calls": [late]}, "finish_reason": "tool_calls"}]})
    call = acc.calls()[0]
    assert call.status == "incomplete"
    assert call.arguments == ""
    assert "fragment_after_finish" in {a.code for a in acc.anomalies}
