"""``core._read``: one raw chunk into canonical pieces (pure; no calls involved)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

from toolstitch.core._anomaly import Anomaly
from toolstitch.core._read import json_text, read_chunk, read_index, show
from toolstitch.errors import InBandError, MalformedChunk


def read(chunk: Any) -> tuple[Any, list[Any], list[Anomaly]]:
    notes: list[Anomaly] = []
    envelope, pieces = read_chunk(chunk, notes)
    return envelope, pieces, notes


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
def test_a_chunk_reads_into_envelope_pieces_and_fragments(make: Any) -> None:
    envelope, pieces, notes = read(make(CHUNK))
    assert (envelope.id, envelope.model, envelope.created, envelope.system_fingerprint) == (
        "chatcmpl-1",
        "m",
        7,
        "fp",
    )
    assert envelope.extra == {"provider": {"name": "x"}}  # per-chunk noise (obfuscation) is dropped
    (piece,) = pieces
    assert (piece.index, piece.role, piece.content, piece.finish_reason) == (0, "assistant", "hi", None)
    assert piece.extra == {"reasoning_content": "think"}  # scalar labels (channel) are not kept
    (frag,) = piece.tool_fragments
    assert (frag.index, frag.id, frag.name, frag.type, frag.arguments) == (
        0,
        "call_1",
        "f",
        "function",
        '{"a"',
    )
    assert frag.extra == {"extra_content": {"google": {}}, "function": {"thought_signature": "s"}}
    assert notes == []


def test_an_envelope_field_of_the_wrong_type_reads_as_absent() -> None:
    envelope, _, _ = read({"id": 5, "model": {"deep": 1}, "created": "x", "usage": 3, "choices": []})
    assert (envelope.id, envelope.model, envelope.created, envelope.usage) == (None, None, None, None)


def test_unusable_chunks_raise_inside_the_core_only() -> None:
    with pytest.raises(MalformedChunk):
        read_chunk([1, 2], [])
    with pytest.raises(InBandError):
        read_chunk({"error": {"message": "overloaded"}}, [])
    _, pieces, _ = read({"error": None, "choices": []})
    assert pieces == []


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
    _, (piece,), _ = read(chunk)
    (frag,) = piece.tool_fragments
    assert (frag.arguments, frag.replace, frag.error) == ('{"é": 1}', True, None)
    assert [a.code for a in frag.anomalies] == ["arguments_object"]


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        ({"index": 0, "id": "", "function": {"name": "f"}}, "empty_string_field"),
        ({"index": 0, "id": "null", "function": {"name": "f"}}, "null_string_field"),
        ({"index": 0, "id": 7, "function": {"name": "f"}}, "id_not_string"),
        ({"index": 0, "function": {"name": ["f"]}}, "malformed_chunk"),
        ({"index": 0, "function": "f"}, "malformed_chunk"),
        ({"index": 0, "function": {"arguments": 5}}, "arguments_not_string"),
    ],
)
def test_field_repairs_are_noted(entry: dict[str, Any], code: str) -> None:
    _, (piece,), notes = read({"choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]})
    (frag,) = piece.tool_fragments
    assert code in [a.code for a in frag.anomalies or []] + [a.code for a in notes]


def test_wrong_shapes_are_skipped_and_noted() -> None:
    _, pieces, notes = read(
        {
            "choices": [
                "not a choice",
                {"index": "0", "delta": "nope", "finish_reason": 5},
                {"index": 1, "delta": {"content": 5, "tool_calls": {"index": 0}}, "finish_reason": ""},
            ]
        }
    )
    assert [p.index for p in pieces] == [0, 1]
    assert pieces[1].content is None and pieces[1].finish_reason is None
    codes = [a.code for a in notes]
    assert codes.count("malformed_chunk") >= 5 and "finish_reason_empty" in codes


def test_a_legacy_function_call_reads_as_call_zero() -> None:
    _, (piece,), _ = read(
        {"choices": [{"index": 0, "delta": {"function_call": {"name": "f", "arguments": "{}"}}}]}
    )
    (frag,) = piece.tool_fragments
    assert (frag.index, frag.name, frag.arguments) == (0, "f", "{}")
    assert [a.code for a in frag.anomalies] == ["legacy_function_call"]


def test_an_entry_that_cannot_be_read_damages_its_choice_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolstitch.core import _read

    real = _read._read_tool_fragment

    def flaky(entry: Any, notes: Any, depth: int) -> Any:
        if entry.get("id") == "boom":
            raise RuntimeError("a bug")
        return real(entry, notes, depth)

    monkeypatch.setattr(_read, "_read_tool_fragment", flaky)
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "id": "boom"}, {"index": 1, "id": "ok"}]},
                "finish_reason": "tool_calls",
            },
            {"index": 1, "delta": {"content": "x"}},
        ]
    }
    _, (first, second), notes = read(chunk)
    assert first.damaged and not second.damaged
    assert [f.id for f in first.tool_fragments] == ["ok"]
    assert first.finish_reason == "tool_calls"
    assert "internal_error" in [a.code for a in notes]


def test_show_never_raises_nor_grows() -> None:
    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert show(Hostile()) == "<a Hostile>"
    assert len(show("x" * 10_000)) < 100
    assert "bits" in show(10**5000)
