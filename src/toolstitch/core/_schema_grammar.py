"""The check a custom tool's input meets at seal and at the gate: the tool's ``format``.

A Responses (or Chat Completions) ``custom`` tool takes free text, not JSON: ``{"type": "custom",
"name": ..., "format": {"type": "text"} | {"type": "grammar", "syntax": "regex" | "lark",
"definition": ...}}``. The API constrains the model's sampling with the grammar; a server that does
not (a proxy, a compatible server, a replayed recording) can send any text. What toolstitch holds a
custom call's input to, before it may be ``ready``, by the engine the API's syntax is:

* ``text`` (or no ``format``): any valid Unicode (a lone surrogate was refused by the strict parse).
* ``regex``: the whole input must match, with Rust ``regex`` semantics, run by that crate
  (``text/_grammar_regex.py``, through pydantic-core).
* ``lark``: the grammar must accept the whole input, run by llguidance (``text/_grammar_lark.py``, the
  extra ``toolstitch[grammars]``).
* any other ``format`` (an unknown type or syntax, a definition that is not text): unreadable.

A grammar is compiled once per definition (:func:`read_format` keeps the last ones), never per
call. An input that cannot be checked (the grammar does not compile, llguidance is not installed,
a bound of the engine or of a check's time was reached) is *unchecked*, and an unchecked call is
refused (fail closed, rule 9 of docs/design.md): the request promised the input fits, and nobody
knows. The one exception is explicit: a format marked with :func:`trust_grammar` by the caller who
trusts the server to constrain sampling lets an unchecked input through, with the anomaly
``grammar_unchecked``. An input that was checked and does not fit is refused either way.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ..errors import SchemaViolation, ToolCallError
from ..text import MISSING, compile_lark, compile_regex
from ._anomaly import Anomaly, AnomalyCode

__all__ = ["InputFormat", "TrustedGrammar", "read_format", "trust_grammar"]


class TrustedGrammar(dict[str, Any]):
    """A custom tool's ``format`` whose owner takes the server's word where it cannot be checked.

    It is the format itself (a ``dict``: the SDK sends it as it is), marked: see
    :func:`trust_grammar`."""

    __slots__ = ()


def trust_grammar(format: Mapping[str, Any]) -> TrustedGrammar:
    """Mark a custom tool's ``format`` as trusted: when its input cannot be checked (a lark grammar
    without llguidance installed, a grammar the engine cannot compile, a check over its bounds), the
    call is not refused for that but carries the anomaly ``grammar_unchecked``. For a server that
    constrains sampling to the grammar (OpenAI does). An input that was checked and does not fit is
    still refused. Use it in place of the format: ``ts.tool(format=ts.trust_grammar({...}))``, or in
    a request's tool: ``{"type": "custom", "name": ..., "format": ts.trust_grammar({...})}``."""
    if not isinstance(format, Mapping):
        raise TypeError("trust_grammar takes a format: a mapping such as {'type': 'grammar', ...}")
    return TrustedGrammar(format)


class InputFormat:
    """A custom tool's ``format``, read once: what :meth:`check` holds an input to."""

    __slots__ = ("_engine", "_problem", "kind", "syntax", "trusted")

    def __init__(
        self, kind: str, syntax: str | None, engine: Any, problem: str | None, trusted: bool = False
    ) -> None:
        self.kind = kind
        """``"text"`` or ``"grammar"`` (``"unreadable"`` for a format toolstitch cannot read)."""
        self.syntax = syntax
        """``"regex"`` or ``"lark"`` for a grammar, else None."""
        self.trusted = trusted
        """Marked with :func:`trust_grammar`: an unchecked input is let through, with an anomaly."""
        self._engine = engine
        self._problem = problem

    @property
    def problem(self) -> str | None:
        """Why inputs cannot be checked against this format (it is unreadable, the grammar does not
        compile, or its engine is not installed and the format is not trusted), else None: a tool
        defined with it is refused at definition (``ValueError``), as its every call would be."""
        if self.kind == "unreadable":
            return self._problem or "the format cannot be read"
        if self._engine is None and self._problem is not None:
            if self.trusted and self._problem == MISSING:
                return None  # nothing can be compiled here; the owner takes the server's word
            return self._problem
        return None

    def check(self, name: str, text: str, raw: str, notes: list[Anomaly]) -> ToolCallError | None:
        """None when ``text`` may be the input of tool ``name``, else the error to refuse it with.
        Never raises; an input that cannot be checked is refused unless the format is trusted."""
        if self.kind == "text":
            return None
        why = self._problem or "the format cannot be read"
        engine = self._engine
        if engine is not None and self.kind == "grammar":
            try:
                verdict = engine.check(text)
            except Exception as exc:  # fail closed: a check that failed is not a yes
                verdict = f"the check failed ({type(exc).__name__})"
            if verdict is True:
                return None
            if verdict is False:
                return SchemaViolation(
                    f"the input of {name!r} does not match its {self.syntax} grammar",
                    raw=raw,
                    errors=[f"(input): does not match the {self.syntax} grammar of the tool"],
                )
            why = str(verdict)
        if self.trusted and self.kind == "grammar":
            notes.append(
                Anomaly(
                    AnomalyCode.GRAMMAR_UNCHECKED,
                    f"the input of {name!r} was not checked against its {self.syntax} grammar ({why}); "
                    "its format is trusted, so the call was let through",
                )
            )
            return None
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
    trusted = isinstance(value, TrustedGrammar)
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
    compiled = compiled_grammar(syntax, definition)
    if isinstance(compiled, str):
        return InputFormat("grammar", syntax, None, compiled, trusted)
    return InputFormat("grammar", syntax, compiled, None, trusted)


@functools.lru_cache(maxsize=64)
def compiled_grammar(syntax: str, definition: str) -> Any:
    """A grammar compiled once per definition (or why it cannot be checked): a process that sends
    the same tools with every request (an agent's loop) compiles each once. Each compiled grammar is
    never changed after it is built (a lark check copies its matcher), so one is shared by every
    check and thread. Bounded: the engines cap what one holds, and 64 are kept."""
    if syntax == "lark":
        return compile_lark(definition)
    return compile_regex(definition)
