"""The ``toolstitch`` command line.

One ``argparse`` parser with a subcommand per task. A subcommand is a function that adds its
parser to ``subparsers`` and sets ``run`` (``fn(args) -> exit code``) as its default; list it in
:data:`COMMANDS`. ``replay`` and ``demo`` are meant to be added the same way, each in its own
module, so this file stays a small table.

Exit codes follow the usual convention for checkers: 0 clean, 1 problems found, 2 bad usage or
unreadable input (argparse's own code for bad usage).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..history import HistoryProblem, validate_history, validate_request
from ..history._dialects import DIALECT_NAMES
from ..recording import _replay
from . import _demo

__all__ = ["COMMANDS", "build_parser", "main"]

_SubParsers = Any  # argparse's _SubParsersAction is private and generic; keep the type loose
Command = Callable[[argparse.Namespace], int]
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


def _run_check(args: argparse.Namespace) -> int:
    try:
        data, is_request = _load_messages(args.file)
    except _InputError as exc:
        print(f"toolstitch check: {exc}", file=sys.stderr)
        return 2
    problems = validate_request(data, args.dialect) if is_request else validate_history(data, args.dialect)
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
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        for problem in problems:
            print(_format(problem))
        count = len(data["messages"]) if is_request else len(data)
        verdict = "valid" if errors == 0 else "invalid"
        print(
            f"{args.file}: {verdict} for {args.dialect} ({count} messages, "
            f"{errors} error(s), {warnings} warning(s))"
        )
    return 1 if errors else 0


def _add_check(subparsers: _SubParsers) -> None:
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
    parser.set_defaults(run=_run_check)


#: Every subcommand, as a function that registers its parser. Add new ones here.
COMMANDS: list[Callable[[_SubParsers], None]] = [_add_check, _replay.add_command, _demo.add_command]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolstitch",
        description="Tools for streamed tool calls with the openai client.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for register in COMMANDS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (argparse's usage errors give 2)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    run: Command = args.run
    return run(args)
