"""``core._accumulator``'s reader and ``core._values``: the one reader, observed through what it writes."""

from __future__ import annotations

import math
from typing import Any

import pytest
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

import toolstitch as ts
from toolstitch.core._values import json_text, read_index, show
from toolstitch.errors import InBandError


def read(*chunks: Any) -> ts.Accumulator:
    acc = ts.Accumulator()
    for chunk in chunks:
        acc.feed(chunk)
    return acc


def codes(acc: ts.Accumulator) -> list[str]:
    return [a.code for a in acc.anomalies]


def sdk(chunk: dict[str, Any]) -> Any:
    return construct_type(type_=ChatCompletionChunk, value=chunk)


CHUNK = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 7,
    "model": "m",
    "system_fingerprint": "fp",
    "obfuscation": "noise",
    "provider": {"name": "x"},
    "choices": [
        {
            "index": 0,
            "delta": {
                "role": "assistant",
                "content": "hi",
                "reasoning_content": "think",
                "channel": "analysis",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a"', "thought_signature": "s"},
                        "extra_content": {"google": {}},
                    }
                ],
            },
            "finish_reason": None,
        }
    ],
}


@pytest.mark.parametrize("make", [dict, sdk], ids=["dict", "sdk"])
def test_a_chunk_reads_into_the_envelope_the_choice_and_its_call(make: Any) -> None:
    acc = read(make(CHUNK))
    assert (acc._id, acc._model, acc._created, acc._system_fingerprint) == ("chatcmpl-1", "m", 7, "fp")
    assert acc._extra == {"provider": {"name": "x"}}  # per-chunk noise (obfuscation) is dropped
    state = acc._choices[0]
    assert (state.role, state.content, state.finish_reason) == ("assistant", ["hi"], None)
    assert state.reasoning == {"reasoning_content": ["think"]}  # scalar labels (channel) are not kept
    (call,) = acc.tool_calls
    assert (call.index, call.id, call.name, call.type, call.arguments) == (
        0,
        "call_1",
        "f",
        "function",
        '{"a"',
    )
    assert call.extra == {"extra_content": {"google": {}}, "function": {"thought_signature": "s"}}
    assert acc.anomalies == []


def test_an_envelope_field_of_the_wrong_type_reads_as_absent() -> None:
    acc = read({"id": 5, "model": {"deep": 1}, "created": "x", "usage": 3, "choices": []})
    assert (acc._id, acc._model, acc._created, acc.usage) == (None, None, None, None)


def test_unusable_chunks_are_noted_and_an_error_ends_the_input() -> None:
    acc = read([1, 2], {"error": None, "choices": []})
    assert "malformed_chunk" in codes(acc) and not acc.ended
    acc = read({"error": {"message": "overloaded"}})
    assert acc.ended and isinstance(acc.error, InBandError)


@pytest.mark.parametrize(
    ("value", "index", "noted"),
    [
        (0, 0, False),
        (3, 3, False),
        ("2", 2, True),
        (1.0, 1, True),
        (-1, None, True),
        ("-1", None, True),
        ("²", None, True),
        ("①", None, True),
        ("٣", None, True),  # an Arabic-Indic digit: isdigit() says yes, int() would accept it
        ("1" * 5000, None, True),
        ("1" * 10, None, True),
        (True, None, True),
        (2**31, None, True),
        (math.nan, None, True),
        (math.inf, None, True),
        (None, None, True),
    ],
    ids=lambda v: show(v, 12),
)
def test_index_reading(value: Any, index: int | None, noted: bool) -> None:
    got, note = read_index(value)
    assert got == index
    assert (note is not None) == noted


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"a": [1, 2.5, None, True, "x"]}, True),
        ({"a": {1, 2}}, False),
        ({"a": math.nan}, False),
        ({1: "x"}, False),
        ({"a": object()}, False),
        ({"a": (1, 2)}, False),
    ],
)
def test_json_text_accepts_only_json(value: Any, ok: bool) -> None:
    text, error = json_text(value, 64)
    assert (text is not None, error is None) == (ok, ok)


def test_json_text_bounds_depth() -> None:
    value: Any = 1
    for _ in range(100):
        value = [value]
    assert json_text(value, 64)[1] is not None
    assert json_text(value, 200)[0] is not None


def test_arguments_as_an_object_are_serialised_once_and_noted() -> None:
    chunk = {
        "choices": [
            {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": {"é": 1}}}]}}
        ]
    }
    (call,) = read(chunk).tool_calls
    assert call.arguments == '{"é": 1}' and call._pending_error is None
    assert "arguments_object" in [a.code for a in call.anomalies]


@pytest.mark.parametrize(
    ("entry", "code", "refused"),
    [
        ({"index": 0, "id": "", "function": {"name": "f"}}, "empty_string_field", False),
        ({"index": 0, "id": "null", "function": {"name": "f"}}, "null_string_field", False),
        ({"index": 0, "id": 7, "function": {"name": "f"}}, "id_not_string", False),
        ({"index": 0, "function": {"name": ["f"]}}, "malformed_chunk", True),
        ({"index": 0, "function": "f"}, "malformed_chunk", True),
        ({"index": 0, "function": {"arguments": 5}}, "arguments_not_string", True),
        ({"index": 0, "id": {"x": 1}, "function": {"name": "f"}}, "malformed_chunk", True),
        ({"index": 0, "type": ["function"], "function": {"name": "f"}}, "malformed_chunk", True),
    ],
)
def test_field_repairs_are_noted_and_what_was_dropped_refuses_the_call(
    entry: dict[str, Any], code: str, refused: bool
) -> None:
    acc = read({"choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]})
    (call,) = acc.tool_calls
    assert code in [a.code for a in call.anomalies] + codes(acc)
    assert (call._pending_error is not None) == refused


class Text(str):
    """A ``str`` subclass: not the text the SDK decodes, so it cannot be read as arguments."""


def test_a_str_subclass_as_arguments_refuses_the_call() -> None:
    head = {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}
    acc = read(
        {"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]},
        {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": Text("{}")}}]}}
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    (call,) = acc.tool_calls
    assert call.status == "invalid"


def test_wrong_shapes_are_skipped_and_noted() -> None:
    acc = read(
        {
            "choices": [
                "not a choice",
                {"index": "0", "delta": "nope", "finish_reason": 5},
                {"index": 1, "delta": {"content": 5, "tool_calls": {"index": 0}}, "finish_reason": ""},
            ]
        }
    )
    assert sorted(acc._choices) == [0, 1]
    assert acc._choices[1].content == [] and acc._choices[1].finish_reason is None
    assert codes(acc).count("malformed_chunk") >= 1 and "finish_reason_empty" in codes(acc)


def test_a_legacy_function_call_reads_as_call_zero() -> None:
    acc = read({"choices": [{"index": 0, "delta": {"function_call": {"name": "f", "arguments": "{}"}}}]})
    (call,) = acc.tool_calls
    assert (call.index, call.name, call.arguments) == (0, "f", "{}")
    assert "legacy_function_call" in [a.code for a in call.anomalies]


@pytest.mark.parametrize("index", [True, 1.5, "x", -1, None])
def test_a_choice_without_a_usable_index_among_several_refuses_every_open_call(index: Any) -> None:
    """One implementation decides the choice: a piece that names none cannot be routed."""
    head = {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": '}}
    acc = read(
        {"choices": [{"index": 0, "delta": {"tool_calls": [head]}}, {"index": 1, "delta": {"content": "y"}}]},
        {
            "choices": [
                {"index": index, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    (call,) = acc.tool_calls
    assert call.status == "invalid" and call.arguments == '{"x": '


def test_a_choice_index_sent_as_an_integral_float_is_that_choice() -> None:
    head = {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": '}}
    acc = read(
        {"choices": [{"index": 0, "delta": {"content": "y"}}, {"index": 1, "delta": {"tool_calls": [head]}}]},
        {
            "choices": [
                {"index": 1.0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}
            ]
        },
        {"choices": [{"index": 1, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    (call,) = acc.calls(1)
    assert call.ready and call.parsed == {"x": 1}


def test_an_entry_that_cannot_be_read_refuses_its_choice_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolstitch.core import _accumulator as _read

    real = _read.clean_str

    def flaky(value: Any, what: str, notes: Any, raw: Any) -> Any:
        if value == "boom":
            raise RuntimeError("a bug")
        return real(value, what, notes, raw)

    monkeypatch.setattr(_read, "clean_str", flaky)
    head = {"index": 0, "id": "ok", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    acc = read(
        {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [head]}},
                {"index": 1, "delta": {"tool_calls": [head]}},
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 1, "id": "boom"}]},
                    "finish_reason": "tool_calls",
                },
                {"index": 1, "delta": {"content": "x"}, "finish_reason": "tool_calls"},
            ]
        },
    )
    assert [c.status for c in acc.calls(0)] == ["invalid"]
    assert [c.status for c in acc.calls(1)] == ["ready"]
    assert "internal_error" in codes(acc)


def test_show_never_raises_nor_grows() -> None:
    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert show(Hostile()) == "<a Hostile>"
    assert len(show("x" * 10_000)) < 100
    assert "bits" in show(10**5000)
