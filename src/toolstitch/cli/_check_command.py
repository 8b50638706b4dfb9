"""``toolstitch check FILE.json``: a saved history (or request body) against a server's history rules.

Both APIs' histories are read, told apart by the file's shape: a Chat Completions history (a list of
messages, or a request body with ``messages``) is checked by ``validate_history`` (``validate_request``
for a body), a Responses API input (a list of input items, or a request body with ``input``) by
``validate_input``; both are reported the same way.

Exit codes follow the usual convention for checkers: 0 clean, 1 problems found, 2 (one line on
stderr) when the file cannot be read, is not JSON, or is neither kind of history.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..history import DIALECT_NAMES, HistoryProblem, validate_history, validate_input, validate_request
from ..recording import plain
from ._output import SafeOutput, fail

__all__ = ["DESCRIPTION", "HELP", "NAME", "add_arguments", "run"]

_WIDTH = 80


class _InputError(Exception):
    """The input file cannot be used; the message is one line for stderr."""


#: Content parts only the Responses API's input holds (a chat message's parts are ``text``,
#: ``image_url``, ``input_audio``, ``file``, ``refusal``).
_INPUT_PARTS = frozenset({"input_text", "input_image", "input_file", "output_text"})


@dataclass(frozen=True, slots=True)
class _History:
    """What the file holds: the history (or request body), which API's it is, and its length."""

    data: Any
    api: str  # "chat" or "responses"
    is_request: bool
    count: int

    @property
    def unit(self) -> str:
        return "messages" if self.api == "chat" else "input items"

    def problems(self, dialect: str) -> list[HistoryProblem]:
        data = self.data
        if self.api == "chat":
            return validate_request(data, dialect) if self.is_request else validate_history(data, dialect)
        if self.is_request:
            previous = data.get("previous_response_id")
            return validate_input(data["input"], previous_response_id=previous, dialect=dialect)
        return validate_input(data, dialect=dialect)


def _is_input(items: list[Any]) -> bool:
    """A list is a Responses API input when an entry has a ``type`` (a chat message never has one:
    ``function_call``, ``function_call_output``, ``reasoning``, ``message``, …) or a content part
    only that API has (``input_text``, …). A list of plain role/content messages reads as chat."""
    for item in items:
        if not isinstance(item, dict):
            continue
        if "type" in item:
            return True
        content = item.get("content")
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") in _INPUT_PARTS for part in content
        ):
            return True
    return False


def _load(path: str) -> _History:
    """The file's history: a JSON list of messages or of input items, or a request body with a
    ``messages`` list (whose ``tools`` and ``tool_choice`` are then checked too) or an ``input``."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _InputError(f"cannot read {path}: {exc}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than json can read
        raise _InputError(f"{path} is not valid JSON: {exc}") from None
    if isinstance(data, list):
        return _History(data, "responses" if _is_input(data) else "chat", False, len(data))
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return _History(data, "chat", True, len(data["messages"]))
    if isinstance(data, dict) and isinstance(data.get("input"), list | str):
        given = data["input"]
        return _History(data, "responses", True, len(given) if isinstance(given, list) else 1)
    raise _InputError(
        f'{path}: expected a JSON list of messages or an object with a "messages" list (Chat '
        'Completions), or a list of input items or an object with an "input" (Responses API)'
    )


def _format(problem: HistoryProblem) -> str:
    """``#index rule severity: message``, wrapped to 80 columns with an indented continuation."""
    return textwrap.fill(
        str(problem),
        width=_WIDTH,
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def run(args: argparse.Namespace) -> int:
    try:
        history = _load(args.file)
    except _InputError as exc:
        return fail("check", exc)
    try:
        problems = history.problems(args.dialect)
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:
        # Fail closed: a history the validator cannot take apart is not a valid one.
        return fail("check", f"cannot check {args.file}: {type(exc).__name__}: {exc}")
    out = SafeOutput(sys.stdout)
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    if args.json:
        report = {
            "file": args.file,
            "api": history.api,
            "dialect": args.dialect,
            "valid": errors == 0,
            "errors": errors,
            "warnings": warnings,
            "problems": [asdict(p) for p in problems],
        }
        out.write(
            json.dumps(plain(report, finite=True), ensure_ascii=False, indent=2, allow_nan=False) + "\n"
        )
    else:
        for problem in problems:
            out.write(_format(problem) + "\n")
        verdict = "valid" if errors == 0 else "invalid"
        out.write(
            f"{args.file}: {verdict} for {args.dialect} ({history.count} {history.unit}, "
            f"{errors} error(s), {warnings} warning(s))\n"
        )
    return 1 if errors else 0


NAME = "check"
HELP = "validate a saved messages list (or Responses input) against a server's history rules"
DESCRIPTION = """\
Validate a saved Chat Completions history: a JSON list of messages, or an object with a "messages"
list (a request body; its tools are checked too); or a Responses API input: a JSON list of input
items, or an object with an "input" (told apart by their shape). Prints one line per problem: #index
rule severity: message. Exit 0 when valid, 1 when there are errors, 2 when the file cannot be read.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``toolstitch check``."""
    parser.add_argument("file", metavar="FILE.json", help="the history to check ('-' for stdin)")
    parser.add_argument(
        "--dialect",
        choices=DIALECT_NAMES,
        default="openai",
        help="the server family whose rules apply (default: openai)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
