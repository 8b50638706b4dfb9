"""Custom tools over the Responses API in the core: ``custom_tool_call`` items are calls, held to
the guarantees of function calls by the same owner, with text (not JSON) as their input.

Events are fed as OpenAI sends them (``toolstitch.testing.response_events(custom=True)``), as
plain dicts and, where the installed ``openai`` has the custom-tool types, as the SDK's own event
objects; then one thing is broken, as a hostile server would. The invariant everywhere: a ``ready``
custom call holds exactly the text its deltas carried, every statement agreed, the response
completed, the request offered the tool as a custom tool, and the input fits its format.
"""

from __future__ import annotations

import copy
import importlib.util
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolstitch.core import Limits, ResponseAccumulator, read_format
from toolstitch.errors import (
    ContractViolation,
    LateFragment,
    LimitExceeded,
    MalformedArguments,
    SchemaViolation,
    TransitionRefused,
    UnknownTool,
)
from toolstitch.events import ArgumentsComplete, ArgumentsDelta, ArgumentsMalformed, ToolCallReady
from toolstitch.testing import response_events

HAS_RESPONSES = importlib.util.find_spec("openai.types.responses") is not None
HAS_CUSTOM = HAS_RESPONSES and hasattr(
    importlib.import_module("openai.types.responses"), "ResponseCustomToolCall"
)
custom_tools = pytest.mark.skipif(
    not HAS_CUSTOM, reason="this openai release has no custom-tool types (openai.types.responses)"
)

GREP = {"type": "custom", "name": "grep", "description": "Search the code."}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TOOLS = [GREP, WEATHER]
INPUT = "TODO|FIXME in src/**/*.py"


def grammar(syntax: str, definition: str) -> dict[str, Any]:
    fmt = {"type": "grammar", "syntax": syntax, "definition": definition}
    return {"type": "custom", "name": "grep", "format": fmt}


def delta(text: str, item_id: str = "ctc_0", kind: str = "custom_tool_call_input") -> dict[str, Any]:
    return {"type": f"response.{kind}.delta", "item_id": item_id, "output_index": 0, "delta": text}


def stream(text: str = INPUT, name: str = "grep", **kw: Any) -> list[dict[str, Any]]:
    return response_events([("call_1", name, text)], custom=True, **kw)


def sdk(events: list[dict[str, Any]]) -> list[Any]:
    from openai._models import construct_type
    from openai.types.responses import ResponseStreamEvent

    return [construct_type(type_=ResponseStreamEvent, value=e) for e in events]


def run(events: list[Any], tools: Any = TOOLS, **kw: Any) -> tuple[ResponseAccumulator, list[Any]]:
    acc = ResponseAccumulator(tools, **kw)
    out: list[Any] = []
    for event in events:
        out.extend(acc.feed(event))
    out.extend(acc.end())
    return acc, out


def only(acc: ResponseAccumulator) -> Any:
    (call,) = acc.tool_calls
    return call


def find(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(e for e in events if e["type"] == kind)


def codes(call: Any) -> set[str]:
    return {a.code for a in call.anomalies}


# --------------------------------------------------------------------------- the standard stream


def test_a_custom_tool_call_streams_into_a_ready_call_whose_input_is_text() -> None:
    acc, out = run(stream())
    call = only(acc)
    assert (call.status, call.type, call.id, call.name) == ("ready", "custom", "call_1", "grep")
    assert call.arguments == INPUT and call.parsed == INPUT  # the text itself, never parsed as JSON
    assert call.preview is None
    assert codes(call) == set()
    deltas = [e.text for e in out if isinstance(e, ArgumentsDelta)]
    assert "".join(deltas) == INPUT and len(deltas) == 3
    # The JSON scanner is never asked about text that is not meant as JSON.
    assert not [e for e in out if isinstance(e, ArgumentsComplete | ArgumentsMalformed)]
    assert [type(e) for e in out].count(ToolCallReady) == 1


@custom_tools
def test_the_sdks_own_event_objects_give_the_same_call_and_the_sdks_final_item() -> None:
    from openai.types.responses import ResponseCustomToolCall

    acc, _ = run(sdk(stream()))
    call = only(acc)
    assert (call.status, call.type, call.parsed) == ("ready", "custom", INPUT)
    item = acc.get_final_response().output[0]
    assert isinstance(item, ResponseCustomToolCall)
    assert (item.call_id, item.name, item.input) == ("call_1", "grep", INPUT)


def test_an_input_that_looks_like_json_is_still_text() -> None:
    acc, _ = run(stream('{"a": 1}'))
    assert only(acc).parsed == '{"a": 1}'


def test_an_empty_input_is_an_input() -> None:
    acc, _ = run(stream(""))
    call = only(acc)
    assert (call.status, call.parsed) == ("ready", "")


def test_functions_and_custom_tools_in_one_response_are_each_their_own_kind() -> None:
    events = response_events(
        [("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "grep", "x")], custom={"call_2"}
    )
    acc, _ = run(events)
    weather, grep = acc.tool_calls
    assert (weather.type, weather.parsed, weather.status) == ("function", {"city": "Paris"}, "ready")
    assert (grep.type, grep.parsed, grep.status) == ("custom", "x", "ready")


def test_a_whole_response_read_unstreamed_gives_the_custom_call() -> None:
    final = find(stream(), "response.completed")["response"]
    acc = ResponseAccumulator(TOOLS)
    acc.read_response(final)
    call = only(acc)
    assert (call.status, call.type, call.parsed) == ("ready", "custom", INPUT)


def test_text_only_in_the_statements_is_read_whole() -> None:
    events = [e for e in stream() if e["type"] != "response.custom_tool_call_input.delta"]
    acc, _ = run(events)
    call = only(acc)
    assert (call.status, call.parsed) == ("ready", INPUT)
    assert "arguments_without_deltas" in codes(call)


# --------------------------------------------------------------------------- statements that must agree


@pytest.mark.parametrize("where", ["done", "item_done", "completed"])
def test_a_statement_that_differs_from_the_deltas_refuses_the_call(where: str) -> None:
    events = copy.deepcopy(stream())
    if where == "done":
        find(events, "response.custom_tool_call_input.done")["input"] = INPUT + " "
    elif where == "item_done":
        find(events, "response.output_item.done")["item"]["input"] = INPUT[:-1]
    else:
        find(events, "response.completed")["response"]["output"][0]["input"] = "rm -rf /"
    acc, _ = run(events)
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, TransitionRefused)
    assert "arguments_mismatch" in codes(call)
    assert call.arguments == INPUT  # what streamed is kept, never replaced by a statement


def test_a_delta_after_done_refuses_the_call_whitespace_included() -> None:
    events = stream()
    at = events.index(find(events, "response.custom_tool_call_input.done")) + 1
    late = delta(" ")
    acc, _ = run([*events[:at], late, *events[at:]])
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, TransitionRefused)
    assert call.arguments == INPUT


def test_a_delta_after_the_response_completed_withdraws_the_ready_call() -> None:
    events = stream()
    acc, _ = run([*events, delta("x")])
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, LateFragment)
    assert call.arguments == INPUT


def test_an_item_listed_twice_in_the_final_response_refuses_the_call() -> None:
    events = copy.deepcopy(stream())
    output = find(events, "response.completed")["response"]["output"]
    output.append(dict(output[0]))
    acc, _ = run(events)
    assert only(acc).status == "invalid"


def test_a_final_response_that_leaves_the_call_out_refuses_it() -> None:
    events = copy.deepcopy(stream(text="hello"))
    output = find(events, "response.completed")["response"]["output"]
    output[:] = [i for i in output if i["type"] != "custom_tool_call"]
    acc, _ = run(events)
    assert only(acc).status == "invalid"


def test_a_custom_item_announced_twice_is_refused() -> None:
    events = stream()
    added = find(events, "response.output_item.added")
    at = events.index(added) + 1
    acc, _ = run([*events[:at], copy.deepcopy(added), *events[at:]])
    assert only(acc).status == "invalid"


@pytest.mark.parametrize(
    "event",
    [
        # a function's argument delta naming the custom tool's item
        delta("", kind="function_call_arguments"),
        delta("x", kind="function_call_arguments"),
        # a function's .done for it
        {
            "type": "response.function_call_arguments.done",
            "item_id": "ctc_0",
            "output_index": 0,
            "arguments": INPUT,
        },
    ],
    ids=["empty-function-delta", "function-delta", "function-done"],
)
def test_an_event_of_the_other_kind_for_the_item_refuses_the_call(event: dict[str, Any]) -> None:
    events = stream()
    at = events.index(find(events, "response.custom_tool_call_input.done"))
    acc, _ = run([*events[:at], event, *events[at:]])
    assert only(acc).status == "invalid"


def test_an_item_done_that_calls_the_custom_item_a_function_call_refuses_it() -> None:
    events = copy.deepcopy(stream())
    item = find(events, "response.output_item.done")["item"]
    item["type"] = "function_call"
    item["arguments"] = item.pop("input")
    acc, _ = run(events)
    assert only(acc).status == "invalid"


def test_a_custom_delta_for_a_function_item_refuses_the_function_call() -> None:
    events = response_events([("call_1", "get_weather", '{"city": "Paris"}')])
    at = events.index(find(events, "response.function_call_arguments.done"))
    stray = delta(" ", item_id="fc_0")
    acc, _ = run([*events[:at], stray, *events[at:]])
    assert only(acc).status == "invalid"


# --------------------------------------------------------------------------- ready only when completed


def test_an_incomplete_response_leaves_the_custom_call_incomplete() -> None:
    acc, _ = run(stream(status="incomplete"))
    assert only(acc).status == "incomplete"


def test_a_failed_response_leaves_the_custom_call_incomplete() -> None:
    acc, _ = run(stream(status="failed"))
    assert only(acc).status == "incomplete"


@pytest.mark.parametrize("cut", range(2, 9))
def test_a_stream_cut_anywhere_never_leaves_a_ready_custom_call(cut: int) -> None:
    acc, _ = run(stream()[:cut])
    assert all(c.status != "ready" for c in acc.tool_calls)


def test_an_item_done_with_another_status_leaves_the_call_incomplete() -> None:
    events = copy.deepcopy(stream())
    find(events, "response.output_item.done")["item"]["status"] = "incomplete"
    acc, _ = run(events)
    assert only(acc).status == "incomplete"


def test_an_item_without_a_status_lets_the_response_decide() -> None:
    events = copy.deepcopy(stream())
    for e in events:
        item = e.get("item")
        if isinstance(item, dict):
            item.pop("status", None)
    for item in find(events, "response.completed")["response"]["output"]:
        item.pop("status", None)
    acc, _ = run(events)
    call = only(acc)
    assert call.status == "ready" and "item_status_missing" in codes(call)


# --------------------------------------------------------------------------- limits and Unicode


def test_the_input_is_held_to_max_argument_bytes() -> None:
    acc, _ = run(stream("x" * 500), limits=Limits(max_argument_bytes=100))
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, LimitExceeded)
    assert len(call.arguments) <= Limits().sample_chars


def test_the_input_is_held_to_max_stream_bytes() -> None:
    acc, _ = run(stream("x" * 5000), limits=Limits(max_stream_bytes=3000))
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, LimitExceeded)


def test_a_lone_surrogate_refuses_the_input() -> None:
    acc, _ = run(stream("caf\ud800"))
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, MalformedArguments)


def test_a_surrogate_pair_split_across_two_deltas_is_one_character() -> None:
    events = stream("a\U0001f600b")
    delta = find(events, "response.custom_tool_call_input.delta")
    at = events.index(delta)
    halves = [{**delta, "delta": "a\ud83d"}, {**delta, "delta": "\ude00b"}]  # a proxy cut UTF-16 units
    rest = [e for e in events[at:] if e["type"] != "response.custom_tool_call_input.delta"]
    acc, _ = run([*events[:at], *halves, *rest])
    call = only(acc)
    assert (call.status, call.parsed) == ("ready", "a\U0001f600b")


# --------------------------------------------------------------------------- the request is the contract


def test_a_custom_call_to_a_tool_nobody_offered_is_refused() -> None:
    acc, _ = run(stream(name="rm"))
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, UnknownTool)


def test_a_custom_call_to_a_function_tool_is_refused() -> None:
    acc, _ = run(stream('{"city": "Paris"}', name="get_weather"))
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, UnknownTool)
    assert "custom tool" in call.error.message


def test_a_function_call_to_a_custom_tool_is_refused() -> None:
    acc, _ = run(response_events([("call_1", "grep", "{}")]))
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, UnknownTool)


def test_no_tools_offered_refuses_the_custom_call() -> None:
    acc, _ = run(stream(), tools=[])
    assert isinstance(only(acc).error, UnknownTool)


def test_tools_not_known_leave_names_and_formats_unchecked() -> None:
    acc, _ = run(stream(), tools=None)
    assert only(acc).status == "ready"


@pytest.mark.parametrize(
    ("choice", "ready"),
    [
        ({"type": "custom", "name": "grep"}, True),
        ({"type": "custom", "name": "other"}, False),
        ({"type": "function", "name": "get_weather"}, False),
        ({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "custom", "name": "grep"}]}, True),
        ("none", False),
    ],
)
def test_tool_choice_holds_custom_calls(choice: Any, ready: bool) -> None:
    acc, _ = run(stream(), tool_choice=choice)
    call = only(acc)
    assert call.ready is ready
    if not ready:
        assert isinstance(call.error, ContractViolation)


# --------------------------------------------------------------------------- formats


@pytest.mark.parametrize(
    ("definition", "text", "ready"),
    [
        (r"[a-z]+\d+", "abc123", True),
        (r"[a-z]+\d+", "abc123x", False),  # a prefix match is not a full match
        (r"[a-z]+\d+", "1abc123", False),
        (r"ab|cd", "ab", True),
        (r"ab|cd", "abcd", False),
        (r"(?i)select \w+ from \w+", "SELECT id FROM users", True),
        (r"^\d{3}-\d{4}$", "555-1234", True),
        (r"^\d{3}-\d{4}$", "555-1234\n", False),  # Rust's ``$`` is the end of the text, not before \n
        (r"(?m)^\d+$", "12\n34", False),  # multi-line anchors, and still a full match: \n is not \d
        (r"\bfoo\b.*", "foo bar", True),
        (r"\bfoo\b.*", "foobar", False),
        (r"a{2,3}", "aaaa", False),
        (r"a{2,}", "aaaa", True),
        (r"(?s).*", "two\nlines", True),
        (r".*", "two\nlines", False),
        (r"x*", "", True),
        # Rust's syntax, which Python's re refuses or reads otherwise
        (r"\p{Han}+", "深圳", True),
        (r"\p{Han}+", "深圳x", False),
        (r"[\p{L}\p{N}_]+", "héllo_1", True),
        (r"[[:alpha:]]+", "abc", True),
        (r"[[:alpha:]]+", "ab:", False),  # a POSIX class, not the set of its characters
        (r"\x{1F600}", "😀", True),
        (r"[a-z&&[^b]]+", "ac", True),  # set intersection
        (r"[a-z&&[^b]]+", "abc", False),
        (r"[a-z--b]+", "ac", True),  # set difference
        (r"[a-z--b]+", "ab", False),
        (r"\d+", "١٢٣", True),  # Unicode digits, as Rust reads \d
        (r"(?-u:\d)+", "١٢٣", False),
        (r"(?x) a b  # a comment at the very end", "ab", True),  # verbose mode's comment ends the line
        (r"(?P<x>a)(?P<y>b)", "ab", True),
    ],
)
def test_a_regex_grammar_is_a_full_match_with_rust_semantics(definition: str, text: str, ready: bool) -> None:
    acc, _ = run(stream(text), tools=[grammar("regex", definition)])
    call = only(acc)
    assert call.ready is ready
    if not ready:
        assert isinstance(call.error, SchemaViolation) and "regex grammar" in call.error.message


@pytest.mark.parametrize(
    "definition",
    [
        r"(a+)+$",  # exponential for a backtracking engine on "aaaa...!"
        r"(a|a)*b",
        r"(a|aa)*c",
        r"(\w+\s?)*$",
    ],
)
def test_a_catastrophic_pattern_is_checked_in_linear_time(definition: str) -> None:
    text = "a" * 5000 + "!"
    acc, _ = run(stream(text), tools=[grammar("regex", definition)])
    call = only(acc)
    # re.fullmatch would take longer than the age of the universe here; the regex crate answers.
    assert call.status == "invalid" and isinstance(call.error, SchemaViolation)
    assert "does not match" in call.error.message


@pytest.mark.parametrize(
    ("definition", "why"),
    [
        (r"(a)\1", "backreferences are not supported"),
        (r"a(?=b)b", "look-around"),
        (r"(?<!x)a", "look-around"),
        (r"(?P<x>a)(?P=x)", "does not compile"),  # Python's named backreference
        (r"(a)?(?(1)b|c)", "does not compile"),  # a conditional group
        (r"(?>a)", "does not compile"),  # an atomic group
        (r"(unclosed", "does not compile"),
        (r"a)|(b", "unopened group"),  # compiled alone: wrapped, it would parse (and match "a...")
        (r"(?:a{1000}){1000}", "size limit"),
        ("(?:" * 3000 + "a" + ")" * 3000, "does not compile"),  # nested past the crate's limit
    ],
)
def test_a_regex_the_engine_refuses_refuses_the_call(definition: str, why: str) -> None:
    acc, _ = run(stream("ab"), tools=[grammar("regex", definition)])
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, SchemaViolation)
    assert why in call.error.message
    assert "grammar_unchecked" in codes(call)


@pytest.mark.parametrize(
    "fmt",
    [
        {"type": "grammar", "syntax": "ebnf", "definition": "x"},
        {"type": "grammar", "syntax": "regex", "definition": 3},
        {"type": "json"},
        "text",
    ],
)
def test_a_format_that_cannot_be_read_refuses_the_call(fmt: Any) -> None:
    acc, _ = run(stream("x"), tools=[{"type": "custom", "name": "grep", "format": fmt}])
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, SchemaViolation)


def test_a_text_format_takes_any_text() -> None:
    tool = {"type": "custom", "name": "grep", "format": {"type": "text"}}
    acc, _ = run(stream("¿qué? ✓\ttab"), tools=[tool])
    assert only(acc).status == "ready"


_ATOMS = st.sampled_from(["a", "b", "[ab]", ".", "(?:ab)", "(?:a|b)", "(a)", "[^a]"])
_QUANT = st.sampled_from(["", "*", "+", "?", "{0,2}", "{2}", "*?", "{1,}"])
_PATTERNS = st.lists(st.tuples(_ATOMS, _QUANT), max_size=5).map(
    lambda parts: "".join(a + q for a, q in parts)
)


@settings(max_examples=300, deadline=None)
@given(pattern=_PATTERNS, alternative=_PATTERNS, text=st.text(alphabet="ab1 ", max_size=6))
def test_the_engine_agrees_with_re_fullmatch_where_the_two_syntaxes_agree(
    pattern: str, alternative: str, text: str
) -> None:
    # On ASCII literals, classes, groups and repeats (no anchors, no \n, nothing Unicode) the two
    # engines mean the same: a full match is a full match. Everything else is pinned above.
    definition = f"{pattern}|{alternative}" if alternative else pattern
    fmt = read_format({"type": "grammar", "syntax": "regex", "definition": definition})
    notes: list[Any] = []
    error = fmt.check("grep", text, text, notes)
    assert (error is None) is (re.fullmatch(definition, text) is not None), (definition, text)


# --------------------------------------------------------------------------- hostile shapes


def test_an_announced_input_that_is_not_text_refuses_the_call() -> None:
    events = copy.deepcopy(stream())
    find(events, "response.output_item.added")["item"]["input"] = {"cmd": "rm"}
    acc, _ = run(events)
    call = only(acc)
    assert call.status == "invalid" and isinstance(call.error, MalformedArguments)


@pytest.mark.parametrize("value", [None, 3, ["TODO"]], ids=["null", "number", "list"])
def test_a_delta_that_is_not_text_refuses_the_call(value: Any) -> None:
    events = stream()
    at = events.index(find(events, "response.custom_tool_call_input.done"))
    acc, _ = run([*events[:at], {**delta(""), "delta": value}, *events[at:]])
    assert only(acc).status == "invalid"


def test_a_done_input_that_is_not_text_refuses_the_call() -> None:
    events = copy.deepcopy(stream())
    find(events, "response.custom_tool_call_input.done")["input"] = ["TODO"]
    acc, _ = run(events)
    assert only(acc).status == "invalid"


def test_an_item_done_without_added_reads_the_custom_call_whole() -> None:
    events = [
        e
        for e in stream()
        if e["type"] not in ("response.output_item.added",)
        and not e["type"].startswith("response.custom_tool_call_input")
    ]
    acc, _ = run(events)
    call = only(acc)
    assert (call.status, call.type, call.parsed) == ("ready", "custom", INPUT)
    assert "unknown_item" in codes(call)


def test_a_function_item_and_a_custom_item_claiming_one_call_id_are_both_refused() -> None:
    events = response_events(
        [("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "grep", "x")], custom={"call_2"}
    )
    for e in events:  # the custom item claims the function's call_id, everywhere it says one
        items = [e.get("item"), *((e.get("response") or {}).get("output") or [])]
        for item in items:
            if isinstance(item, dict) and item.get("call_id") == "call_2":
                item["call_id"] = "call_1"
    acc, _ = run(events)
    assert [c.type for c in acc.tool_calls] == ["function", "custom"]
    assert [c.status for c in acc.tool_calls] == ["invalid", "invalid"]


def test_a_grammar_is_compiled_once_per_definition() -> None:
    fmt = {"type": "grammar", "syntax": "regex", "definition": r"[a-z]+ once"}
    first, second = read_format(fmt), read_format(dict(fmt))
    assert first._engine is not None and first._engine is second._engine


def test_feeding_without_events_writes_the_same_call() -> None:
    acc = ResponseAccumulator(TOOLS)
    for event in stream():
        acc.feed(event, events=False)
    acc.end()
    call = only(acc)
    assert (call.status, call.parsed) == ("ready", INPUT)


@custom_tools
@pytest.mark.parametrize("where", ["done", "item_done", "completed", "late"])
def test_the_sdks_objects_are_held_to_the_same_statements(where: str) -> None:
    events = copy.deepcopy(stream())
    if where == "done":
        find(events, "response.custom_tool_call_input.done")["input"] = "other"
    elif where == "item_done":
        find(events, "response.output_item.done")["item"]["input"] = "other"
    elif where == "completed":
        find(events, "response.completed")["response"]["output"][0]["input"] = "other"
    else:
        events.append(delta("x"))
    acc, _ = run(sdk(events))
    call = only(acc)
    assert call.status == "invalid" and call.arguments == INPUT


def test_an_input_announced_with_its_item_is_its_first_piece_and_held_to_the_statements() -> None:
    events = copy.deepcopy(stream())
    find(events, "response.output_item.added")["item"]["input"] = "TODO"
    acc, _ = run(events)
    assert only(acc).status == "invalid"  # "TODO" + the deltas is not what .done states
    events = [e for e in copy.deepcopy(stream()) if e["type"] != "response.custom_tool_call_input.delta"]
    find(events, "response.output_item.added")["item"]["input"] = INPUT
    acc, _ = run(events)
    assert (only(acc).status, only(acc).parsed) == ("ready", INPUT)


def test_a_delta_naming_another_output_index_refuses_the_call() -> None:
    events = stream()
    at = events.index(find(events, "response.custom_tool_call_input.delta"))
    acc, _ = run([*events[:at], {**events[at], "output_index": 7}, *events[at + 1 :]])
    assert only(acc).status == "invalid"
