"""A custom tool's ``lark`` grammar, checked by llguidance: the engine whose syntax the API's is.

The API's Lark format is llguidance's Lark-like syntax (an Earley parser whose terminals are Rust
``regex`` syntax; not Python's ``lark``). So the input is checked by llguidance itself
(``toolstitch[grammars]``): the grammar is compiled once per definition (:func:`compile_lark`),
and each check feeds a copy of the compiled matcher the input's UTF-8 bytes through a tokenizer of
256 one-byte tokens, then asks whether the grammar accepts there (a full match).

llguidance is an extra, not a dependency: lark grammars are rare, and the wheel is a native one.
Without it a lark input cannot be checked, and :func:`compile_lark` says so and how to get it.

Bounded (a hostile grammar or input cannot hold the caller's loop):

* the parser's limits are set (:data:`LIMITS`): items per Earley row and per step, lexer fuel, lexer
  states (its memory: 1 to 2 kB each), grammar size. An ambiguous grammar is refused when a row
  grows past its bound;
* a check stops after :data:`CHECK_SECONDS` of parsing (the input is fed in slices and the clock
  read between them; a slice that takes long makes the next ones one byte each): the limits bound
  the work per byte, not per input, and an input may be megabytes. A check stopped so is unchecked,
  and the caller refuses it (unless the format is trusted). The clock is ``time.monotonic``, not the
  core's injectable one (``core/_clock.py``): this bounds real time spent, it stamps nothing. A verdict
  near the bound may differ between a fast machine and a loaded one; it is never a wrong yes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

__all__ = ["CHECK_SECONDS", "LIMITS", "MISSING", "LarkGrammar", "compile_lark"]

CHECK_SECONDS = 0.5
"""Seconds of parsing one check may take before it gives up (the call is then unchecked)."""
LIMITS: dict[str, int] = {
    "max_items_in_row": 2000,
    "step_max_items": 50_000,
    "initial_lexer_fuel": 1_000_000,
    "step_lexer_fuel": 200_000,
    "max_lexer_states": 20_000,
    "max_grammar_size": 200_000,
}
"""llguidance's ``LLParserLimits``, set here rather than left to its defaults (the defaults but for
the lexer's states, 250,000 there: up to 500 MB, and the grammar's size)."""
MISSING = (
    "lark grammars are checked with llguidance, which is not installed: pip install "
    "'toolstitch[grammars]' (or mark the format with toolstitch.trust_grammar(...) to take the "
    "server's word for it: the call then carries the anomaly grammar_unchecked)"
)
_SLICE = 256
"""Bytes fed at once while the parser is fast; one at a time once a slice took long."""


class _Bytes:
    """A tokenizer whose tokens are the 256 bytes (and an end token): llguidance's tokenizer
    protocol (``TokenizerWrapper``), so an input is fed exactly as its UTF-8 bytes."""

    eos_token_id = 256
    bos_token_id = None

    def __init__(self) -> None:
        self.tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
        self.special_token_ids = [256]

    def __call__(self, data: bytes | str) -> list[int]:
        return list(data.encode("utf-8") if isinstance(data, str) else data)


@functools.lru_cache(maxsize=1)
def _engine() -> tuple[Any, Any, Any] | None:
    """llguidance, its byte tokenizer and its limits, built once; None when it is not installed."""
    try:
        import llguidance
    except ImportError:
        return None
    tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Bytes()), slices=[])
    limits = llguidance.LLParserLimits(
        max_items_in_row=LIMITS["max_items_in_row"],
        step_max_items=LIMITS["step_max_items"],
        initial_lexer_fuel=LIMITS["initial_lexer_fuel"],
        step_lexer_fuel=LIMITS["step_lexer_fuel"],
        max_lexer_states=LIMITS["max_lexer_states"],
        max_grammar_size=LIMITS["max_grammar_size"],
    )
    return llguidance, tokenizer, limits


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else "unknown")[:200]


class LarkGrammar:
    """A lark grammar compiled once; each check parses with its own copy of the matcher.

    A copy shares its lexer's cache of states with the matcher it was copied from (llguidance's
    ``deep_copy``), so a check that reached a bound of the lexer leaves that cache full for every
    later copy, and its error may read as the input's. So a "no" is believed only from a fresh
    matcher: after any verdict but yes, the matcher is built again from the compiled grammar and the
    check is tried once more on it, in the time that is left. Without that, one hostile input would
    make every later input of the tool unchecked (a model constrained by the grammar rarely sends a
    "no", so the second try costs little)."""

    __slots__ = ("_build", "_matcher")

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._matcher = build()

    def check(self, text: str) -> bool | str:
        """True when the grammar accepts the whole of ``text``, False when it does not, or why it
        was not checked (a bound of the parser, or of the time a check may take)."""
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            return False  # a lone surrogate is no UTF-8 text, which every grammar is over
        deadline = time.monotonic() + CHECK_SECONDS
        verdict = _parse(self._matcher.deep_copy(), data, deadline)
        if verdict is not True and time.monotonic() < deadline:
            self._matcher = self._build()
            verdict = _parse(self._matcher.deep_copy(), data, deadline)
        return verdict


def _parse(matcher: Any, data: bytes, deadline: float) -> bool | str:
    step = _SLICE
    at = 0
    while at < len(data):
        started = time.monotonic()
        ok = matcher.consume_tokens(list(data[at : at + step]))
        now = time.monotonic()
        if not ok:
            return _refused(matcher.get_error())
        at += step
        if at < len(data) and now > deadline:
            return f"checking the input took longer than {CHECK_SECONDS} s"
        if now - started > CHECK_SECONDS / 100:
            step = 1
    if matcher.is_error():
        return _refused(matcher.get_error())
    return bool(matcher.is_accepting())


def _refused(error: Any) -> bool | str:
    """A matcher's error: the input does not fit the grammar (False), or a bound was reached (why)."""
    text = str(error)
    if "doesn't satisfy the grammar" in text or "fails parse" in text:
        return False
    return f"the parser stopped: {_first_line(text)}"


def compile_lark(definition: str) -> LarkGrammar | str:
    """The grammar compiled by llguidance, or why inputs cannot be checked against it."""
    try:
        engine = _engine()
    except Exception as exc:  # an installed llguidance that does not load or build: unchecked
        return f"llguidance could not be loaded ({type(exc).__name__}: {_first_line(str(exc))})"
    if engine is None:
        return MISSING
    llguidance, tokenizer, limits = engine
    try:
        definition.encode("utf-8")
    except UnicodeEncodeError:
        return "the lark grammar is not valid Unicode (it holds a lone surrogate)"
    try:
        grammar = llguidance.LLMatcher.grammar_from_lark(definition)
        error = llguidance.LLMatcher.validate_grammar(grammar, tokenizer, limits=limits)
        if error:
            return f"the lark grammar does not compile: {_first_line(error)}"

        def build() -> Any:
            return llguidance.LLMatcher(tokenizer, grammar, log_level=0, limits=limits)

        compiled = LarkGrammar(build)
        if compiled._matcher.is_error():
            return f"the lark grammar does not compile: {_first_line(compiled._matcher.get_error())}"
    except Exception as exc:  # fail closed: a grammar that broke the engine is unchecked
        return f"the lark grammar could not be compiled ({type(exc).__name__})"
    return compiled
