"""``toolstitch check FILE.json``: a saved history (or request body) against a server's history rules.

Exit codes follow the usual convention for checkers: 0 clean, 1 problems found, 2 (one line on
stderr) when the file cannot be read, is not JSON, or is not a list of messages.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..history import DIALECT_NAMES, HistoryProblem, validate_history, validate_request
from ..recording import plain
from ._output import SafeOutput, fail

__all__ = ["add_command"]

_WIDTH = 80


class _InputError(Exception):
    """The input file cannot be used; the message is one line for stderr."""


def _load_messages(path: str) -> tuple[Any, bool]:
    """``(data, is_request)``: a JSON list of messages, or an object with a ``messages`` list
    (a saved request body, whose ``tools`` and ``tool_choice`` are then checked too)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _InputError(f"cannot read {path}: {exc}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than json can read
        raise _InputError(f"{path} is not valid JSON: {exc}") from None
    if isinstance(data, list):
        return data, False
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return data, True
    raise _InputError(f'{path}: expected a JSON list of messages or an object with a "messages" list')


def _format(problem: HistoryProblem) -> str:
    """``#index rule severity: message``, wrapped to 80 columns with an indented continuation."""
    return textwrap.fill(
        str(problem),
        width=_WIDTH,
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _run(args: argparse.Namespace) -> int:
    try:
        data, is_request = _load_messages(args.file)
    except _InputError as exc:
        return fail("check", exc)
    try:
        problems = (
            validate_request(data, args.dialect) if is_request else validate_history(data, args.dialect)
        )
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:
        # Fail closed: a history the validator cannot take apart is not a valid one.
        return fail("check", f"cannot check {args.file}: {type(exc).__name__}: {exc}")
    out = SafeOutput(sys.stdout)
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    if args.json:
        report = {
            "file": args.file,
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
        count = len(data["messages"]) if is_request else len(data)
        verdict = "valid" if errors == 0 else "invalid"
        out.write(
            f"{args.file}: {verdict} for {args.dialect} ({count} messages, "
            f"{errors} error(s), {warnings} warning(s))\n"
        )
    return 1 if errors else 0


def add_command(subparsers: Any) -> None:
    """Register ``toolstitch check``."""
    # The same registration shape in every command module (see _main.COMMANDS): only the words
    # differ, and they are this command's own, so there is nothing to share.
    parser = subparsers.add_parser(
        "check",
        help="validate a saved messages list against a server's history rules",
        description=(
            "Validate a saved Chat Completions history: a JSON list of messages, or an object "
            'with a "messages" list (a request body; its tools are checked too). Prints one '
            "line per problem: #index rule severity: message. Exit 0 when valid, 1 when there "
            "are errors, 2 when the file cannot be read."
        ),
    )
    parser.add_argument("file", metavar="FILE.json", help="the history to check ('-' for stdin)")
    parser.add_argument(
        "--dialect",
        choices=DIALECT_NAMES,
        default="openai",
        help="the server family whose rules apply (default: openai)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    parser.set_defaults(run=_run)
