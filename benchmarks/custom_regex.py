"""What checking a custom tool's regex grammar costs: toolstitch's NFA against ``re.fullmatch``,
measured in one run.

Run: ``.venv/bin/python benchmarks/custom_regex.py`` (``--repeat N`` for more samples).

A custom tool's ``regex`` grammar is checked at seal as a full match. ``re.fullmatch`` backtracks,
so a hostile pattern can take exponential time; toolstitch runs the pattern ``re`` parsed as an NFA
(``core/_schema_grammar.py``), linear in the input and bounded by ``MAX_STEPS``. This prints, for
benign patterns and inputs of the sizes custom tools see, the median time of one check each way and
the ratio NFA / ``re`` (the price of never hanging); then the hostile rows, where ``re.fullmatch``
is not run at all (it backtracks exponentially on them: it would not finish) and only the NFA's time
is shown, and the step bound's own worst case (a check refused as unchecked when it reaches
``MAX_STEPS``: the longest a check can take).
"""

from __future__ import annotations

import argparse
import functools
import re
import statistics
import time
from collections.abc import Callable

from toolstitch.core import read_format

BENIGN = [
    (
        "a SQL SELECT",
        r"SELECT [a-z_, ]+ FROM [a-z_]+( WHERE [a-z_]+ = \d+)?;",
        "SELECT id, name FROM users WHERE id = 7;",
    ),
    ("a date", r"\d{4}-\d{2}-\d{2}", "2026-12-01"),
    ("a 1 kB patch line set", r"(?:[+ -][^\n]*\n)*", "+ added line of code here\n" * 40),
    ("10 kB of words", r"[a-z ]*", "lorem ipsum " * 850),
]
HOSTILE = [
    ("(a+)+$ on 5,000 a's and !", r"(a+)+$", "a" * 5000 + "!"),
    ("(a|aa)*c on 5,000 a's", r"(a|aa)*c", "a" * 5000),
    ("(\\w+\\s?)*$ on 5,000 a's and !", r"(\w+\s?)*$", "a" * 5000 + "!"),
]
BOUND = ("MAX_STEPS reached", r"(?:a?){1500}a{0,1500}", "a" * 1000)


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def nfa(definition: str) -> Callable[[str], object]:
    fmt = read_format({"type": "grammar", "syntax": "regex", "definition": definition})
    return lambda text: fmt.check("tool", text, "", [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21, help="samples per row (the median is shown)")
    args = parser.parse_args()
    print(f"median of {args.repeat} checks each; command: .venv/bin/python benchmarks/custom_regex.py")
    print(f"{'case':34} {'re.fullmatch':>13} {'NFA':>11} {'NFA / re':>9}")
    for name, definition, text in BENIGN:
        check = nfa(definition)
        assert check(text) is None, name
        pattern = re.compile(definition)
        plain = median_seconds(functools.partial(pattern.fullmatch, text), args.repeat)
        ours = median_seconds(functools.partial(check, text), args.repeat)
        print(f"{name:34} {plain * 1e6:>10.1f} µs {ours * 1e6:>8.1f} µs {ours / plain:>8.0f}×")
    for name, definition, text in [*HOSTILE, BOUND]:
        check = nfa(definition)
        ours = median_seconds(functools.partial(check, text), max(1, args.repeat // 7))
        print(f"{name:34} {'(not run)':>13} {ours * 1e3:>8.1f} ms {'-':>9}")


if __name__ == "__main__":
    main()
