"""Every subcommand is registered the one way ``_main.build_parser`` does it, from its module's
``NAME``, ``HELP``, ``DESCRIPTION``, ``add_arguments`` and ``run``."""

from __future__ import annotations

import argparse
from types import ModuleType

import pytest

from toolstitch.cli import _main


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _words(text: str) -> str:
    return " ".join(text.split())  # argparse refills what it prints


def test_the_parser_has_exactly_the_listed_commands() -> None:
    names = [command.NAME for command in _main.COMMANDS]
    assert sorted(names) == sorted(_subcommands(_main.build_parser())) == ["check", "demo", "replay"]


@pytest.mark.parametrize("command", _main.COMMANDS, ids=lambda c: c.NAME)
def test_each_command_is_registered_from_its_module(
    command: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    sub = _subcommands(_main.build_parser())[command.NAME]
    assert sub.description == command.DESCRIPTION
    assert sub.get_default("run") is command.run
    assert _main.main([command.NAME, "--help"]) == 0
    assert _words(command.DESCRIPTION) in _words(capsys.readouterr().out)
    assert _main.main(["--help"]) == 0
    assert _words(command.HELP) in _words(capsys.readouterr().out)
