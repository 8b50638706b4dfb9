"""A custom tool's grammar checked by the engine the API's syntax is: Rust ``regex`` (through
pydantic-core) for ``regex``, llguidance for ``lark``; the same check at the seal of both APIs and
at the gate; bounded against hostile grammars and inputs; refused when it cannot be checked, unless
the caller marked the format with ``ts.trust_grammar``. Without llguidance installed (simulated
here by hiding the module) a lark call is refused with an error that names the fix.
"""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

import pytest

import toolstitch as ts
from toolstitch.core import Accumulator, ResponseAccumulator, _schema_grammar, read_format
from toolstitch.errors import SchemaViolation
from toolstitch.testing import response_events
from toolstitch.text import _grammar_lark
from toolstitch.tools import Tool, Toolbox

# In the style of OpenAI's GPT-5 guide for custom tools with a context-free grammar.
ARITHMETIC = r"""
start: expr
expr: term (SP ADD SP term)* -> add
    | term
term: factor (SP MUL SP factor)*
factor: INT
SP: " "
ADD: "+" | "-"
MUL: "*" | "/"
%import common.INT
"""
SQL = r"""
start: "SELECT " columns " FROM " IDENT where? ";"?
columns: IDENT (", " IDENT)*
where: " WHERE " IDENT " = " (NUMBER | STRING)
IDENT: /[a-z_][a-z0-9_]*/
NUMBER: /[0-9]+/
STRING: /'[^']*'/
"""
AMBIGUOUS = 'start: x\nx: x x | "a"\n'


def lark(definition: str) -> dict[str, Any]:
    return {"type": "grammar", "syntax": "lark", "definition": definition}


def regex(definition: str) -> dict[str, Any]:
    return {"type": "grammar", "syntax": "regex", "definition": definition}


def responses_call(fmt: Any, text: str, name: str = "calc") -> ts.ToolCall:
    acc = ResponseAccumulator([{"type": "custom", "name": name, "format": fmt}])
    for event in response_events([("call_1", name, text)], custom=True):
        acc.feed(event)
    acc.end()
    (call,) = acc.tool_calls
    return call


def chat_call(fmt: Any, text: str, name: str = "calc") -> ts.ToolCall:
    """The same input as a Chat Completions custom call (issue 42's reading), cut in three."""
    tools = [{"type": "custom", "custom": {"name": name, "format": fmt}}]
    acc = Accumulator(tools=tools)
    cut = [0, len(text) // 3, 2 * len(text) // 3, len(text)]
    head = {"index": 0, "id": "c1", "type": "custom", "custom": {"name": name, "input": ""}}
    pieces = [{"index": 0, "custom": {"input": text[a:b]}} for a, b in itertools.pairwise(cut)]
    for n, delta in enumerate([head, *pieces]):
        acc.feed(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": {"tool_calls": [delta]}, "finish_reason": None}],
            }
        )
        assert n < 10
    acc.feed(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
        }
    )
    acc.end()
    (call,) = acc.tool_calls
    return call


def _echo(text: str) -> str:
    return text


def _upper(text: str) -> str:
    return text.upper()


def codes(call: ts.ToolCall) -> set[str]:
    return {a.code for a in call.anomalies}


@pytest.fixture(params=["responses", "chat"])
def sealed(request: pytest.FixtureRequest) -> Any:
    """A call sealed by either API's reader, with the tool's format."""
    return responses_call if request.param == "responses" else chat_call


# --------------------------------------------------------------------------- lark, by llguidance


@pytest.mark.parametrize(
    ("grammar", "text", "ready"),
    [
        (ARITHMETIC, "1 + 2 + 3", True),
        (ARITHMETIC, "12 * 3 - 4 / 2", True),
        (ARITHMETIC, "1 +2", False),
        (ARITHMETIC, "1 + 2 +", False),  # a prefix of a sentence is not a sentence
        (ARITHMETIC, "", False),
        (SQL, "SELECT a FROM t;", True),
        (SQL, "SELECT id, name FROM users WHERE id = 7", True),
        (SQL, "SELECT a FROM t; DROP TABLE t;", False),  # one statement, not two
        (SQL, "SELECT a FROM t WHERE a = 'x' OR 1=1;", False),
        ('start: "é" /\\p{Han}+/', "é深圳", True),  # Unicode, terminals in Rust regex syntax
        ('start: "é" /\\p{Han}+/', "é深x", False),
        ("start: /[a-z&&[^b]]+/", "ac", True),
        ("start: /[a-z&&[^b]]+/", "abc", False),
    ],
)
def test_a_lark_grammar_is_a_full_match_at_the_seal_of_both_apis(
    sealed: Any, grammar: str, text: str, ready: bool
) -> None:
    call = sealed(lark(grammar), text)
    assert call.ready is ready
    if not ready:
        assert isinstance(call.error, SchemaViolation) and "does not match its lark grammar" in str(
            call.error
        )
        assert "grammar_unchecked" not in codes(call)  # checked, and found wanting


def test_a_lark_grammar_is_compiled_once_per_definition() -> None:
    fmt = lark('start: "once" /[0-9]+/')
    first, second = read_format(fmt), read_format(dict(fmt))
    assert first._engine is not None and first._engine is second._engine
    assert first.check("t", "once12", "", []) is None and second.check("t", "once1x", "", []) is not None


def test_an_ambiguous_grammar_is_stopped_by_a_bound_not_waited_on(sealed: Any) -> None:
    # x: x x | "a" has Catalan-many parses: at llguidance's default limits 2,000 a's ran 27 s
    # before its row limit refused them. Bounded here (the time a check may take, the parser's
    # limits): the call is unchecked, and refused.
    call = sealed(lark(AMBIGUOUS), "a" * 2000)
    assert call.status == "invalid" and "grammar_unchecked" in codes(call)
    assert "could not be checked" in str(call.error)


@pytest.mark.parametrize(
    "terminal",
    [r"[01]*1[01]{30}", r"(a|b)*a(a|b){40}", r"(0|00)*(1|11)?((0|1){20}){3}"],
    ids=["exponential-dfa", "exponential-dfa-alternation", "nested-repeats"],
)
def test_a_hostile_terminal_regex_is_bounded_and_never_a_wrong_yes(terminal: str) -> None:
    # Terminals whose DFA is exponential: the lexer's bounds stop the check (unchecked, refused)
    # or it answers; where it answers it agrees with a full match (the syntaxes agree here).
    fmt = lark(f"start: T\nT: /{terminal}/\n")
    rng = random.Random(7)
    alphabet = "ab" if "a" in terminal else "01"
    for size in (40, 200, 5_000, 30_000):
        text = "".join(rng.choice(alphabet) for _ in range(size))
        call = responses_call(fmt, text)
        if "grammar_unchecked" in codes(call):
            assert call.status == "invalid"
        else:
            assert call.ready is (re.fullmatch(terminal, text) is not None), (terminal, size)


def test_an_input_that_reached_a_bound_does_not_spoil_the_next_ones() -> None:
    # llguidance's copies of a matcher share the lexer's cache: an input that fills it must not
    # leave every later input of the tool unchecked (or refused as not matching).
    fmt = lark("start: T\nT: /[01]*1[01]{30}/\n")
    rng = random.Random(3)
    hostile = responses_call(fmt, "".join(rng.choice("01") for _ in range(30_000)))
    assert hostile.status == "invalid" and "grammar_unchecked" in codes(hostile)
    assert responses_call(fmt, "1" + "0" * 30).status == "ready"
    assert responses_call(fmt, "0" * 31).status == "invalid"


def test_a_long_input_is_checked_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # What is asserted is that no parser limit stops a long, plain input; the time bound is another
    # test's (a machine busy with the rest of the suite can take longer than 0.5 s over 320 kB).
    monkeypatch.setattr(_grammar_lark, "CHECK_SECONDS", 60.0)
    fmt = lark('start: line+\nline: /[a-z ]*/ "\\n"\n')
    assert responses_call(fmt, "some words here\n" * 20_000).status == "ready"
    assert responses_call(fmt, "some words here\n" * 20_000 + "X\n").status == "invalid"


# --------------------------------------------------------------------------- without llguidance


def test_without_llguidance_a_lark_call_is_refused_with_the_fix(
    sealed: Any, without_llguidance: None
) -> None:
    call = sealed(lark(ARITHMETIC), "1 + 2")
    assert call.status == "invalid" and isinstance(call.error, SchemaViolation)
    assert "pip install 'toolstitch[grammars]'" in str(call.error)
    assert "trust_grammar" in str(call.error)
    assert "grammar_unchecked" in codes(call)


def test_without_llguidance_a_lark_tool_is_refused_when_defined(without_llguidance: None) -> None:
    with pytest.raises(ValueError, match=r"calc: .*pip install 'toolstitch\[grammars\]'"):
        Tool.from_custom(_echo, name="calc", format=lark(ARITHMETIC))


def test_without_llguidance_a_trusted_lark_format_runs_unchecked(
    sealed: Any, without_llguidance: None
) -> None:
    fmt = ts.trust_grammar(lark(ARITHMETIC))
    call = sealed(fmt, "anything at all")
    assert call.status == "ready" and "grammar_unchecked" in codes(call)
    (note,) = [a for a in call.anomalies if a.code == "grammar_unchecked"]
    assert "trusted" in note.message and "llguidance" in note.message
    calc = Tool.from_custom(_upper, name="calc", format=fmt)
    (result,) = Toolbox([calc]).execute([call])
    assert result.ok and result.content == "ANYTHING AT ALL"


def test_without_llguidance_regex_grammars_are_still_checked(without_llguidance: None) -> None:
    assert responses_call(regex(r"\p{Han}+"), "深圳").status == "ready"
    assert responses_call(regex(r"\p{Han}+"), "x").status == "invalid"


# --------------------------------------------------------------------------- the trusted switch


def test_a_trusted_format_still_refuses_an_input_that_was_checked_and_does_not_fit(sealed: Any) -> None:
    call = sealed(ts.trust_grammar(lark(SQL)), "SELECT a FROM t; DROP TABLE t;")
    assert call.status == "invalid" and "does not match its lark grammar" in str(call.error)


def test_a_trusted_format_lets_an_input_over_a_bound_through_with_the_anomaly() -> None:
    call = responses_call(ts.trust_grammar(lark(AMBIGUOUS)), "a" * 2000)
    assert call.status == "ready" and "grammar_unchecked" in codes(call)


def test_a_trusted_format_is_the_format_as_sent() -> None:
    fmt = lark(SQL)
    trusted = ts.trust_grammar(fmt)
    assert trusted == fmt and trusted is not fmt and isinstance(trusted, dict)
    assert read_format(trusted).trusted and not read_format(fmt).trusted
    with pytest.raises(TypeError):
        ts.trust_grammar("lark")  # type: ignore[arg-type]


def test_a_tool_keeps_its_formats_mark_in_the_definition_it_sends() -> None:
    calc = Tool.from_custom(_echo, name="calc", format=ts.trust_grammar(lark(SQL)))
    sent = Toolbox([calc]).definitions()[0]["custom"]["format"]
    assert isinstance(sent, ts.core.TrustedGrammar) and sent == lark(SQL)


# --------------------------------------------------------------------------- regex, by the regex crate


def test_a_long_input_against_a_large_pattern_is_unchecked_not_waited_on(sealed: Any) -> None:
    # \w is a large Unicode class: the pattern's compiled size bounds the input a check may read.
    assert sealed(regex(r"\w+"), "a" * 5_000).status == "ready"
    call = sealed(regex(r"\w+"), "a" * 2_000_000)
    assert call.status == "invalid" and "grammar_unchecked" in codes(call)
    assert "too long to be checked" in str(call.error)
    assert sealed(ts.trust_grammar(regex(r"\w+")), "a" * 2_000_000).status == "ready"


def test_a_small_pattern_checks_a_long_input() -> None:
    assert responses_call(regex(r"[a-z ]+"), "lorem ipsum " * 100_000).status == "ready"


def test_the_pattern_worst_for_the_engine_is_bounded() -> None:
    # [01]*1[01]{n} defeats the lazy DFA (2^n states): the crate falls back to a simulation whose
    # cost per byte is the pattern's size. The largest such pattern checks only a short input.
    pattern = r"[01]*1[01]{100000}"
    call = responses_call(regex(pattern), "01" * 60_000)
    assert call.status == "invalid" and "too long to be checked" in str(call.error)


def test_a_lone_surrogate_never_matches() -> None:
    fmt = read_format(regex(r"(?s).*"))
    assert fmt.check("t", "a\ud800", "", []) is not None
    fmt = read_format(lark("start: /(?s:.*)/"))
    assert fmt.check("t", "a\ud800", "", []) is not None


# --------------------------------------------------------------------------- pins (docs/sdk-internals.md)


def test_pin_pydantic_core_runs_the_regex_crate() -> None:
    from pydantic_core import SchemaError, SchemaValidator, core_schema

    def compiled(pattern: str) -> SchemaValidator:
        return SchemaValidator(core_schema.str_schema(pattern=pattern, regex_engine="rust-regex"))

    for refused in (r"(?=a)a", r"(a)\1", r"(?:a{1000}){1000}"):
        with pytest.raises(SchemaError):
            compiled(refused)
    assert compiled(r"b").isinstance_python("abc")  # a search: toolstitch anchors it
    assert compiled(r"\A(?:[[:alpha:]]+)\z").isinstance_python("abc")


def test_pin_llguidance_names_a_misfit() -> None:
    engine = _grammar_lark._engine()
    assert engine is not None
    llguidance, tokenizer, limits = engine
    grammar = llguidance.LLMatcher.grammar_from_lark('start: "a"')
    matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0, limits=limits)
    assert not matcher.consume_tokens([ord("b")])
    assert _grammar_lark._refused(matcher.get_error()) is False


def test_an_llguidance_that_does_not_load_leaves_lark_calls_unchecked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> None:
        raise OSError("undefined symbol: llg_new_matcher")

    monkeypatch.setattr(_grammar_lark, "_engine", broken)
    _schema_grammar.compiled_grammar.cache_clear()
    try:
        call = responses_call(lark(ARITHMETIC), "1 + 2")
        assert call.status == "invalid" and "llguidance could not be loaded (OSError" in str(call.error)
    finally:
        monkeypatch.undo()
        _schema_grammar.compiled_grammar.cache_clear()


@pytest.mark.parametrize("syntax", ["regex", "lark"])
def test_a_grammar_holding_a_lone_surrogate_does_not_compile(syntax: str) -> None:
    definition = "a\ud800" if syntax == "regex" else 'start: "a\ud800"'
    fmt = {"type": "grammar", "syntax": syntax, "definition": definition}
    assert "lone surrogate" in str(read_format(fmt).problem)
    call = responses_call(fmt, "a\ufffd")
    assert call.status == "invalid" and "grammar_unchecked" in codes(call)
    with pytest.raises(ValueError, match=r"calc: .*lone surrogate"):
        Tool.from_custom(_echo, name="calc", format=fmt)
