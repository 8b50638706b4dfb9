"""The ``toolstitch`` command line: one ``argparse`` parser, a subcommand per task.

Each subcommand lives in its own module (``_check_command``, ``_replay_command``,
``_demo_command``), which says its ``NAME``, ``HELP`` and ``DESCRIPTION``, adds its options
(``add_arguments(parser)``) and runs (``run(args) -> exit code``); :data:`COMMANDS` lists them, and
:func:`build_parser` registers each the same way, so that shape is written once.

Exit codes: 0 done (or clean), 1 problems found, 2 bad usage or unusable input (argparse's own code
for bad usage), always with one line on stderr and never a traceback: whatever a command did not
foresee is reported the same way (fail closed), as an internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from . import _check_command, _demo_command, _replay_command
from ._output import fail

__all__ = ["COMMANDS", "build_parser", "main"]

Command = Callable[[argparse.Namespace], int]

#: Every subcommand's module (see the module's docstring). Add new ones here.
COMMANDS: tuple[ModuleType, ...] = (_check_command, _replay_command, _demo_command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolstitch",
        description="Tools for streamed tool calls with the openai client.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for command in COMMANDS:
        sub = subparsers.add_parser(command.NAME, help=command.HELP, description=command.DESCRIPTION)
        command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (argparse's usage errors give 2)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    run: Command = args.run
    try:
        return run(args)
    except BrokenPipeError:
        # The reader went away (``toolstitch replay x | head``): nothing is wrong with the input.
        _silence_stdout()
        return 1
    except KeyboardInterrupt:  # Ctrl-C during ``--timing``: the conventional code, no traceback
        return 130
    except Exception as exc:  # fail closed: one line, exit 2, never a traceback
        return fail(str(args.command), f"internal error ({type(exc).__name__}: {exc})")


def _silence_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush has nowhere to fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (tests): nothing to do
        pass
