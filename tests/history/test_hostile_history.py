"""Hostile input to the history layer: problems or documented errors, never a crash, linear time.

Issue 10's classes: a history that is not a list, a message nested 900 levels deep (past pydantic's
serialisation limit and Python's recursion limit), a completion whose only choice has index 1, lone
surrogates in ids, 20,000 tool calls (the validator and repair were quadratic), and a request that
is not a contract a call can be checked against (H30, H91-H93).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion, ChatCompletionMessage

from toolstitch.errors import ChoiceNotFoundError, ToolstitchError, UnusableMessageError
from toolstitch.history import (
    DIALECT_NAMES,
    HistoryProblem,
    assistant_message,
    repair_history,
    tool_message,
    validate_history,
    validate_request,
)
from toolstitch.history._common import COPY_DEPTH, to_plain

USER = {"role": "user", "content": "hi"}


def nested(depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(depth - 1):
        out = {"a": out}
    return out


def depth_of(value: Any) -> int:
    depth = 0
    while isinstance(value, dict) and value:
        value = value["a"]
        depth += 1
    return depth + 1 if isinstance(value, dict) else depth


def rules(problems: list[HistoryProblem]) -> set[str]:
    return {p.rule for p in problems}


def fn_tool(name: str, parameters: Any = None, **extra: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function, **extra}


# ------------------------------------------------------------------- input that is no list


@pytest.mark.parametrize("messages", [None, "hello", b"x", {"role": "user"}, 5, 1.5, object()])
def test_validate_history_reports_input_that_is_no_list(messages: Any) -> None:
    problems = validate_history(messages)
    assert [(p.rule, p.severity, p.index) for p in problems] == [("H00", "error", None)]
    assert "not a list" in problems[0].message


def test_validate_history_reads_any_iterable_of_messages() -> None:
    assert validate_history(iter([USER])) == []
    assert validate_history((USER,)) == []


@pytest.mark.parametrize("body", [None, "x", [USER], 3])
def test_validate_request_reports_a_body_that_is_no_object(body: Any) -> None:
    problems = validate_request(body) if body is not None else validate_request(messages=None)
    assert "H00" in rules(problems)


def test_validate_request_takes_keywords_like_create() -> None:
    tools = [fn_tool("f", {"type": "object"})]
    assert validate_request(messages=[USER], tools=tools, tool_choice="auto") == []
    assert validate_request({"messages": [USER]}, tools=tools) == []
    kwargs = {"model": "m", "messages": [USER], "tools": tools, "stream": True, "parallel_tool_calls": False}
    assert validate_request(**kwargs) == []
    assert validate_request({"messages": [USER]}, "mistral", tools=tools) == []


# ---------------------------------------------------------------------- nested 900 deep


def deep_completion(depth: int) -> ChatCompletion:
    message = {"role": "assistant", "content": "hi", "reasoning": nested(depth)}
    return ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        }
    )


def test_assistant_message_keeps_a_provider_field_nested_900_deep() -> None:
    message = assistant_message(deep_completion(900))
    assert message["content"] == "hi"
    assert depth_of(message["reasoning"]) == 900


def test_validation_and_repair_of_a_900_deep_message_report_it() -> None:
    history = [USER, {"role": "assistant", "content": "x", "reasoning": nested(900)}, USER]
    for messages in (history, [USER, deep_completion(900).choices[0].message, USER]):
        problems = validate_history(messages)
        assert [(p.rule, p.index) for p in problems] == [("H90", 1)]
        assert "901 levels" in problems[0].message
        fixed, report = repair_history(messages)
        assert depth_of(fixed[1]["reasoning"]) == 900
        assert [p.rule for p in report.remaining] == ["H90"]


def test_200_levels_are_fine_and_the_limit_is_in_the_message() -> None:
    assert validate_history([{"role": "user", "content": "x", "meta": nested(199)}]) == []
    assert rules(validate_history([{"role": "user", "content": "x", "meta": nested(200)}])) == {"H90"}


def test_a_message_that_contains_itself_is_one_problem() -> None:
    loop: dict[str, Any] = {"role": "user", "content": "x"}
    loop["self"] = loop
    problems = validate_history([loop])
    assert [p.rule for p in problems] == ["H90"]
    assert f"more than {COPY_DEPTH}" in problems[0].message
    fixed, _ = repair_history([loop])
    assert fixed[0]["content"] == "x"


def test_to_plain_walks_any_depth_without_recursion() -> None:
    data, depth = to_plain([nested(50_000)])
    assert depth == COPY_DEPTH + 1  # copied down to the bound, the rest kept by reference
    assert isinstance(data, list)
    assert to_plain({"a": (1, [2])}) == ({"a": [1, [2]]}, 3)
    assert to_plain("x") == ("x", 0)


def test_to_plain_copies_shared_values_separately() -> None:
    shared = {"k": 1}
    data, _ = to_plain([shared, shared])
    data[0]["k"] = 2
    assert data[1]["k"] == 1 and shared["k"] == 1


def test_to_plain_reads_a_deep_sdk_model_like_the_sdk_dumps_it() -> None:
    shallow = ChatCompletionMessage.model_validate({"role": "assistant", "content": "x", "extra": 1})
    assert to_plain(shallow)[0] == shallow.model_dump(mode="json", exclude_unset=True)
    deep = ChatCompletionMessage.model_validate({"role": "assistant", "content": "x", "r": nested(400)})
    data, depth = to_plain(deep)
    assert data["role"] == "assistant" and data["content"] == "x" and depth == 401
    assert set(data) == {"role", "content", "r"}


# ------------------------------------------------------------------- choices by index


def one_choice(index: int) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {"index": index, "finish_reason": "stop", "message": {"role": "assistant", "content": "one"}}
            ],
        }
    )


def test_a_completion_whose_only_choice_has_index_1() -> None:
    completion = one_choice(1)
    with pytest.raises(ChoiceNotFoundError) as info:
        assistant_message(completion)
    assert isinstance(info.value, ToolstitchError) and isinstance(info.value, ValueError)
    assert (info.value.choice, info.value.available) == (0, [1])
    assert "no choice 0" in str(info.value)
    assert assistant_message(completion, choice=1) == {"role": "assistant", "content": "one"}
    as_dict = completion.model_dump()
    with pytest.raises(ChoiceNotFoundError):
        assistant_message(as_dict)
    assert assistant_message(as_dict, choice=1)["content"] == "one"


@pytest.mark.parametrize(
    "source",
    [
        {"choices": "abc"},
        {"choices": [{"index": 0}]},
        {"choices": [{"index": 0, "message": None}]},
        {"role": "user", "content": "x"},
    ],
)
def test_unusable_sources_raise_one_documented_error(source: Any) -> None:
    with pytest.raises(UnusableMessageError):
        assistant_message(source)


@pytest.mark.parametrize(
    "calls",
    [
        "abc",
        5,
        {"id": "x"},
        [5, "x", None],
        [{"id": "c", "function": "not a dict"}],
        [{"custom": 3, "type": "custom"}],
    ],
)
def test_hostile_tool_calls_never_crash_the_builder(calls: Any) -> None:
    message = assistant_message({"role": "assistant", "content": None, "tool_calls": calls})
    assert message["role"] == "assistant"


# ------------------------------------------------------------------------ lone surrogates


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_ids_with_lone_surrogates_are_rewritten_not_raised(dialect: str) -> None:
    bad = "call_\udc80" + "x" * 50
    call = {"id": bad, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = assistant_message({"role": "assistant", "content": None, "tool_calls": [call]}, dialect=dialect)
    answer = tool_message(call, "ok", dialect=dialect)
    assert message["tool_calls"][0]["id"] == answer["tool_call_id"]
    validate_history([USER, message, answer], dialect)
    fixed, _ = repair_history([USER, {"role": "assistant", "content": None, "tool_calls": [call]}], dialect)
    assert fixed[1]["tool_calls"][0]["id"] == fixed[2]["tool_call_id"]


# ------------------------------------------------------------------------------ linear time


def big_turn(n: int, same_id: bool) -> list[dict[str, Any]]:
    ids = ["dup" if same_id else f"call_{k}" for k in range(n)]
    calls = [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]
    results = [{"role": "tool", "tool_call_id": i, "content": "ok"} for i in reversed(ids)]
    return [USER, {"role": "assistant", "content": None, "tool_calls": calls}, *results, USER]


@pytest.mark.parametrize("same_id", [False, True])
def test_20000_tool_calls_validate_and_repair_in_linear_time(same_id: bool) -> None:
    # Quadratic code would take minutes here (4e8 steps); linear code takes well under a second.
    history = big_turn(20_000, same_id)
    problems = validate_history(history)
    assert "H05" in rules(problems) or same_id
    fixed, report = repair_history(history)
    assert len(fixed) == len(history)
    assert report.ok
    ids = [c["id"] for c in fixed[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in fixed[2:-1]] == ids  # declared order, every id answered


def test_20000_calls_answered_out_of_their_turn_are_moved_back() -> None:
    n = 20_000
    history = big_turn(n, same_id=True)
    results = history[2:-1]
    moved = [USER, history[1], USER, *results]  # every result after an interloper
    _, report = repair_history(moved)
    assert report.ok
    assert sum(c.action == "moved" for c in report.changes) == n


# ------------------------------------------------------------------ the request as a contract


def test_tool_schemas_that_are_not_json_schema_are_reported() -> None:
    for parameters in ({"type": "str"}, {"type": "object", "properties": {"a": {"type": 5}}}, "object", [1]):
        problems = validate_request(messages=[USER], tools=[fn_tool("f", parameters)])
        assert [p.rule for p in problems] == ["H91"], parameters
        assert "'f'" in problems[0].message
    assert validate_request(messages=[USER], tools=[fn_tool("f", {"type": "object", "properties": {}})]) == []


def test_a_schema_nested_too_deep_to_check_is_reported_not_raised() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(5_000):
        schema = {"type": "object", "properties": {"a": schema}}
    problems = validate_request(messages=[USER], tools=[fn_tool("f", schema)])
    assert "H91" in rules(problems)


@pytest.mark.parametrize(
    ("tools", "rule"),
    [
        ([{"function": {"name": "f"}}], "H92"),
        ([{"type": "tool", "function": {"name": "f"}}], "H92"),
        (["f"], "H92"),
        ("f", "H92"),
        ({"type": "function"}, "H92"),
        ([fn_tool("f"), fn_tool("f")], "H30"),
        ([{"type": "function", "function": {"parameters": {}}}], "H11"),
    ],
)
def test_tools_that_are_no_contract_are_reported(tools: Any, rule: str) -> None:
    for dialect in DIALECT_NAMES:
        problems = validate_request(messages=[USER], tools=tools, dialect=dialect)
        assert (rule, "error") in {(p.rule, p.severity) for p in problems}, (dialect, problems)


def test_tools_from_a_generator_are_read() -> None:
    problems = validate_request(messages=[USER], tools=(t for t in [fn_tool("f", {"type": "str"})]))
    assert rules(problems) == {"H91"}


@pytest.mark.parametrize(
    ("tool_choice", "ok"),
    [
        ("auto", True),
        ("none", True),
        ("required", True),
        ({"type": "function", "function": {"name": "f"}}, True),
        ({"type": "function", "function": {"name": "g"}}, False),
        ({"type": "function", "function": {}}, False),
        ({"type": "function"}, False),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [fn_tool("f")]}}, True),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [fn_tool("g")]}}, False),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}, False),
        ({"type": "custom", "custom": {"name": "f"}}, True),
        ("f", False),
        ({"function": {"name": "f"}}, False),
        (["f"], False),
        (7, False),
    ],
)
def test_tool_choice_must_name_an_offered_tool(tool_choice: Any, ok: bool) -> None:
    problems = validate_request(messages=[USER], tools=[fn_tool("f")], tool_choice=tool_choice)
    assert (problems == []) is ok, problems
    if not ok:
        assert rules(problems) == {"H93"}


def test_parallel_tool_calls_with_tools_is_fine() -> None:
    assert validate_request(messages=[USER], tools=[fn_tool("f")], parallel_tool_calls=False) == []


# ------------------------------------------------------------------------- properties

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(
    ["role", "content", "tool_calls", "tool_call_id", "name", "id", "type", "function", "arguments", "index"]
)
MESSAGE_LIKE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=5)
    | st.sampled_from(["assistant", "tool", "user"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=3), inner, max_size=5)
    ),
    max_leaves=30,
)


@given(messages=MESSAGE_LIKE | st.lists(MESSAGE_LIKE, max_size=6), dialect=st.sampled_from(DIALECT_NAMES))
def test_the_validator_and_repair_never_raise(messages: Any, dialect: str) -> None:
    problems = validate_history(messages, dialect)
    assert all(isinstance(p, HistoryProblem) for p in problems)
    if isinstance(messages, list):
        fixed, report = repair_history(messages, dialect)
        assert list(report.remaining) == validate_history(fixed, dialect)


@given(
    body=st.dictionaries(
        st.sampled_from(["messages", "tools", "tool_choice", "parallel_tool_calls", "n"]), MESSAGE_LIKE | JSON
    ),
    dialect=st.sampled_from(DIALECT_NAMES),
)
def test_validate_request_never_raises(body: dict[str, Any], dialect: str) -> None:
    validate_request(body, dialect)


@given(message=st.dictionaries(KEYS, MESSAGE_LIKE, max_size=6), choice=st.integers(-2, 3))
def test_assistant_message_raises_only_documented_errors(message: dict[str, Any], choice: int) -> None:
    for source in (message, {"choices": [{"index": 1, "message": message}]}):
        with contextlib.suppress(UnusableMessageError, TypeError):  # the documented errors
            assistant_message(source, choice=choice)


def test_tool_results_that_cannot_be_json_are_a_value_error() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    loop: list[Any] = []
    loop.append(loop)
    # 100_000 levels: past every interpreter's limit (CPython 3.13's JSON encoder takes 5_000).
    for result in (nested(100_000), float("nan"), loop):
        with pytest.raises(ValueError):
            tool_message(call, result)
    assert tool_message(call, nested(100))["content"].startswith('{"a":')


def test_problems_quote_bounded_text() -> None:
    huge = "n" * 100_000
    schema = {"type": "object", "properties": {"a": {"type": "x" * 100_000}}}
    problems = validate_request(
        messages=[USER],
        tools=[fn_tool(huge, schema)],
        tool_choice={"type": "function", "function": {"name": huge + "2"}},
    )
    assert {"H91", "H93"} <= rules(problems)
    assert all(len(p.message) < 2_000 for p in problems if p.rule in ("H91", "H93"))


@given(value=JSON)
def test_to_plain_is_an_equal_copy_of_json(value: Any) -> None:
    data, depth = to_plain(value)
    assert data == value or data != data  # NaN is not equal to itself
    assert depth >= 0
    if isinstance(value, dict | list) and value:
        assert data is not value


def test_nameless_tools_still_count_as_tools() -> None:
    nameless = [{"type": "function", "function": {}}]
    problems = validate_request(messages=[USER], tools=nameless, tool_choice="auto")
    assert rules(problems) == {"H11"}
