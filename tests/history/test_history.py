"""History builders, validator and repair: what a user relies on to keep the next request accepted.

The validator is tested as a table: valid histories that must raise nothing (per dialect), and
broken ones that must raise a given rule at a given message with a given severity. A meta test
keeps the table honest: every rule and every dialect has at least one broken case.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessage,
    ChatCompletionMessageParam,
)

from tests.conftest import examples
from toolstitch.errors import CallNotReadyError, HistoryError, MalformedArguments, ToolstitchError
from toolstitch.history import (
    NOT_EXECUTED,
    HistoryProblem,
    assistant_message,
    call_error_text,
    ensure_valid_history,
    repair_history,
    result_message,
    tool_message,
    tool_messages,
    validate_history,
    validate_request,
)
from toolstitch.history._dialects import DIALECT_NAMES, DIALECTS, RULES, get_dialect

try:  # openai >= 1.99.2 names the function-tool types apart from the new custom-tool ones
    from openai.types.chat import ChatCompletionMessageFunctionToolCall
except ImportError:  # older releases: the same type under its former name
    from openai.types.chat import ChatCompletionMessageToolCall as ChatCompletionMessageFunctionToolCall  # type: ignore[assignment,no-redef]

Msg = dict[str, Any]

# ids valid under every dialect: 9 alphanumerics (Mistral), within OpenAI's 40 and Anthropic's pattern
A, B = "abcDEF123", "xyz789QRS"


def call(call_id: Any = A, name: str = "get_weather", args: Any = '{"city":"Paris"}') -> Msg:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def asst(*calls: Msg, content: Any = None, **extra: Any) -> Msg:
    m: Msg = {"role": "assistant", "content": content}
    if calls:
        m["tool_calls"] = list(calls)
    m.update(extra)
    return m


def tool(call_id: Any = A, content: Any = "18C, sunny", **extra: Any) -> Msg:
    return {"role": "tool", "tool_call_id": call_id, "content": content, **extra}


def user(text: str = "Weather in Paris and Rome?") -> Msg:
    return {"role": "user", "content": text}


SYSTEM: Msg = {"role": "system", "content": "You are terse."}


def base(dialect: str) -> list[Msg]:
    """A complete two-call turn shaped the way ``dialect`` wants it; valid everywhere."""
    empty = DIALECTS[dialect].empty_content
    return [
        SYSTEM,
        user(),
        asst(call(A), call(B, args='{"city":"Rome"}'), content=empty),
        tool(A),
        tool(B, "21C"),
        asst(content="Paris 18C, Rome 21C."),
        user("Thanks"),
    ]


def errors(problems: list[HistoryProblem]) -> list[HistoryProblem]:
    return [p for p in problems if p.severity == "error"]


# ------------------------------------------------------------------------------ valid table

VALID: list[tuple[str, str, list[Any]]] = [
    *[(f"base-{d}", d, base(d)) for d in DIALECT_NAMES],
    ("content-empty-string-with-calls", "openai", [user(), asst(call(), content=""), tool()]),
    ("content-text-with-calls", "openai", [user(), asst(call(), content="Checking."), tool()]),
    (
        "two-turns",
        "openai",
        [user(), asst(call(A)), tool(A), user("again"), asst(call(B)), tool(B)],
    ),
    ("ends-with-tool-message", "mistral", [user(), asst(call()), tool()]),
    (
        "tool-content-text-parts",
        "openai",
        [user(), asst(call()), tool(content=[{"type": "text", "text": "18C"}])],
    ),
    (
        "legacy-function-message",
        "openai",
        [
            user(),
            {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
            {"role": "function", "name": "f", "content": "1"},
        ],
    ),
    (
        "custom-tool-call",
        "openai",
        [
            user(),
            asst({"id": A, "type": "custom", "custom": {"name": "grep", "input": "foo"}}),
            tool(),
        ],
    ),
    (
        "malformed-arguments-answered-with-error",  # OpenAI does not parse replayed arguments
        "openai",
        [user(), asst(call(args='{"city": "Par')), tool(content="Error: bad JSON")],
    ),
    ("empty-arguments-on-vllm", "vllm", [user(), asst(call(args=""), content=""), tool()]),
    (
        "deepseek-reasoning-echoed",
        "deepseek",
        [user(), asst(call(), reasoning_content="think"), tool(), user("more")],
    ),
    (
        "gemini-signature-on-first-call-only",
        "gemini-compat",
        [
            user(),
            asst({**call(A), "extra_content": {"google": {"thought_signature": "s"}}}, call(B)),
            tool(A),
            tool(B),
        ],
    ),
    ("gemini-dotted-name", "gemini-compat", [user(), asst(call(name="maps.search")), tool()]),
    ("anthropic-final-empty-assistant", "anthropic-compat", [user(), asst(content="")]),
    ("long-id-tolerated-by-vllm", "vllm", [user(), asst(call("c" * 50), content=""), tool("c" * 50)]),
    ("dotted-id-on-openai", "openai", [user(), asst(call("functions.Bash:0")), tool("functions.Bash:0")]),
    ("user-name", "openai", [{"role": "user", "content": "hi", "name": "alice_1"}]),
    ("developer-role", "openai", [{"role": "developer", "content": "Be brief."}, user()]),
]


@pytest.mark.parametrize(("dialect", "messages"), [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_histories_have_no_problem(dialect: str, messages: list[Any]) -> None:
    assert validate_history(messages, dialect) == []
    ensure_valid_history(messages, dialect)  # does not raise


def test_sdk_message_objects_are_accepted_in_a_history() -> None:
    message = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [call(A), call(B)],
        }
    )
    assert validate_history([user(), message, tool(A), tool(B)]) == []
    assert [p.rule for p in validate_history([user(), message, tool(A)])] == ["H03"]


# ---------------------------------------------------------------------------- invalid table

LONG_DESCRIPTION = "x" * 1100


def nested(depth: int) -> dict[str, Any]:
    """A dict nested ``depth`` levels deep."""
    out: dict[str, Any] = {}
    for _ in range(depth - 1):
        out = {"a": out}
    return out


def fn_tool(name: str, parameters: Any = None) -> Msg:
    function: Msg = {"name": name}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def too_many_tools() -> list[Msg]:
    return [{"type": "function", "function": {"name": f"t{i}"}} for i in range(129)]


# (case id, dialect, history, rule, severity, message index); a dict history is a request body.
INVALID: list[tuple[str, str, Any, str, str, int | None]] = [
    ("H00-empty", "openai", [], "H00", "error", None),
    ("H00-unknown-role", "openai", [{"role": "robot", "content": "x"}], "H00", "error", 0),
    ("H00-not-an-object", "openai", [user(), "hello"], "H00", "error", 1),
    ("H00-mistral-developer", "mistral", [{"role": "developer", "content": "x"}, user()], "H00", "error", 0),
    ("H01-leading-tool", "openai", [tool(), user()], "H01", "error", 0),
    ("H01-after-user", "openai", [user(), asst(call()), tool(), user(), tool(B)], "H01", "error", 4),
    ("H01-deepseek", "deepseek", [user(), tool()], "H01", "error", 1),
    ("H01-mistral", "mistral", [user(), tool()], "H01", "error", 1),
    ("H01-anthropic", "anthropic-compat", [user(), tool()], "H01", "error", 1),
    ("H02-undeclared", "openai", [user(), asst(call(A)), tool(A), tool(B)], "H02", "error", 3),
    ("H02-gemini", "gemini-compat", [user(), asst(call(A)), tool(B)], "H02", "error", 2),
    ("H02-mistral", "mistral", [user(), asst(call(A)), tool(B)], "H02", "error", 2),
    ("H03-missing", "openai", [user(), asst(call(A), call(B)), tool(A), user()], "H03", "error", 1),
    ("H03-trailing", "openai", [user(), asst(call(A))], "H03", "error", 1),
    ("H03-deepseek", "deepseek", [user(), asst(call(A)), user()], "H03", "error", 1),
    ("H03-anthropic", "anthropic-compat", [user(), asst(call(A)), user()], "H03", "error", 1),
    ("H03-gemini", "gemini-compat", [user(), asst(call(A)), user()], "H03", "error", 1),
    ("H03-azure", "azure", [user(), asst(call(A)), user()], "H03", "error", 1),
    (
        "H03-split-parallel-calls",  # DeepSeek H61: calls spread over two assistant messages
        "deepseek",
        [user(), asst(call(A)), asst(call(B)), tool(A), tool(B)],
        "H03",
        "error",
        1,
    ),
    ("H04-interleaved", "openai", [user(), asst(call()), user("wait"), tool()], "H04", "error", 2),
    ("H05-order-openai", "openai", [user(), asst(call(A), call(B)), tool(B), tool(A)], "H05", "warning", 2),
    (
        "H05-order-vllm",
        "vllm",
        [user(), asst(call(A), call(B), content=""), tool(B), tool(A)],
        "H05",
        "error",
        2,
    ),
    (
        "H05-order-llama.cpp",
        "llama.cpp",
        [user(), asst(call(A), call(B), content=""), tool(B), tool(A)],
        "H05",
        "error",
        2,
    ),
    (
        "H05-order-ollama",
        "ollama",
        [user(), asst(call(A), call(B), content=""), tool(B), tool(A)],
        "H05",
        "error",
        2,
    ),
    ("H06-duplicate-result", "openai", [user(), asst(call(A)), tool(A), tool(A)], "H06", "error", 3),
    (
        "H06-duplicate-in-calls",
        "mistral",
        [user(), asst(call(A), call(A)), tool(A), tool(A)],
        "H06",
        "error",
        1,
    ),
    (
        "H06-reused-across-turns",
        "openai",
        [user(), asst(call(A)), tool(A), user(), asst(call(A)), tool(A)],
        "H06",
        "error",
        5,
    ),
    (
        "H07-no-tool-call-id",
        "openai",
        [user(), asst(call()), {"role": "tool", "content": "x"}],
        "H07",
        "error",
        2,
    ),
    ("H08-null-content", "openai", [user(), asst(content=None)], "H08", "error", 1),
    ("H08-azure", "azure", [user(), asst(content=None), user()], "H08", "error", 1),
    ("H09-empty-tool-calls", "openai", [user(), {**asst(content="x"), "tool_calls": []}], "H09", "error", 1),
    (
        "H10-arguments-object",
        "openai",
        [user(), asst(call(args={"city": "Paris"})), tool()],
        "H10",
        "error",
        1,
    ),
    (
        "H11-no-type",
        "openai",
        [user(), asst({"id": A, "function": {"name": "f", "arguments": "{}"}}), tool()],
        "H11",
        "error",
        1,
    ),
    ("H11-no-function", "openai", [user(), asst({"id": A, "type": "function"}), tool()], "H11", "error", 1),
    ("H11-no-id", "mistral", [user(), asst(call(None))], "H11", "error", 1),
    ("H12-41-chars", "openai", [user(), asst(call("c" * 45)), tool("c" * 45)], "H12", "warning", 1),
    ("H12-over-64", "openai", [user(), asst(call("c" * 70)), tool("c" * 70)], "H12", "error", 1),
    ("H12-azure", "azure", [user(), asst(call("c" * 45)), tool("c" * 45)], "H12", "error", 1),
    ("H13-pattern", "openai", [user(), asst(call(name="web.search")), tool()], "H13", "error", 1),
    ("H13-too-long", "deepseek", [user(), asst(call(name="f" * 65)), tool()], "H13", "error", 1),
    ("H13-mistral", "mistral", [user(), asst(call(name="a b")), tool()], "H13", "error", 1),
    (
        "H14-description",
        "openai",
        {
            "messages": [user()],
            "tools": [{"type": "function", "function": {"name": "f", "description": LONG_DESCRIPTION}}],
        },
        "H14",
        "error",
        None,
    ),
    ("H15-129-tools", "openai", {"messages": [user()], "tools": too_many_tools()}, "H15", "error", None),
    ("H16-empty-tools", "openai", {"messages": [user()], "tools": []}, "H16", "error", None),
    ("H16-empty-tools-mistral", "mistral", {"messages": [user()], "tools": []}, "H16", "warning", None),
    ("H17-tool-choice", "openai", {"messages": [user()], "tool_choice": "auto"}, "H17", "error", None),
    ("H17-vllm", "vllm", {"messages": [user()], "tool_choice": "auto"}, "H17", "error", None),
    ("H17-parallel", "azure", {"messages": [user()], "parallel_tool_calls": False}, "H17", "error", None),
    (
        "H18-image-in-tool",
        "openai",
        [user(), asst(call()), tool(content=[{"type": "image_url", "image_url": {"url": "x"}}])],
        "H18",
        "error",
        2,
    ),
    ("H18-untyped-part", "openai", [user(), asst(call()), tool(content=[{"text": "x"}])], "H18", "error", 2),
    ("H18-object-content", "openai", [user(), asst(call()), tool(content={"temp": 18})], "H18", "error", 2),
    ("H18-null-content", "openai", [user(), asst(call()), tool(content=None)], "H18", "error", 2),
    (
        "H19-function-without-name",
        "openai",
        [user(), {"role": "function", "content": "1"}],
        "H19",
        "error",
        1,
    ),
    (
        "H19-function-call-on-user",
        "openai",
        [{**user(), "function_call": {"name": "f", "arguments": "{}"}}],
        "H19",
        "error",
        0,
    ),
    (
        "H20-name-pattern",
        "openai",
        [{"role": "user", "content": "hi", "name": "Ada Lovelace"}],
        "H20",
        "error",
        0,
    ),
    (
        "H23-no-content-key-azure",
        "azure",
        [user(), {"role": "assistant", "tool_calls": [call()]}, tool()],
        "H23",
        "error",
        1,
    ),
    (
        "H23-no-content-key-openai",
        "openai",
        [user(), {"role": "assistant", "tool_calls": [call()]}, tool()],
        "H23",
        "warning",
        1,
    ),
    (
        "H29-anthropic-id",
        "anthropic-compat",
        [user(), asst(call("functions.Bash:0")), tool("functions.Bash:0")],
        "H29",
        "error",
        1,
    ),
    (
        "H30-duplicate-tool-names",
        "anthropic-compat",
        {
            "messages": [user()],
            "tools": [{"type": "function", "function": {"name": "f"}}] * 2,
        },
        "H30",
        "error",
        None,
    ),
    ("H31-no-tools", "anthropic-compat", {"messages": [user(), asst(call()), tool()]}, "H31", "error", None),
    (
        "H32-empty-with-calls",
        "anthropic-compat",
        [user(), asst(call(), content=""), tool()],
        "H32",
        "error",
        1,
    ),
    ("H32-empty-user", "anthropic-compat", [user(""), asst(content="hi"), user()], "H32", "error", 0),
    ("H34-n", "anthropic-compat", {"messages": [user()], "n": 2}, "H34", "error", None),
    (
        "H35-mistral-id",
        "mistral",
        [user(), asst(call("call_0fypS1hVX")), tool("call_0fypS1hVX")],
        "H35",
        "error",
        1,
    ),
    ("H37-user-after-tool", "mistral", [user(), asst(call()), tool(), user()], "H37", "error", 3),
    ("H38-last-assistant", "mistral", [user(), asst(content="hi")], "H38", "error", 1),
    ("H39-neither", "mistral", [user(), asst(content=""), user()], "H39", "error", 1),
    ("H45-after-system", "gemini-compat", [SYSTEM, asst(call()), tool()], "H45", "warning", 1),
    (
        "H46-signature-lost",
        "gemini-compat",
        [
            user(),
            asst({**call(A), "extra_content": {"google": {"thought_signature": "s"}}}),
            tool(A),
            user(),
            asst(call(B)),
            tool(B),
        ],
        "H46",
        "warning",
        4,
    ),
    ("H47-gemini-name", "gemini-compat", [user(), asst(call(name="1st_tool")), tool()], "H47", "error", 1),
    (
        "H62-reasoning-lost",
        "deepseek",
        [user(), asst(call(A), reasoning_content="r"), tool(A), asst(call(B)), tool(B)],
        "H62",
        "error",
        3,
    ),
    (
        "H70-mistral-extra-field",
        "mistral",
        [user(), asst(call(), reasoning_content="r"), tool()],
        "H70",
        "error",
        1,
    ),
    (
        "H73-vllm-malformed",
        "vllm",
        [user(), asst(call(args='{"city": "Par'), content=""), tool()],
        "H73",
        "error",
        1,
    ),
    (
        "H73-ollama-not-object",
        "ollama",
        [user(), asst(call(args='"Paris"'), content=""), tool()],
        "H73",
        "error",
        1,
    ),
    ("H82-llama.cpp-null", "llama.cpp", [user(), asst(call()), tool()], "H82", "error", 1),
    ("H82-vllm-null", "vllm", [user(), asst(call()), tool()], "H82", "warning", 1),
    ("H84-ollama-null", "ollama", [user(), asst(call()), tool()], "H84", "error", 1),
    ("H90-nested-too-deep", "openai", [user(), asst(content="hi", reasoning=nested(300))], "H90", "error", 1),
    (
        "H91-not-json-schema",
        "openai",
        {"messages": [user()], "tools": [fn_tool("f", {"type": "str"})]},
        "H91",
        "error",
        None,
    ),
    (
        "H92-no-type",
        "openai",
        {"messages": [user()], "tools": [{"function": {"name": "f"}}]},
        "H92",
        "error",
        None,
    ),
    (
        "H93-unknown-tool-choice",
        "openai",
        {
            "messages": [user()],
            "tools": [fn_tool("f")],
            "tool_choice": {"type": "function", "function": {"name": "g"}},
        },
        "H93",
        "error",
        None,
    ),
]


def _problems(dialect: str, history: Any) -> list[HistoryProblem]:
    if isinstance(history, dict):
        return validate_request(history, dialect)
    return validate_history(history, dialect)


@pytest.mark.parametrize(
    ("dialect", "history", "rule", "severity", "index"),
    [c[1:] for c in INVALID],
    ids=[c[0] for c in INVALID],
)
def test_invalid_histories_report_the_rule(
    dialect: str, history: Any, rule: str, severity: str, index: int | None
) -> None:
    problems = _problems(dialect, history)
    found = [(p.rule, p.severity, p.index) for p in problems]
    assert (rule, severity, index) in found, problems
    for p in problems:  # every quoted server text appears in the message a user reads
        assert p.server_error is None or p.server_error in p.message
        assert p.severity == RULES[p.rule].severity(dialect) or p.rule == "H12"


def test_the_tables_cover_every_rule_and_every_dialect() -> None:
    assert {c[3] for c in INVALID} == set(RULES)
    assert {c[1] for c in INVALID} == set(DIALECT_NAMES)
    assert {c[1] for c in VALID} == set(DIALECT_NAMES)
    for rule in RULES.values():  # and the table itself only names known dialects
        assert (rule.errors | rule.warnings) <= set(DIALECT_NAMES)
        assert not rule.errors & rule.warnings


def test_problems_quote_the_server_text_with_the_real_ids_and_indices() -> None:
    history = [user(), asst(call(A), call(B), call("c9")), tool(B), user()]
    (problem,) = validate_history(history)
    assert problem.rule == "H03" and problem.index == 1
    assert problem.server_error == (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        f"each 'tool_call_id'. The following tool_call_ids did not have response messages: {A}, c9"
    )
    assert str(problem).startswith("#1 H03 error: no tool message answers")

    dup = validate_history([user(), asst(call(A)), tool(A), tool(A)])
    assert [p.server_error for p in dup] == [
        f"Invalid parameter: Duplicate value for 'tool_call_id' of '{A}', in messages[2] and messages[3]."
    ]
    empty = validate_history([user(), {**asst(content="x"), "tool_calls": []}])
    assert empty[0].server_error is not None and "'messages[1].tool_calls': empty array" in (
        empty[0].server_error
    )


def test_dialect_wording_is_used() -> None:
    (p,) = validate_history([user(), tool()], "deepseek")
    assert p.server_error == (
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
    )
    (p,) = [q for q in validate_history([user(), tool()], "mistral") if q.rule == "H01"]
    assert p.server_error == "Unexpected role 'tool' after role 'user'"
    (p,) = validate_history([user(), asst(call("call_0fypS1hVX")), tool("call_0fypS1hVX")], "mistral")
    assert p.server_error == (
        "Tool call id was call_0fypS1hVX but must be a-z, A-Z, 0-9, with a length of 9."
    )


def test_interleaved_message_reports_h03_h04_and_h01_like_the_server() -> None:
    problems = validate_history([user(), asst(call()), user("wait"), tool()])
    assert [(p.index, p.rule) for p in problems] == [(1, "H03"), (2, "H04"), (3, "H01")]


def test_ensure_valid_history_raises_with_every_problem() -> None:
    history = [tool("zz"), user(), asst(call(A), call(B)), tool(B), tool(A)]
    with pytest.raises(HistoryError) as info:
        ensure_valid_history(history)
    assert isinstance(info.value, ToolstitchError)
    assert {p.rule for p in info.value.problems} == {"H01", "H05"}  # the warning is listed too
    assert "#0 H01 error" in str(info.value)
    ensure_valid_history([user(), asst(call(A), call(B)), tool(B), tool(A)])  # warnings only


def test_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="known dialects: openai"):
        validate_history([user()], "openai-ish")


# -------------------------------------------------------------------------------- builders

ARGS_A = '{ "city" : "Paris",\n "unit": "C" }'  # odd spacing: must survive byte for byte


def completion(message: dict[str, Any], *, extra_choices: int = 0) -> ChatCompletion:
    choices = [
        {"index": i, "finish_reason": "tool_calls", "message": message} for i in range(1 + extra_choices)
    ]
    return ChatCompletion.model_validate(
        {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m", "choices": choices}
    )


TWO_CALLS = {
    "role": "assistant",
    "content": None,
    "refusal": None,
    "reasoning_content": "The user wants two cities.",
    "tool_calls": [
        {
            "id": "call_ZkQ1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": ARGS_A},
            "extra_content": {"google": {"thought_signature": "sig=="}},
        },
        {
            "id": "call_Rome2",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
        },
    ],
}


def test_assistant_message_from_a_chat_completion() -> None:
    msg = assistant_message(completion(TWO_CALLS))
    assert msg == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_ZkQ1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": ARGS_A},
                "extra_content": {"google": {"thought_signature": "sig=="}},
            },
            {
                "id": "call_Rome2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
            },
        ],
        "reasoning_content": "The user wants two cities.",
    }
    pydantic.TypeAdapter(ChatCompletionMessageParam).validate_python(msg)


def test_assistant_message_accepts_message_stream_and_dict() -> None:
    comp = completion(TWO_CALLS)

    class Stream:  # duck-typed like toolstitch's StitchedStream and the SDK's stream helpers
        def get_final_completion(self) -> ChatCompletion:
            return comp

    expected = assistant_message(comp)
    assert assistant_message(comp.choices[0].message) == expected
    assert assistant_message(Stream()) == expected
    assert assistant_message(comp.model_dump()) == expected
    assert assistant_message(copy.deepcopy(TWO_CALLS)) == expected


def test_assistant_message_picks_the_choice_by_index() -> None:
    comp = completion({"role": "assistant", "content": "zero"}, extra_choices=1)
    comp.choices[1].message.content = "one"
    comp.choices.reverse()  # position must not matter
    assert assistant_message(comp, choice=1)["content"] == "one"
    assert assistant_message(comp)["content"] == "zero"
    with pytest.raises(ValueError, match="no choice 5"):
        assistant_message(comp, choice=5)


def test_tool_calls_come_in_index_order_and_text_and_refusal_are_kept() -> None:
    message = {
        "role": "assistant",
        "content": "Let me check.",
        "refusal": "partly refused",
        "tool_calls": [
            {"index": 1, **call(B)},
            {"index": 0, **call(A, args=ARGS_A)},
        ],
    }
    msg = assistant_message(message)
    assert [c["id"] for c in msg["tool_calls"]] == [A, B]
    assert msg["tool_calls"][0]["function"]["arguments"] is not None
    assert msg["tool_calls"][0]["function"]["arguments"] == ARGS_A
    assert "index" not in msg["tool_calls"][0]
    assert msg["content"] == "Let me check." and msg["refusal"] == "partly refused"


def test_a_message_without_tool_calls_never_gets_null_content() -> None:
    msg = assistant_message({"role": "assistant", "content": None, "refusal": "I can't."})
    assert msg == {"role": "assistant", "content": "", "refusal": "I can't."}
    assert validate_history([user(), msg]) == []


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_builders_shape_the_turn_for_each_dialect(dialect: str) -> None:
    comp = completion(TWO_CALLS)
    d = get_dialect(dialect)
    msg = assistant_message(comp, dialect=dialect)
    calls = comp.choices[0].message.tool_calls
    assert calls is not None
    results = tool_messages([(calls[0], {"temp": 18}), (calls[1], "21C")], dialect=dialect)
    history = [user(), msg, *results, user("thanks")] if dialect != "mistral" else [user(), msg, *results]

    assert msg["content"] == d.empty_content
    assert [c["function"]["arguments"] for c in msg["tool_calls"]] == [ARGS_A, '{"city":"Rome"}']
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in msg["tool_calls"]]
    assert ("reasoning_content" in msg) == (dialect != "mistral")
    assert ("extra_content" in msg["tool_calls"][0]) == (dialect != "mistral")
    assert ("name" in results[0]) == (dialect == "gemini-compat")
    if dialect == "mistral":
        assert all(re.fullmatch(r"[a-zA-Z0-9]{9}", c["id"]) for c in msg["tool_calls"])
    assert errors(validate_history(history, dialect)) == []


def test_mistral_ids_are_rewritten_the_same_way_by_every_builder() -> None:
    comp = completion(TWO_CALLS)
    msg = assistant_message(comp, dialect="mistral")
    sdk_call = comp.choices[0].message.tool_calls[0]  # type: ignore[index]
    as_dict = TWO_CALLS["tool_calls"][0]  # type: ignore[index]
    fake = FakeCall(id="call_ZkQ1")
    expected = msg["tool_calls"][0]["id"]
    for c in (sdk_call, as_dict, fake):
        assert tool_message(c, "ok", dialect="mistral")["tool_call_id"] == expected
    assert expected != "call_ZkQ1"
    # rewriting an already rewritten id changes nothing (builders and repair can be chained)
    assert assistant_message(msg, dialect="mistral")["tool_calls"][0]["id"] == expected


def test_builders_never_mutate_their_input() -> None:
    original = copy.deepcopy(TWO_CALLS)
    data = copy.deepcopy(TWO_CALLS)
    assistant_message(data, dialect="mistral")
    assert data == original


# ---------------------------------------------------------------------------- tool_message


@dataclasses.dataclass
class FakeCall:
    """A stand-in for toolstitch.ToolCall with the attributes the builders read."""

    id: str | None = A
    name: str | None = "get_weather"
    arguments: str = '{"city":"Paris"}'
    status: str = "ready"
    error: Exception | None = None
    index: int = 0
    choice: int = 0
    parsed: Any = None
    anomalies: list[Any] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


class Weather(pydantic.BaseModel):
    city: str
    temp: float


@dataclasses.dataclass
class Reading:
    city: str
    temp: float


@pytest.mark.parametrize(
    ("result", "content"),
    [
        ("18C, sunny", "18C, sunny"),
        ("", ""),
        ({"z": 1, "a": [1, 2], "city": "Zürich"}, '{"z":1,"a":[1,2],"city":"Zürich"}'),
        ([1, "two", None], '[1,"two",null]'),
        (18.5, "18.5"),
        (None, "null"),
        (True, "true"),
        (Weather(city="Paris", temp=18), '{"city":"Paris","temp":18.0}'),
        (Reading("Rome", 21.5), '{"city":"Rome","temp":21.5}'),
    ],
)
def test_tool_message_serialises_results_deterministically(result: Any, content: str) -> None:
    assert tool_message(FakeCall(), result) == {
        "role": "tool",
        "tool_call_id": A,
        "content": content,
    }


def test_results_that_are_not_json_are_refused() -> None:
    with pytest.raises(ValueError):
        tool_message(FakeCall(), {"temp": math.nan})
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        tool_message(FakeCall(), {1, 2})


def test_a_call_that_is_not_ready_has_no_result() -> None:
    bad = FakeCall(
        status="invalid",
        arguments='{"city": "Par',
        error=MalformedArguments("arguments are not valid JSON: Unterminated string", raw="x"),
    )
    with pytest.raises(CallNotReadyError, match="call_error_text") as info:
        tool_message(bad, "18C")
    assert isinstance(info.value, ToolstitchError) and info.value.status == "invalid"

    text = call_error_text(bad)
    assert "it was not run" in text and "Unterminated string" in text and "get_weather" in text
    assert tool_message(bad, error=text)["content"] == text
    assert tool_message(bad, error=bad.error)["content"] == text  # the call's own error
    assert tool_message(bad, bad.error)["content"] == text  # an exception as the result

    cut = FakeCall(status="incomplete", error=None)
    with pytest.raises(CallNotReadyError):
        tool_message(cut, {"ok": True})
    assert "was cut off before its arguments were complete" in call_error_text(cut)
    with pytest.raises(ValueError, match="ready"):
        call_error_text(FakeCall())


def test_error_results_from_exceptions() -> None:
    assert tool_message(FakeCall(), error=TimeoutError("tool took 30s"))["content"] == (
        "Error: TimeoutError: tool took 30s"
    )
    assert tool_message(FakeCall(), KeyError())["content"] == "Error: KeyError"
    assert tool_message(FakeCall(), error="Permission denied")["content"] == "Permission denied"


def test_tool_message_argument_mistakes() -> None:
    with pytest.raises(TypeError, match="not both"):
        tool_message(FakeCall(), "x", error="y")
    with pytest.raises(TypeError, match="needs a result"):
        tool_message(FakeCall())
    with pytest.raises(ValueError, match="no id"):
        tool_message(FakeCall(id=None), "x")


def test_tool_message_accepts_sdk_tool_calls() -> None:
    sdk = ChatCompletionMessageFunctionToolCall.model_validate(call(B))
    assert tool_message(sdk, "21C") == {"role": "tool", "tool_call_id": B, "content": "21C"}
    assert tool_message(sdk, "21C", dialect="gemini-compat")["name"] == "get_weather"


def test_tool_messages_follow_index_order_and_take_exceptions() -> None:
    first, second = FakeCall(id=A, index=0), FakeCall(id=B, index=1)
    out = tool_messages([(second, RuntimeError("down")), (first, {"t": 1})])
    assert [(m["tool_call_id"], m["content"]) for m in out] == [
        (A, '{"t":1}'),
        (B, "Error: RuntimeError: down"),
    ]
    sdk_b = ChatCompletionMessageFunctionToolCall.model_validate(call(B))
    sdk_a = ChatCompletionMessageFunctionToolCall.model_validate(call(A))
    assert [m["tool_call_id"] for m in tool_messages([(sdk_b, 1), (sdk_a, 2)])] == [B, A]


# ----------------------------------------------------------------------------------- repair


def test_repair_moves_reorders_drops_and_inserts() -> None:
    history = [
        tool("zz", "stray"),  # orphan
        user(),
        asst(call(A), call(B), call("c3")),
        tool(B, "B"),
        user("wait"),  # interloper
        tool(A, "A"),
        tool(A, "A again"),  # a second result
    ]
    before = copy.deepcopy(history)
    fixed, report = repair_history(history)
    assert history == before  # never mutated
    assert fixed == [
        user(),
        asst(call(A), call(B), call("c3")),
        tool(A, "A"),
        tool(B, "B"),
        tool("c3", NOT_EXECUTED),
        user("wait"),
    ]
    actions = sorted((c.action, c.rule, c.index, c.new_index) for c in report.changes)
    assert actions == [
        ("dropped", "H01", 0, None),
        ("dropped", "H06", 6, None),
        ("inserted", "H03", None, 4),
        ("moved", "H04", 5, 2),
        ("reordered", "H05", 2, 1),
    ]
    assert report.ok and report.remaining == () and report.changed
    assert validate_history(fixed) == []


def test_repair_inserts_not_executed_for_a_trailing_call() -> None:
    fixed, report = repair_history([user(), asst(call(A))], "gemini-compat")
    assert fixed[-1] == {
        "role": "tool",
        "tool_call_id": A,
        "content": NOT_EXECUTED,
        "name": "get_weather",
    }
    assert [c.action for c in report.changes] == ["inserted"]


def test_repair_rewrites_ids_on_both_sides() -> None:
    history = [user(), asst(call("call_0fypS1hVX"), call("call_2")), tool("call_2"), tool("call_0fypS1hVX")]
    fixed, report = repair_history(history, "mistral")
    ids = [c["id"] for c in fixed[1]["tool_calls"]]
    assert all(re.fullmatch(r"[a-zA-Z0-9]{9}", i) for i in ids)
    assert [m["tool_call_id"] for m in fixed[2:]] == ids
    assert [m["content"] for m in fixed[2:]] == ["18C, sunny", "18C, sunny"]
    assert sum(c.action == "rewrote_id" for c in report.changes) == 2
    assert errors(validate_history(fixed, "mistral")) == []


def test_repair_renames_an_id_reused_in_a_later_turn() -> None:
    history = [user(), asst(call(A)), tool(A, "first"), user(), asst(call(A)), tool(A, "second")]
    fixed, report = repair_history(history)
    assert fixed[2] == tool(A, "first")
    assert (
        fixed[5]["content"] == "second" and fixed[5]["tool_call_id"] == fixed[4]["tool_calls"][0]["id"] != A
    )
    assert [c.rule for c in report.changes] == ["H06"]
    assert validate_history(fixed) == []


def test_repair_fixes_shapes_per_dialect() -> None:
    history = [user(), {"role": "assistant", "content": None, "tool_calls": [call()]}, tool()]
    assert repair_history(history, "ollama")[0][1]["content"] == ""
    assert (
        repair_history([user(), asst(call(), content=""), tool()], "anthropic-compat")[0][1]["content"]
        is None
    )
    assert (
        repair_history([user(), {"role": "assistant", "tool_calls": [call()]}, tool()], "azure")[0][1][
            "content"
        ]
        is None
    )
    fixed, _ = repair_history([user(), asst({"id": A, "function": {"name": "f", "arguments": "{}"}}), tool()])
    assert fixed[1]["tool_calls"][0]["type"] == "function"
    fixed, report = repair_history([user(), {**asst(content=None), "tool_calls": []}, user()])
    assert fixed == [user(), user()] and report.changes[0].rule == "H09"
    fixed, _ = repair_history([user(), asst(call(), reasoning_content="r"), tool()], "mistral")
    assert "reasoning_content" not in fixed[1]
    history = [user(), asst(call(A), reasoning_content="r"), tool(A), asst(call(B)), tool(B)]
    fixed, _ = repair_history(history, "deepseek")
    assert fixed[3]["reasoning_content"] == ""
    assert errors(validate_history(fixed, "deepseek")) == []


def test_repair_leaves_what_it_cannot_fix_and_says_so() -> None:
    history = [user(), asst(call(name="web.search", args={"q": 1})), tool()]
    fixed, report = repair_history(history)
    assert fixed == history
    assert {p.rule for p in report.remaining} == {"H10", "H13"}
    assert not report.ok and not report.changed
    assert "remaining: #1 H10 error" in str(report)


def test_repair_accepts_sdk_objects_and_returns_dicts() -> None:
    message = ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": None, "tool_calls": [call(A), call(B)]}
    )
    fixed, report = repair_history([user(), message, tool(B)])
    assert all(isinstance(m, dict) for m in fixed)
    assert [m.get("tool_call_id") for m in fixed[2:]] == [A, B]
    assert [(c.action, c.new_index) for c in report.changes] == [("inserted", 2)]
    assert message.tool_calls is not None and len(message.tool_calls) == 2  # untouched


# ------------------------------------------------------------------------ property tests

IDS = [A, B, "call_a", "functions.Bash:0", "c" * 50, ""]
NAMES = ["get_weather", "search", "send_mail"]
UNREPAIRABLE = {"mistral": {"H37", "H38"}}  # role order: fixing it would need invented messages


@st.composite
def arguments(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 5)) == 0:
        return ""
    value = draw(st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=3), max_size=3))
    return json.dumps(value, indent=draw(st.sampled_from([None, 1])), ensure_ascii=draw(st.booleans()))


@st.composite
def histories(draw: st.DrawFn) -> list[Msg]:
    msgs: list[Msg] = [SYSTEM] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["user", "text", "calls", "calls", "orphan"]))
        if kind == "user":
            msgs.append(user(draw(st.sampled_from(["hi", "go on", "Müller?"]))))
        elif kind == "text":
            msgs.append(asst(content=draw(st.sampled_from(["done", "", None]))))
        elif kind == "orphan":
            msgs.append(tool(draw(st.sampled_from([*IDS, None]))))
        else:
            n = draw(st.integers(0, 3))
            calls = [
                call(draw(st.sampled_from(IDS)), draw(st.sampled_from(NAMES)), draw(arguments()))
                for _ in range(n)
            ]
            for c in calls:
                if draw(st.integers(0, 6)) == 0:
                    del c["type"]
            m = asst(*calls, content=draw(st.sampled_from([None, "", "Let me look."])))
            if not calls:
                m["tool_calls"] = []
            if draw(st.integers(0, 4)) == 0:
                del m["content"]
            if draw(st.integers(0, 3)) == 0:
                m["reasoning_content"] = "thinking"
            msgs.append(m)
            ids = [c["id"] for c in calls] + draw(st.lists(st.sampled_from(IDS), max_size=2))
            answered = draw(st.permutations(ids))[: draw(st.integers(0, len(ids)))]
            results = [tool(i, f"result {k}") for k, i in enumerate(answered)]
            if results and draw(st.booleans()):
                results.insert(draw(st.integers(0, len(results))), user("meanwhile"))
            msgs.extend(results)
    if draw(st.booleans()) or not any(m["role"] == "user" for m in msgs):
        msgs.append(user("and?"))  # a request always carries something to answer
    return msgs


def all_calls(messages: list[Any]) -> list[tuple[str, str]]:
    return [
        (c["function"]["name"], c["function"]["arguments"])
        for m in messages
        if isinstance(m, dict) and m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    ]


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories())
def test_repaired_histories_validate(dialect: str, history: list[Msg]) -> None:
    before = copy.deepcopy(history)
    fixed, report = repair_history(history, dialect)
    assert history == before  # the input is never mutated

    problems = validate_history(fixed, dialect)
    assert report.remaining == tuple(problems)
    left = {p.rule for p in errors(problems)}
    assert left <= UNREPAIRABLE.get(dialect, set()), problems

    assert all_calls(fixed) == all_calls(history)  # arguments are never changed, nor calls lost
    originals = {m["content"] for m in history if m.get("role") == "tool"}
    assert all(m["content"] in originals | {NOT_EXECUTED} for m in fixed if m["role"] == "tool")

    again, second = repair_history(fixed, dialect)  # repair is idempotent
    assert again == fixed and not second.changed


def test_tool_messages_takes_executed_results_in_declared_order() -> None:
    """``ts.tool_messages(results)`` as docs/design.md shows it: results straight from ``Toolbox.execute``."""
    import toolstitch as ts
    from toolstitch.testing import chunk

    @ts.tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text.upper()

    acc = ts.Accumulator()
    for c in [
        chunk(
            delta={
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "echo", "arguments": '{"text": "b"}'},
                    }
                ]
            }
        ),
        chunk(
            delta={
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "echo", "arguments": '{"text": "a"}'},
                    }
                ]
            }
        ),
        chunk(delta={}, finish_reason="tool_calls"),
    ]:
        acc.feed(c)
    with ts.Toolbox([echo]) as box:
        results = box.execute(list(reversed(acc.tool_calls)))
    messages = ts.tool_messages(results)
    assert [(m["tool_call_id"], m["content"]) for m in messages] == [("call_a", "A"), ("call_b", "B")]
    with pytest.raises(TypeError, match="pairs or executed results"):
        ts.tool_messages([object()])


def test_executed_results_are_read_by_their_fields_not_called_back() -> None:
    """History builds a result's message from ``.call``, ``.ok`` and ``.content``: any object with
    those fields works (a ``ToolResult`` is one); nothing of the tools layer is called back."""
    from types import SimpleNamespace

    ok = SimpleNamespace(call=call(), ok=True, content='{"a":1}')
    failed = SimpleNamespace(call=call(B), ok=False, content="Error: boom")
    assert tool_messages([ok, failed]) == [
        {"role": "tool", "tool_call_id": A, "content": '{"a":1}'},
        {"role": "tool", "tool_call_id": B, "content": "Error: boom"},
    ]
    assert result_message(ok, "mistral") == tool_message(call(), '{"a":1}', dialect="mistral")
