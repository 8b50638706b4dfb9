"""Argument text: reading JSON as it arrives, parsing it strictly, and checking a value against a
schema or a grammar.

It knows nothing of streams, calls or the SDK: text (or a value) in, an answer out. The core
(:mod:`toolstitch.core`) is the stream and the call, and asks this package about a call's text;
what the text is, what it can still become and whether it fits lives here, below the core, on the
standard library, pydantic-core and the errors alone. What lives where:

* :mod:`._scanner`       the incremental JSON scanner: can the text so far still become JSON, and
  is its top-level value complete (never parses).
* :mod:`._preview`       display-only previews of an object's text still arriving.
* :mod:`._early`         the verdicts of a schema that are certain on partial text (early refusal).
* :mod:`._parse`         the strict parse (RFC 8259, an object, valid Unicode) and its Unicode tests.
* :mod:`._schema_quick`  a quick yes for the common shape of a JSON Schema, before ``jsonschema``.
* :mod:`._grammar_regex` a ``regex`` grammar, run by Rust's ``regex`` crate through pydantic-core.
* :mod:`._grammar_lark`  a ``lark`` grammar, run by llguidance (the ``grammars`` extra).

The layers above use it through this module only (an import-linter contract in pyproject.toml and
tests/test_architecture.py hold every package to its ``__init__``). None of these names is a public
name of ``toolstitch``: ``__all__`` is what the core reads the text with.
"""

from __future__ import annotations

from ._early import EarlyCheck, Node, compile_node
from ._grammar_lark import MISSING, compile_lark
from ._grammar_regex import compile_regex
from ._parse import has_lone_surrogate, join_surrogate_pairs, parse_arguments, parse_input
from ._preview import Preview
from ._scanner import JSONScanner
from ._schema_quick import Check, compile_quick

__all__ = []
__all__ += [  # for the layers above only
    "MISSING",
    "Check",
    "EarlyCheck",
    "JSONScanner",
    "Node",
    "Preview",
    "compile_lark",
    "compile_node",
    "compile_quick",
    "compile_regex",
    "has_lone_surrogate",
    "join_surrogate_pairs",
    "parse_arguments",
    "parse_input",
]
