"""The check a custom tool's input meets at seal: the tool's ``format``, read once per tool.

A Responses (or Chat Completions) ``custom`` tool takes free text, not JSON: ``{"type": "custom",
"name": ..., "format": {"type": "text"} | {"type": "grammar", "syntax": "regex" | "lark",
"definition": ...}}``. What toolstitch holds a custom call's input to, before it may be ``ready``:

* ``text`` (or no ``format``): any valid Unicode (a lone surrogate was refused by the strict parse).
* ``regex``: the whole input must match the pattern (a full match, as ``re.fullmatch``). OpenAI
  reads the pattern as Rust's ``regex`` crate does: no backtracking, so no pattern is slow there.
  Python's ``re`` backtracks, and a pattern such as ``(a+)+$`` takes exponential time on it: a
  hostile (or careless) pattern must not hang the user's loop. So the pattern is *parsed* by
  ``re``'s own parser and *run* here as a Thompson NFA (every state at once, one pass over the
  input): linear in the input, whatever the pattern. Each single character test and each anchor
  (``^``, ``$``, ``\\b`` ...) is one ``re`` pattern of its own, compiled from the parsed atom with
  the flags in force there, so ``re`` decides what a class, a case-folded letter or a boundary
  matches. The work is bounded (:data:`MAX_PATTERN`, :data:`MAX_PROGRAM`, :data:`MAX_STEPS`).
  A pattern that cannot be checked (``re`` cannot compile it, or it uses what a full match cannot
  be decided by without backtracking or that Rust's syntax reads otherwise: backreferences,
  lookaround, conditionals, possessive or atomic groups, set operations such as ``[a-z&&[^b]]``,
  or it is over a bound) leaves the call *unchecked*, and an unchecked call is refused (fail
  closed, rule 9 of docs/design.md): the request promised the input matches, and nobody knows.
* ``lark``: toolstitch has no Lark parser (and takes no dependency for one): the input is *not*
  checked, and the call carries the anomaly ``grammar_unchecked`` so that a caller who must know
  can refuse it (OpenAI constrains the model's sampling to the grammar itself).
* any other ``format`` (an unknown type or syntax, a definition that is not text): unchecked,
  refused.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Mapping
from typing import Any

from ..errors import SchemaViolation, ToolCallError
from ._anomaly import Anomaly, AnomalyCode

__all__ = ["MAX_PATTERN", "MAX_PROGRAM", "MAX_STATES", "MAX_STEPS", "InputFormat", "read_format"]

MAX_PATTERN = 20_000
"""Characters of a regex ``definition`` beyond which it is not checked (the call is refused)."""
MAX_PROGRAM = 20_000
"""NFA instructions a pattern may become (``a{1000}{1000}`` would be a million): beyond, unchecked."""
MAX_STEPS = 2_000_000
"""NFA steps (states visited and characters tested, summed over the input, a remembered step
excluded) one check may take: a bound on its time, whatever the pattern and the input; beyond,
unchecked."""
MAX_STATES = 20_000
"""Sets of NFA states one check may remember (the DFA it builds as it reads): a bound on its
memory; beyond, unchecked."""

try:  # Python 3.11 and newer
    from re import _compiler as _sre_compile  # type: ignore[attr-defined]
    from re import _constants as _sre_constants  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_compile as _sre_compile
    import sre_constants as _sre_constants
    import sre_parse as _sre_parse

_MAXREPEAT = int(_sre_constants.MAXREPEAT)
_ATOMS = frozenset({"LITERAL", "NOT_LITERAL", "ANY", "IN"})
_UNSUPPORTED = {
    "GROUPREF": "a backreference",
    "GROUPREF_EXISTS": "a conditional group",
    "ASSERT": "a lookaround",
    "ASSERT_NOT": "a lookaround",
    "POSSESSIVE_REPEAT": "a possessive repeat",
    "ATOMIC_GROUP": "an atomic group",
}

# Instructions of the NFA program (parallel lists: opcode, argument, next, alternative).
_CHAR, _SPLIT, _JMP, _ASSERT, _MATCH = range(5)


class _Unchecked(Exception):
    """The pattern cannot be checked here (the message says why)."""


class _Program:
    """A pattern compiled to a Thompson NFA: each instruction's opcode, test and successors."""

    __slots__ = ("alt", "anchors", "arg", "nxt", "op", "tests")

    def __init__(self) -> None:
        self.op: list[int] = []
        self.arg: list[int] = []
        self.nxt: list[int] = []
        self.alt: list[int] = []
        self.tests: list[Any] = []
        """Compiled one-atom ``re`` patterns, by test index."""
        self.anchors: list[int] = []
        """The test indices of the anchors (``^``, ``$``, ``\\b`` ...), each once."""

    def emit(self, op: int, arg: int = -1, nxt: int = -1, alt: int = -1) -> int:
        if len(self.op) >= MAX_PROGRAM:
            raise _Unchecked(f"the pattern is larger than {MAX_PROGRAM} NFA states")
        self.op.append(op)
        self.arg.append(arg)
        self.nxt.append(nxt)
        self.alt.append(alt)
        return len(self.op) - 1


def _name(op: Any) -> str:
    return str(getattr(op, "name", op))


class _Builder:
    """Compiles ``re``'s parse tree into a :class:`_Program`; each fragment is ``(start, holes)``,
    the holes being the instructions whose ``nxt`` is still to be patched."""

    def __init__(self, program: _Program) -> None:
        self.p = program
        self.cache: dict[tuple[str, int], int] = {}

    def test(self, item: tuple[Any, Any], flags: int) -> int:
        key = (repr(item), flags)
        found = self.cache.get(key)
        if found is not None:
            return found
        state = _sre_parse.State()
        state.flags = flags
        compiled = _sre_compile.compile(_sre_parse.SubPattern(state, [item]), 0)
        self.p.tests.append(compiled)
        index = self.cache[key] = len(self.p.tests) - 1
        return index

    def seq(self, items: Any, flags: int) -> tuple[int, list[int]]:
        """A sequence: ``(start, holes)``; an empty one is a jump."""
        start: int | None = None
        holes: list[int] = []
        for item in items:
            s, h = self.item(item, flags)
            if start is None:
                start = s
            else:
                self.patch(holes, s)
            holes = h
        if start is None:
            j = self.p.emit(_JMP)
            return j, [j]
        return start, holes

    def patch(self, holes: list[int], target: int) -> None:
        nxt = self.p.nxt
        for h in holes:
            nxt[h] = target

    def item(self, item: tuple[Any, Any], flags: int) -> tuple[int, list[int]]:
        op, av = item
        name = _name(op)
        p = self.p
        if name in _ATOMS:
            i = p.emit(_CHAR, self.test(item, flags))
            return i, [i]
        if name == "AT":
            test = self.test(item, flags)
            if test not in p.anchors:
                p.anchors.append(test)
            i = p.emit(_ASSERT, test)
            return i, [i]
        if name == "BRANCH":
            branches = av[1]
            starts: list[int] = []
            holes: list[int] = []
            for branch in branches:
                s, h = self.seq(branch, flags)
                starts.append(s)
                holes.extend(h)
            # a chain of splits, one per alternative but the last
            first = starts[-1]
            for s in reversed(starts[:-1]):
                first = p.emit(_SPLIT, -1, s, first)
            return first, holes
        if name == "SUBPATTERN":
            add, remove = (av[1], av[2]) if len(av) == 4 else (0, 0)
            return self.seq(av[-1], (flags | add) & ~remove)
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            low, high, body = av
            return self.repeat(int(low), int(high), body, flags)
        if name in _UNSUPPORTED:
            raise _Unchecked(f"the pattern holds {_UNSUPPORTED[name]}, which a full match cannot decide here")
        raise _Unchecked(f"the pattern holds {name}, which toolstitch does not run")

    def repeat(self, low: int, high: int, body: Any, flags: int) -> tuple[int, list[int]]:
        """``body{low,high}``: ``low`` copies, then a loop (no upper bound) or ``high - low``
        nested optional copies, each of which may skip to the end."""
        p = self.p
        start: int | None = None
        holes: list[int] = []

        def join(s: int, h: list[int]) -> None:
            nonlocal start, holes
            if start is None:
                start = s
            else:
                self.patch(holes, s)
            holes = h

        for _ in range(low):
            join(*self.seq(body, flags))
        if high == _MAXREPEAT:
            s, h = self.seq(body, flags)
            split = p.emit(_SPLIT, -1, s, -1)  # into the body (which leads back here) or on
            self.patch(h, split)
            end = p.emit(_JMP)
            p.alt[split] = end
            join(split, [end])
        elif high > low:
            optional: list[int] = []
            for _ in range(high - low):
                s, h = self.seq(body, flags)
                split = p.emit(_SPLIT, -1, s, -1)
                optional.append(split)
                join(split, h)
            end = p.emit(_JMP)
            self.patch(holes, end)
            for split in optional:
                p.alt[split] = end
            holes = [end]
        if start is None:
            j = p.emit(_JMP)
            return j, [j]
        return start, holes


def _compile(pattern: str) -> _Program:
    if len(pattern) > MAX_PATTERN:
        raise _Unchecked(f"the pattern is longer than {MAX_PATTERN} characters")
    with warnings.catch_warnings():
        # ``re`` warns of what it reads otherwise than other engines (``[[``, ``&&``, ``--``, ``~~``
        # in a class: Rust's set operations): such a pattern means something else to the server.
        warnings.simplefilter("error")
        try:
            re.compile(pattern)
            tree = _sre_parse.parse(pattern, 0)
        except (re.error, Warning, RecursionError, OverflowError, ValueError) as exc:
            raise _Unchecked(f"the pattern does not compile: {exc}") from None
    program = _Program()
    builder = _Builder(program)
    start, holes = builder.seq(tree.data, tree.state.flags)
    done = program.emit(_MATCH)
    builder.patch(holes, done)
    program.arg.append(start)  # the entry, kept as the last argument
    return program


def _full_match(program: _Program, text: str) -> bool:
    """Does the NFA match the whole of ``text``? Every state is followed at once (linear in the
    text), and each set of states met is remembered with where each character leads from it (a
    DFA built as the input needs it), so a long input costs about one dictionary lookup per
    character. The anchors' verdicts at a position are part of what a step depends on. Raises
    :class:`_Unchecked` past :data:`MAX_STEPS` (work done, cache hits excluded) or
    :data:`MAX_STATES` sets of states."""
    op, arg, nxt, alt, tests = program.op, program.arg, program.nxt, program.alt, program.tests
    anchors = program.anchors
    slot = {test: k for k, test in enumerate(anchors)}
    steps = 0
    ids: dict[frozenset[int], int] = {}
    accepting: list[bool] = []
    consuming: list[tuple[int, ...]] = []
    moves: dict[tuple[int, str, tuple[bool, ...]], int] = {}
    verdicts: dict[tuple[int, str], bool] = {}

    def context(pos: int) -> tuple[bool, ...]:
        return tuple(tests[t].match(text, pos) is not None for t in anchors)  # read in the whole text

    def closure(starts: list[int], ctx: tuple[bool, ...]) -> int:
        """The id of the set of states ``starts`` lead to without reading a character (-1: none)."""
        nonlocal steps
        seen: set[int] = set()
        stack = list(reversed(starts))
        while stack:
            pc = stack.pop()
            if pc in seen or pc < 0:
                continue
            seen.add(pc)
            steps += 1
            code = op[pc]
            if code == _JMP:
                stack.append(nxt[pc])
            elif code == _SPLIT:
                stack.append(alt[pc])
                stack.append(nxt[pc])
            elif code == _ASSERT and ctx[slot[arg[pc]]]:
                stack.append(nxt[pc])
        if steps > MAX_STEPS:
            raise _Unchecked(f"checking the input took more than {MAX_STEPS} steps")
        kept = frozenset(pc for pc in seen if op[pc] in (_CHAR, _MATCH))
        if not kept:
            return -1
        found = ids.get(kept)
        if found is None:
            if len(accepting) >= MAX_STATES:
                raise _Unchecked(f"checking the input needed more than {MAX_STATES} sets of states")
            found = ids[kept] = len(accepting)
            accepting.append(any(op[pc] == _MATCH for pc in kept))
            consuming.append(tuple(sorted(pc for pc in kept if op[pc] == _CHAR)))
        return found

    state = closure([arg[-1]], context(0) if anchors else ())
    for pos, ch in enumerate(text):
        if state < 0:
            return False
        ctx = context(pos + 1) if anchors else ()
        key = (state, ch, ctx)
        after = moves.get(key)
        if after is None:
            moved: list[int] = []
            for pc in consuming[state]:
                test = (arg[pc], ch)
                ok = verdicts.get(test)
                if ok is None:
                    ok = verdicts[test] = tests[arg[pc]].fullmatch(ch) is not None
                if ok:
                    moved.append(nxt[pc])
            steps += len(consuming[state])
            after = moves[key] = closure(moved, ctx) if moved else -1
        state = after
    return state >= 0 and accepting[state]


class InputFormat:
    """A custom tool's ``format``, read once: what :meth:`check` holds an input to."""

    __slots__ = ("_problem", "_program", "kind", "syntax")

    def __init__(self, kind: str, syntax: str | None, program: _Program | None, problem: str | None) -> None:
        self.kind = kind
        """``"text"`` or ``"grammar"`` (``"unreadable"`` for a format toolstitch cannot read)."""
        self.syntax = syntax
        """``"regex"`` or ``"lark"`` for a grammar, else None."""
        self._program = program
        self._problem = problem

    @property
    def problem(self) -> str | None:
        """Why inputs cannot be checked against this format (it is unreadable, or a regex that
        cannot be run here), else None: every call of such a tool is refused."""
        if self.kind == "unreadable":
            return self._problem or "the format cannot be read"
        return self._problem

    def check(self, name: str, text: str, raw: str, notes: list[Anomaly]) -> ToolCallError | None:
        """None when ``text`` may be the input of tool ``name``, else the error to refuse it with.
        Never raises; an input that cannot be checked is refused (the module says why)."""
        if self.kind == "text":
            return None
        if self.syntax == "lark":
            notes.append(
                Anomaly(
                    AnomalyCode.GRAMMAR_UNCHECKED,
                    f"the input of {name!r} was not checked against its lark grammar (toolstitch "
                    "checks regex grammars only)",
                )
            )
            return None
        problem = self._problem
        if problem is None and self._program is not None:
            try:
                if _full_match(self._program, text):
                    return None
                return SchemaViolation(
                    f"the input of {name!r} does not match its regex grammar",
                    raw=raw,
                    errors=["(input): does not match the regex grammar of the tool"],
                )
            except _Unchecked as exc:
                problem = str(exc)
            except Exception as exc:  # fail closed: a check that failed is not a yes
                problem = f"the check failed ({type(exc).__name__})"
        why = problem or "the format cannot be read"
        notes.append(
            Anomaly(AnomalyCode.GRAMMAR_UNCHECKED, f"the input of {name!r} could not be checked: {why}")
        )
        return SchemaViolation(
            f"the input of {name!r} could not be checked against its format ({why}), so it is refused",
            raw=raw,
            errors=[f"(grammar): {why}"],
        )


_TEXT = InputFormat("text", None, None, None)


def read_format(value: Any) -> InputFormat:
    """A custom tool's ``format`` (a dict or an SDK model; None: text), read once. Never raises."""
    if value is None:
        return _TEXT
    if not isinstance(value, Mapping):
        dump = getattr(value, "model_dump", None)
        try:
            value = dump() if callable(dump) else None
        except Exception:
            value = None
        if not isinstance(value, Mapping):
            return InputFormat("unreadable", None, None, "the format is not an object")
    kind = value.get("type")
    if kind == "text":
        return _TEXT
    if kind != "grammar":
        return InputFormat("unreadable", None, None, f"the format type {str(kind)[:40]!r} is unknown")
    syntax = value.get("syntax")
    definition = value.get("definition")
    if syntax not in ("regex", "lark"):
        return InputFormat("unreadable", None, None, f"the grammar syntax {str(syntax)[:40]!r} is unknown")
    if not isinstance(definition, str):
        return InputFormat("unreadable", syntax, None, "the grammar's definition is not text")
    if syntax == "lark":
        return InputFormat("grammar", "lark", None, None)
    return _regex_format(definition)


@functools.lru_cache(maxsize=128)
def _regex_format(definition: str) -> InputFormat:
    """A regex grammar, compiled once per pattern: a process that sends the same tools with every
    request (an agent's loop) builds each NFA once. The program is never changed after it is built,
    so one is shared by every check (and thread)."""
    try:
        return InputFormat("grammar", "regex", _compile(definition), None)
    except _Unchecked as exc:
        return InputFormat("grammar", "regex", None, str(exc))
    except Exception as exc:  # fail closed: a pattern that broke the builder is unchecked
        return InputFormat("grammar", "regex", None, f"the pattern could not be read ({type(exc).__name__})")
