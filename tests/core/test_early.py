"""Early refusal (issue 30, ``text/_early.py``): a call whose text can no longer become valid is
refused while it streams, and only then.

The promise held here: every early verdict is followed by the strict verdict at seal (the call is
never ``ready``, and ``sealed_call`` on its whole text refuses it too), on hand-picked cases, on
generated schemas, values and cuts (hypothesis), and on the real-stream corpus; and the verdicts
that are certain are given before the choice finishes.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import toolstitch as ts
from tests.conftest import examples
from tests.corpus import CORPUS
from toolstitch.core import sealed_call
from toolstitch.events import ToolCallInvalid, ToolCallReady
from toolstitch.text._scanner import JSONScanner

SEARCH = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "budget": {"type": "integer"},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "when": {"type": "object", "properties": {"day": {"type": "string"}}, "additionalProperties": False},
    },
    "additionalProperties": False,
}


def tools(schema: Any = SEARCH, name: str = "search") -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": name, "parameters": schema}}]


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-early",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def stream(
    fragments: list[str], offered: list[Any] | None, name: str = "search", **request: Any
) -> tuple[ts.ToolCall, int | None, list[Any]]:
    """Feed one call in ``fragments``; ``(call, the fragment at which it was refused early or
    None, every event)``."""
    acc = ts.Accumulator(tools=offered, **request)
    events = list(
        acc.feed(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
    )
    refused_at = None
    for i, text in enumerate(fragments):
        got = acc.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": text}}]}))
        if refused_at is None and any(isinstance(e, ToolCallInvalid) for e in got):
            refused_at = i
        events += got
    events += acc.feed(chunk({}, "tool_calls"))
    return acc.tool_calls[0], refused_at, events


def cut(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- each certain verdict, at the fragment that makes it certain ------------------------------------


@pytest.mark.parametrize(
    ("fragments", "at", "says"),
    [
        (['{"budget": ', '"', '5"}'], 1, "budget: a string began"),
        (['{"city": "x", "bud', 'get": t', "rue}"], 1, "budget: a boolean began"),
        (['{"ci', 'ty": "x", "size', '": 1}'], 2, "'size' is not one of the properties"),
        (['{"unit": "c', "elx", 'ius"}'], 1, "no allowed value starts with 'celx'"),
        (['{"unit": "cel', 'sius2"}'], 1, "not one of the allowed values"),
        (['{"unit": 1', "}"], 0, "unit: a number began"),
        (['{"tags": ["a", ', "3]}"], 1, "tags/1: a number began"),
        (['{"when": {"day": "mon", "h', 'our": 9}}'], 1, "when: 'hour' is not one of"),
        (['{"when": [', "]}"], 0, "when: an array began"),
    ],
)
def test_a_certain_verdict_refuses_the_call_while_it_streams(
    fragments: list[str], at: int, says: str
) -> None:
    call, refused_at, events = stream(fragments, tools())
    assert refused_at == at
    invalid = [e for e in events if isinstance(e, ToolCallInvalid)]
    assert len(invalid) == 1, "announced once: the seal does not announce it again"
    assert says in str(invalid[0].error)
    assert isinstance(invalid[0].error, ts.errors.SchemaViolation)
    # Sealed invalid, with the seal's own (complete) reasons; the text kept as the model wrote it.
    assert call.status == "invalid" and isinstance(call.error, ts.errors.SchemaViolation)
    assert call.arguments == "".join(fragments)
    strict = sealed_call(index=0, id="c", name="search", arguments=call.arguments, tools=tools())
    assert strict.status == "invalid"


def test_a_tool_the_request_did_not_offer_is_refused_at_its_first_text() -> None:
    call, refused_at, events = stream(['{"x"', ": 1}"], tools(), name="delete_everything")
    assert refused_at == 0 and isinstance(call.error, ts.errors.UnknownTool)
    assert [type(e) for e in events if isinstance(e, ToolCallInvalid | ToolCallReady)] == [ToolCallInvalid]


@pytest.mark.parametrize(
    "request_",
    [{"tool_choice": "none"}, {"tool_choice": {"type": "function", "function": {"name": "other"}}}],
)
def test_a_name_the_tool_choice_rules_out_is_refused_early(request_: dict[str, Any]) -> None:
    offered = [*tools(), *tools({"type": "object"}, "other")]
    call, refused_at, _ = stream(['{"city"', ': "x"}'], offered, **request_)
    assert refused_at == 0 and isinstance(call.error, ts.errors.ContractViolation)


def test_the_false_schema_refuses_any_value_at_its_start() -> None:
    schema = {"type": "object", "properties": {"never": False, "ok": True}}
    call, refused_at, _ = stream(['{"ok": [1, {"a": null}], "never": ', "1}"], tools(schema))
    assert refused_at == 1 and call.status == "invalid"


# -- never a guess ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        # Escapes that decode to an allowed value, a key that decodes to a property.
        (SEARCH, '{"unit": "cel\\u0073ius", "\\u0063ity": "x"}'),
        # A surrogate pair written as two escapes: twelve characters of text for one of value.
        (
            {"type": "object", "properties": {"e": {"enum": ["😀😀"]}}},
            '{"e": "\\ud83d\\ude00\\ud83d\\ude00"}',
        ),
        # Integers and numbers are one kind early: 1.0 is an integer in drafts 6 and later.
        ({"type": "object", "properties": {"n": {"type": "integer"}}}, '{"n": 1.0}'),
        # Keywords whose siblings may not apply (drafts 4-7 ignore them beside $ref), patterns.
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "definitions": {"s": {"type": "string"}},
                "properties": {"r": {"$ref": "#/definitions/s", "type": "integer"}},
            },
            '{"r": "x"}',
        ),
        ({"type": "object", "patternProperties": {"^x": {}}, "additionalProperties": False}, '{"xy": 1}'),
        (
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
            '{"a": 2}',
        ),
        (
            {
                "type": "object",
                "properties": {"t": {"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}},
            },
            '{"t": ["a", 2]}',
        ),
        # Open objects: any key may come.
        ({"type": "object", "properties": {"a": {"type": "string"}}}, '{"b": 1, "a": "x"}'),
        ({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}, '{"a": null}'),
    ],
)
def test_no_early_verdict_where_the_call_can_still_be_valid(schema: dict[str, Any], text: str) -> None:
    for size in (1, 2, 5, len(text)):
        call, refused_at, _ = stream(cut(text, size), tools(schema))
        assert refused_at is None, (size, call.error)
        assert call.status == "ready", call.error


def test_a_long_enum_is_held_to_its_members_when_the_string_closes() -> None:
    members = [f"value-{i}" for i in range(5000)]
    schema = {"type": "object", "properties": {"v": {"enum": members}}}
    _, refused_at, _ = stream(['{"v": "zz', 'z", "w": 1}'], tools(schema))
    assert refused_at == 1  # not at "zz" (no prefix check over 5,000 members), at the close
    call, refused_at, _ = stream(cut('{"v": "value-4999"}', 2), tools(schema))
    assert refused_at is None and call.status == "ready"


def test_a_draft_3_schema_is_not_read_early() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-03/schema#",
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }
    _, refused_at, _ = stream(['{"a": 1}'], tools(schema))
    assert refused_at is None


def test_a_call_refused_early_whose_stream_ends_is_incomplete_never_ready() -> None:
    acc = ts.Accumulator(tools=tools())
    head = {
        "index": 0,
        "id": "c",
        "type": "function",
        "function": {"name": "search", "arguments": '{"unit": 3'},
    }
    [invalid] = [e for e in acc.feed(chunk({"tool_calls": [head]})) if isinstance(e, ToolCallInvalid)]
    assert acc.tool_calls[0].error is invalid.error
    acc.end()  # the stream was closed (fail_fast), or broke: what it leaves is incomplete
    call = acc.tool_calls[0]
    assert call.status == "incomplete" and not call.ready


def test_without_events_nothing_is_refused_early_and_the_verdict_is_the_same() -> None:
    acc = ts.Accumulator(tools=tools())
    head = {"index": 0, "id": "c", "type": "function", "function": {"name": "search", "arguments": ""}}
    acc.feed(chunk({"tool_calls": [head]}), events=False)
    acc.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"budget": "'}}]}), events=False)
    # Events asked for from here on: the check did not see the start, so it does not guess.
    got = acc.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'x", "size": 1}'}}]}))
    assert not any(isinstance(e, ToolCallInvalid) for e in got)
    acc.feed(chunk({}, "tool_calls"))
    assert acc.tool_calls[0].status == "invalid"


def test_a_call_refused_early_keeps_every_byte_counted_against_its_limits() -> None:
    limits = ts.Limits(max_argument_bytes=64)
    acc = ts.Accumulator(tools=tools(), limits=limits)
    head = {
        "index": 0,
        "id": "c",
        "type": "function",
        "function": {"name": "search", "arguments": '{"budget": "'},
    }
    assert any(isinstance(e, ToolCallInvalid) for e in acc.feed(chunk({"tool_calls": [head]})))
    for _ in range(10):
        acc.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "x" * 20}}]}))
    acc.feed(chunk({}, "tool_calls"))
    call = acc.tool_calls[0]
    assert call.status == "invalid" and len(call.arguments) <= limits.sample_chars
    assert call.metrics.bytes == len('{"budget": "') + 200


@pytest.mark.skipif(
    importlib.util.find_spec("openai.types.responses") is None,
    reason="this openai release has no Responses API",
)
def test_the_responses_api_refuses_early_through_the_same_owner() -> None:
    acc = ts.ResponseAccumulator(tools=[{"type": "function", "name": "search", "parameters": SEARCH}])
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "search",
        "arguments": "",
        "status": "in_progress",
    }
    acc.feed({"type": "response.output_item.added", "output_index": 0, "item": item, "sequence_number": 1})
    got = acc.feed(
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": '{"budget": "',
            "sequence_number": 2,
        }
    )
    invalid = [e for e in got if isinstance(e, ToolCallInvalid)]
    assert len(invalid) == 1 and "budget" in str(invalid[0].error)
    assert acc.tool_calls[0].status != "ready"


# -- the promise, on generated schemas, values and cuts ----------------------------------------------

KEYS = ["a", "b", "ü", 'q"k', "c\\d"]
STRINGS = ["a", "ab", "b", "é", "😀", 'x"y', "\\"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([1.0, -0.5, 2.5e3]),
    st.sampled_from(STRINGS),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
    max_leaves=8,
)
TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]


def _object(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda props, extra, pattern: {
            "type": "object",
            "properties": props,
            **({"additionalProperties": extra} if extra is not None else {}),
            **({"patternProperties": {"^c": {}}} if pattern else {}),
        },
        st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
        st.none() | st.booleans() | children,
        st.booleans(),
    )


SCHEMAS = st.recursive(
    st.one_of(
        st.just({}),
        st.booleans(),
        st.builds(lambda t: {"type": t}, st.sampled_from(TYPES)),
        st.builds(
            lambda k: {"type": k}, st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True)
        ),
        st.builds(lambda m: {"enum": m}, st.lists(SCALARS, min_size=1, max_size=4)),
        st.builds(lambda m: {"const": m}, SCALARS),
    ),
    lambda children: st.one_of(
        _object(children),
        st.builds(lambda c: {"type": "array", "items": c}, children),
        st.builds(lambda a, b: {"anyOf": [a, b]}, children, children),
        st.builds(
            lambda a, t: {**a, "type": t} if isinstance(a, dict) else a, children, st.sampled_from(TYPES)
        ),
    ),
    max_leaves=10,
)
DRAFTS = [None, "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"]


@settings(max_examples=examples(600), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    schema=SCHEMAS,
    root=st.one_of(_object(SCHEMAS), SCHEMAS),
    draft=st.sampled_from(DRAFTS),
    value=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4),
    ascii_=st.booleans(),
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=12),
)
def test_every_early_verdict_is_the_strict_verdict_at_seal(
    schema: Any, root: Any, draft: str | None, value: dict[str, Any], ascii_: bool, sizes: list[int]
) -> None:
    if isinstance(root, dict) and draft is not None:
        root = {"$schema": draft, **root}
    if isinstance(root, dict) and isinstance(root.get("properties"), dict) and root["properties"]:
        # Let a generated sub-schema sit under a key the values use.
        root = {**root, "properties": {**root["properties"], "a": schema}}
    text = json.dumps(value, ensure_ascii=ascii_)
    fragments, at = [], 0
    while at < len(text):
        size = sizes[len(fragments) % len(sizes)]
        fragments.append(text[at : at + size])
        at += size
    call, refused_at, events = stream(fragments, tools(root))
    strict = sealed_call(index=0, id="c", name="search", arguments=text, tools=tools(root))
    event(f"refused early: {refused_at is not None}; strict: {strict.status}")
    assert call.status == strict.status or refused_at is not None, (call.error, strict.error)
    if refused_at is not None:
        assert call.status == "invalid" and strict.status == "invalid", (call.error, strict.error)
    if strict.status == "ready":
        assert refused_at is None
        assert not any(isinstance(e, ToolCallInvalid) for e in events)


# -- the real streams ------------------------------------------------------------------------------


@pytest.mark.parametrize("stream_", [s for s in CORPUS if s.chunks()], ids=lambda s: s.name)
def test_no_call_of_a_real_stream_that_ends_ready_is_refused_early(stream_: Any) -> None:
    acc = ts.Accumulator(tools=stream_.recorded_tools)
    early: set[int] = set()
    for piece in stream_.chunks():
        for happened in acc.feed(piece):
            if isinstance(happened, ToolCallInvalid) and happened.call.status == "open":
                early.add(id(happened.call))
    acc.end()
    for call in acc.tool_calls:
        if id(call) in early:
            assert call.status == "invalid", call
        strict = sealed_call(
            index=0, id="c", name=call.name, arguments=call.arguments, tools=stream_.recorded_tools
        )
        if call.status == "ready":
            assert id(call) not in early and strict.status == "ready"


@pytest.mark.parametrize(
    "fragments",
    [
        ['{"city": "a \\', '"', 'b", "budget": "', "x", '"}'],  # an escaped quote cut after its backslash
        ['{"city": "a \\', '\\", "budget": "', '"}'],  # an escaped backslash cut, then the string ends
        ['{"city": "\\u00', "e9\\", 'n", "budget": "', '"}'],  # cut inside \u digits, then a cut escape
    ],
)
def test_escapes_cut_inside_an_unchecked_string_still_end_it_where_they_should(fragments: list[str]) -> None:
    # The one-match path through a string nobody checks must hand the string's real end to the
    # check: the wrong type after it is refused at the fragment that begins it, not before.
    call, refused_at, _ = stream(fragments, tools())
    assert refused_at == next(i for i, f in enumerate(fragments) if f.endswith('"budget": "'))
    assert call.status == "invalid" and "budget" in str(call.error)


def test_a_cut_escaped_quote_does_not_end_an_unchecked_string() -> None:
    # ``\"`` cut after the backslash: the quote is text, so the string goes on and what follows
    # is inside it (a key outside ``properties`` would be refused); the call is ready.
    call, refused_at, _ = stream(['{"city": "a \\', '" and: \\"x', '"}'], tools())
    assert refused_at is None and call.ready and call.parsed == {"city": 'a " and: "x'}


# Pieces of argument text biased to what ends a string or does not: quotes, escaped quotes and
# backslashes, ``\u`` escapes, keys the schema refuses, wrong types after a string.
_PIECES = st.lists(
    st.sampled_from(
        [
            '{"city": "',
            '{"tags": ["',
            '{"unit": "',
            "a",
            "é",
            '\\"',
            "\\\\",
            "\\u00e9",
            "\\n",
            '"',
            '", ',
            '"budget": ',
            '"budget": "',
            "5",
            '"size": ',
            '"unit": "cel',
            "sius",
            "}",
            "]",
            ", ",
        ]
    ),
    min_size=1,
    max_size=14,
)


def _no_string_bodies(feed: Any) -> Any:
    """``JSONScanner.feed`` that never says a fragment stayed inside a string (False, not None):
    the owner then feeds the early check every fragment (the reference the skip is held to)."""

    def reading_every_fragment(self: JSONScanner, text: str) -> bool:
        return feed(self, text) or False  # type: ignore[no-any-return]

    return reading_every_fragment


@settings(max_examples=examples(400), deadline=None, suppress_health_check=list(HealthCheck))
@given(pieces=_PIECES, sizes=st.lists(st.integers(1, 7), min_size=1, max_size=8))
def test_the_early_check_skipping_string_bodies_never_moves_a_verdict(
    pieces: list[str], sizes: list[int]
) -> None:
    # The scanner tells the owner which fragments stay inside a string, and the early check then
    # skips them when it reads a string nobody checks (``EarlyCheck.free``). The same cut with the
    # check fed every fragment is the reference: the status, the error, the fragment refused at and
    # every event must be the same.
    text = "".join(pieces)
    fragments, at = [], 0
    while at < len(text):
        size = sizes[len(fragments) % len(sizes)]
        fragments.append(text[at : at + size])
        at += size
    call, refused_at, events = stream(fragments, tools())
    feed = JSONScanner.feed
    JSONScanner.feed = _no_string_bodies(feed)  # type: ignore[method-assign]
    try:
        every, every_at, every_events = stream(fragments, tools())
    finally:
        JSONScanner.feed = feed  # type: ignore[method-assign]
    got = (call.status, refused_at, repr(call.error))
    assert got == (every.status, every_at, repr(every.error)), fragments
    assert [type(e).__name__ for e in events] == [type(e).__name__ for e in every_events], fragments
