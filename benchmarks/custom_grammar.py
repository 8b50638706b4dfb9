"""What checking a custom tool's grammar costs, per call and per stream, measured in one run.

Run: ``.venv/bin/python benchmarks/custom_grammar.py`` (``--repeat N`` for more samples).

A custom tool's input is checked at seal (and again at the gate) against its ``format``: a regex
grammar by the Rust ``regex`` crate (through pydantic-core), a lark grammar by llguidance
(``core/_schema_grammar.py``). This prints, in one run:

* per call, for benign grammars and inputs of the sizes custom tools see: the median time of one
  check, and for regex ``re.fullmatch`` beside it (a backtracking engine with other semantics: a
  yardstick, not a rival);
* per stream: a Responses stream carrying one custom call, read through ``ResponseAccumulator``
  with the tool's format ``text`` and with the grammar, so the check's share of a stream shows;
* the first use of a grammar (compiled once per definition, then cached);
* the bounds: hostile patterns and grammars, and the worst a check can take (a regex input at the
  edge of its size class on the pattern worst for the engine; a lark check stopped by its time
  bound).
"""

from __future__ import annotations

import argparse
import functools
import random
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

from toolstitch.core import ResponseAccumulator, read_format
from toolstitch.core._schema_grammar import compiled_grammar
from toolstitch.testing import response_events
from toolstitch.text._grammar_lark import CHECK_SECONDS
from toolstitch.text._grammar_regex import BASE_INPUT_BYTES

ARITHMETIC = """start: expr
expr: term (SP OP SP term)*
term: NUMBER
SP: " "
OP: "+" | "-" | "*" | "/"
NUMBER: /[0-9]+/
"""
SQL_LARK = """start: "SELECT " cols " FROM " IDENT where? ";"
cols: IDENT (", " IDENT)*
where: " WHERE " IDENT " = " NUMBER
IDENT: /[a-z_]+/
NUMBER: /[0-9]+/
"""
LINES = 'start: line+\nline: /[a-z ]*/ "\\n"\n'

REGEX = [
    (
        "a SQL SELECT",
        r"SELECT [a-z_, ]+ FROM [a-z_]+( WHERE [a-z_]+ = \d+)?;",
        "SELECT id, name FROM users WHERE id = 7;",
    ),
    ("a date", r"\d{4}-\d{2}-\d{2}", "2026-12-01"),
    ("a 1 kB patch line set", r"(?:[+ -][^\n]*\n)*", "+ added line of code here\n" * 40),
    ("10 kB of words", r"[a-z ]*", "lorem ipsum " * 850),
    ("Han characters (Rust only)", r"\p{Han}+", "深圳" * 20),
]
LARK = [
    ("arithmetic", ARITHMETIC, "12 + 7 * 3 - 4 / 2"),
    ("one SQL statement", SQL_LARK, "SELECT id, name FROM users WHERE id = 7;"),
    ("10 kB of lines", LINES, "lorem ipsum dolor\n" * 570),
]
HOSTILE_REGEX = [
    ("(a+)+$ on 5,000 a's and !", r"(a+)+$", "a" * 5000 + "!"),
    ("(a|aa)*c on 5,000 a's", r"(a|aa)*c", "a" * 5000),
    ("(\\w+\\s?)*$ on 5,000 a's and !", r"(\w+\s?)*$", "a" * 5000 + "!"),
]


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def fmt(syntax: str, definition: str) -> dict[str, Any]:
    return {"type": "grammar", "syntax": syntax, "definition": definition}


def checker(syntax: str, definition: str) -> Callable[[str], object]:
    f = read_format(fmt(syntax, definition))
    return lambda text: f.check("tool", text, "", [])


def stream_seconds(format_: Any, text: str, repeat: int) -> float:
    events = response_events([("call_1", "tool", text)], custom=True)
    tools = [{"type": "custom", "name": "tool", "format": format_}]
    read_format(format_)  # compiled before the clock starts: the per-stream cost, not the first use

    def one() -> None:
        acc = ResponseAccumulator(tools)
        for event in events:
            acc.feed(event)
        acc.end()
        assert acc.tool_calls[0].status == "ready"

    return median_seconds(one, repeat)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21, help="samples per row (the median is shown)")
    args = parser.parse_args()
    n = args.repeat
    print(
        f"median of {n} samples per row; command: .venv/bin/python benchmarks/custom_grammar.py --repeat {n}"
    )

    print("\nper call: one check of an input (the grammar already compiled)")
    print(f"{'case':38} {'check':>12} {'re.fullmatch':>14}")
    for name, definition, text in REGEX:
        check = checker("regex", definition)
        assert check(text) is None, name
        ours = median_seconds(functools.partial(check, text), n)
        try:
            plain = re.compile(definition)
            yard = us(median_seconds(functools.partial(plain.fullmatch, text), n))
        except re.error:
            yard = "(no re syntax)"
        print(f"{'regex: ' + name:38} {us(ours):>12} {yard:>14}")
    for name, definition, text in LARK:
        check = checker("lark", definition)
        assert check(text) is None, name
        print(f"{'lark: ' + name:38} {us(median_seconds(functools.partial(check, text), n)):>12} {'-':>14}")

    print("\nper stream: a Responses stream with one custom call, read and sealed (format text = 1.00x)")
    print(f"{'case':38} {'text':>12} {'grammar':>12} {'ratio':>7}")
    for syntax, name, definition, text in [
        ("regex", "a SQL SELECT", REGEX[0][1], REGEX[0][2]),
        ("regex", "10 kB of words", REGEX[3][1], REGEX[3][2]),
        ("lark", "one SQL statement", SQL_LARK, LARK[1][2]),
        ("lark", "10 kB of lines", LINES, LARK[2][2]),
    ]:
        plain = stream_seconds({"type": "text"}, text, n)
        ours = stream_seconds(fmt(syntax, definition), text, n)
        print(f"{syntax + ': ' + name:38} {us(plain):>12} {us(ours):>12} {ours / plain:>6.2f}x")

    print("\nfirst use: compiling a grammar never seen (once per definition, then cached)")
    for syntax, name, definition in [
        ("regex", "a SQL SELECT", REGEX[0][1]),
        ("regex", "Han characters", REGEX[4][1]),
        ("lark", "arithmetic", ARITHMETIC),
        ("lark", "one SQL statement", SQL_LARK),
    ]:
        fresh = iter(range(1_000_000))

        def compile_once(s: str = syntax, d: str = definition, unique: Any = fresh) -> None:
            # a definition never seen (the engines keep their own caches too): the first use
            n = next(unique)
            read_format(fmt(s, f"{d}|zq{n}zq" if s == "regex" else f"{d}\n// {n}\n"))

        print(f"{syntax + ': ' + name:38} {us(median_seconds(compile_once, n)):>12}")

    print("\nbounds: hostile grammars and inputs (never longer than about half a second)")
    few = max(1, n // 7)
    for name, definition, text in HOSTILE_REGEX:
        check = checker("regex", definition)
        print(f"{'regex: ' + name:52} {ms(median_seconds(functools.partial(check, text), few)):>10}")
    rng = random.Random(1)
    for k in (16, 256, 4096):
        # the pattern worst for the engine that still fits k copies under its size cap, on an input
        # at the edge of that class: the longest a regex check can take
        lo, hi = 1, 20_000
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                compiled = compiled_grammar("regex", f"(?:[01]*1[01]{{{mid}}}){{{k}}}")
            except Exception:
                compiled = "error"
            if isinstance(compiled, str):
                hi = mid
            else:
                lo = mid
        definition = f"[01]*1[01]{{{lo}}}"
        text = "".join(rng.choice("01") for _ in range(BASE_INPUT_BYTES * k))
        check = checker("regex", definition)
        check(text)  # the size probe, once per pattern and class, outside the clock
        label = f"regex: [01]*1[01]{{{lo}}}, {len(text):,} B (class {k})"
        print(f"{label:52} {ms(median_seconds(functools.partial(check, text), few)):>10}")
    ambiguous = checker("lark", 'start: x\nx: x x | "a"\n')
    label = f'lark: x: x x | "a" on 2,000 a\'s (bound {CHECK_SECONDS} s)'
    print(f"{label:52} {ms(median_seconds(lambda: ambiguous('a' * 2000), few)):>10}")
    terminal = checker("lark", "start: T\nT: /[01]*1[01]{30}/\n")
    noise = "".join(rng.choice("01") for _ in range(30_000))
    label = "lark: T: /[01]*1[01]{30}/ on 30 kB (lexer bound)"
    print(f"{label:52} {ms(median_seconds(lambda: terminal(noise), few)):>10}")


if __name__ == "__main__":
    main()
