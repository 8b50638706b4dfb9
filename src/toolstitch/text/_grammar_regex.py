"""A custom tool's ``regex`` grammar, held to Rust ``regex`` semantics by the ``regex`` crate itself.

The API reads a grammar's pattern as Rust's ``regex`` crate does (``\\p{Han}``, ``[[:alpha:]]``,
``\\x{1F600}``, set operations such as ``[a-z&&[^b]]``; no lookaround, no backreferences). So the
pattern is run by that crate, through pydantic-core (already a dependency: pydantic's ``pattern``
constraint compiles with it when ``regex_engine="rust-regex"``). pydantic-core's match is a search,
so the pattern is anchored as ``\\A(?:...)\\z``: a full match. The pattern is first compiled alone,
so that a fragment that only parses once wrapped (``a)|(b``) is refused as Rust refuses it.

The crate never backtracks: for one pattern a check is linear in the input. Its cost per input
byte is bounded by the compiled pattern's size, which the crate caps (10 MB: larger patterns are
refused when compiled), and the worst pattern under that cap costs about 0.4 ms per input byte on
the machine the bounds were measured on (``benchmarks/custom_grammar.py``). So the input a check may
read is bounded by the pattern's size: :data:`BASE_INPUT_BYTES` bytes for any pattern, and
:data:`BASE_INPUT_BYTES` × *k* bytes when *k* copies of the pattern still compile under the cap
(probed once per pattern and size class, :data:`SIZE_CLASSES`, only when an input needs it). Past
that, the input is not checked (the caller refuses it): one check costs at most about half a
second, whatever the pattern and the input. A probe compiles up to the cap (tens of milliseconds),
once per pattern and class. The bound is by the pattern's compiled size, which Unicode classes
swell (``\\w+`` fits 64 copies: inputs up to 40 kB); a caller who needs more marks the format
trusted (``trust_grammar``).
"""

from __future__ import annotations

from pydantic_core import SchemaError, SchemaValidator, core_schema

__all__ = ["BASE_INPUT_BYTES", "SIZE_CLASSES", "RegexGrammar", "compile_regex"]

BASE_INPUT_BYTES = 640
"""UTF-8 bytes of input any pattern the engine compiles may be checked against."""
SIZE_CLASSES = (4, 16, 64, 256, 1024, 4096, 16384, 65536)
"""Copies of a pattern probed against the engine's size cap: when *k* copies compile, the pattern
is at most 1/*k* of the cap, and an input of up to ``BASE_INPUT_BYTES * k`` bytes is checked."""

# The closing of the anchored pattern: ")" and, for a pattern that ends inside a verbose-mode
# comment (``(?x)a # note``), a newline first, which ends the comment (tried only when the first
# does not compile, which for a pattern that compiled alone means its end was in a comment).
_CLOSINGS = (")", "\n)")


def _validator(pattern: str) -> SchemaValidator:
    return SchemaValidator(core_schema.str_schema(pattern=pattern, regex_engine="rust-regex"))


def _reason(exc: BaseException) -> str:
    """The engine's own words on why a pattern does not compile, on one short line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    said = [line for line in lines if line.startswith("error:")] or lines[-1:] or ["unknown"]
    text = said[-1].removeprefix("error:").strip().removeprefix("SchemaError:").strip()
    return text[:200]


class RegexGrammar:
    """A pattern compiled once, anchored; shared by every check (and thread) of its tool."""

    __slots__ = ("_closing", "_fits", "_full", "_pattern")

    def __init__(self, pattern: str, full: SchemaValidator, closing: str) -> None:
        self._pattern = pattern
        self._full = full
        self._closing = closing
        self._fits: dict[int, bool] = {}
        """Size classes probed so far: does that many copies of the pattern compile?"""

    def _room(self, size: int) -> int | None:
        """The smallest size class whose bound admits ``size`` input bytes, if the pattern is small
        enough for it (None: the input is too long for this pattern to be checked within the bound)."""
        for k in SIZE_CLASSES:
            if size > BASE_INPUT_BYTES * k:
                continue
            fits = self._fits.get(k)
            if fits is None:
                try:
                    _validator(f"(?:{self._pattern}{self._closing}{{{k}}}")
                    fits = True
                except Exception:
                    fits = False
                self._fits[k] = fits
            return k if fits else None
        return None

    def check(self, text: str) -> bool | str:
        """True when the whole of ``text`` matches, False when it does not, or why it was not
        checked (the input is over the bound for this pattern's size)."""
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            return False  # a lone surrogate: no pattern over UTF-8 text matches it
        if size > BASE_INPUT_BYTES and self._room(size) is None:
            return (
                f"the input ({size} bytes) is too long to be checked against this pattern within the "
                "bound (a larger pattern may check less input: see docs/responses.md)"
            )
        return self._full.isinstance_python(text)


def compile_regex(pattern: str) -> RegexGrammar | str:
    """The pattern compiled by the ``regex`` crate and anchored, or why it cannot be checked."""
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError:  # pydantic-core would read it with a replacement character
        return "the pattern is not valid Unicode (it holds a lone surrogate)"
    try:
        _validator(pattern)
    except SchemaError as exc:
        return f"the pattern does not compile as a Rust regex: {_reason(exc)}"
    except Exception as exc:  # fail closed: a pattern that broke the engine is unchecked
        return f"the pattern could not be compiled ({type(exc).__name__})"
    problem = "the pattern could not be anchored"
    for closing in _CLOSINGS:
        try:
            return RegexGrammar(pattern, _validator(f"\\A(?:{pattern}{closing}\\z"), closing)
        except SchemaError as exc:
            problem = f"the pattern could not be anchored: {_reason(exc)}"
        except Exception as exc:
            problem = f"the pattern could not be anchored ({type(exc).__name__})"
    return problem
