"""What every command writes, made safe to write: one-line errors, and text any terminal encodes.

A recording or a history is hostile input: it may hold lone surrogates (a provider split an emoji
across chunks), text a terminal's encoding lacks, or line breaks inside a file name. Writing such
text must not raise (``UnicodeEncodeError`` is a traceback), and an error must stay one line on
stderr, so scripts can read it.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol, TextIO

__all__ = ["EXIT_UNUSABLE", "MESSAGE_LIMIT", "SafeOutput", "TextSink", "fail", "one_line"]

#: The exit code for input a command cannot use (argparse's own code for bad usage).
EXIT_UNUSABLE = 2
#: The longest error message printed (a JSON error quoting a 50 MB line must not flood stderr).
MESSAGE_LIMIT = 400


class TextSink(Protocol):
    """Where a command writes its report: a text file, ``io.StringIO`` or :class:`SafeOutput`."""

    def write(self, text: str, /) -> Any: ...


class SafeOutput:
    """Writes text to ``stream`` in whatever encoding it has: a character it cannot encode (a lone
    surrogate, or CJK text on an ASCII terminal) is written as its escape (``\\udc80``), which is
    also how JSON spells it, so ``--json`` output stays valid JSON."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._encoding = getattr(stream, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        safe = text.encode(self._encoding, "backslashreplace").decode(self._encoding)
        return self._stream.write(safe)

    def flush(self) -> None:
        self._stream.flush()


def one_line(text: object, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` on one line (every run of white space, line breaks included, becomes one space),
    at most ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def fail(command: str, message: object) -> int:
    """Print ``toolstitch COMMAND: MESSAGE`` as one line on stderr; the exit code for unusable input."""
    SafeOutput(sys.stderr).write(f"toolstitch {command}: {one_line(message)}\n")
    return EXIT_UNUSABLE
