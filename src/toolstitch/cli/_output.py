"""What every command writes, made safe to write: one-line errors, and text any terminal encodes.

A recording or a history is hostile input: it may hold lone surrogates (a provider split an emoji
across chunks), text a terminal's encoding lacks, or line breaks inside a file name. Writing such
text must not raise (``UnicodeEncodeError`` is a traceback), and an error must stay one line on
stderr, so scripts can read it.
"""

from __future__ import annotations

import codecs
import json
import sys
from pathlib import Path
from typing import Any, Protocol, TextIO

__all__ = [
    "EXIT_UNUSABLE",
    "MESSAGE_LIMIT",
    "SafeOutput",
    "TextSink",
    "fail",
    "json_text",
    "one_line",
    "write_page",
]

#: The exit code for input a command cannot use (argparse's own code for bad usage).
EXIT_UNUSABLE = 2
#: The longest error message printed (a JSON error quoting a 50 MB line must not flood stderr).
MESSAGE_LIMIT = 400


class TextSink(Protocol):
    """Where a command writes its report: a text file, ``io.StringIO`` or :class:`SafeOutput`."""

    def write(self, text: str, /) -> Any: ...


_ESCAPE = "toolstitch.json-escape"


def _json_escape(error: UnicodeError) -> tuple[str, int]:
    """A codec error handler: each character that cannot be encoded becomes its JSON escape
    (``\\udc80``; ``\\u00e9``, where ``backslashreplace`` writes ``\\xe9``, which JSON refuses;
    a character beyond the BMP as its two surrogate escapes)."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = []
    for c in error.object[error.start : error.end]:
        n = ord(c)
        if n > 0xFFFF:
            n -= 0x10000
            out.append(f"\\u{0xD800 | (n >> 10):04x}\\u{0xDC00 | (n & 0x3FF):04x}")
        else:
            out.append(f"\\u{n:04x}")
    return "".join(out), error.end


codecs.register_error(_ESCAPE, _json_escape)


class SafeOutput:
    """Writes text to ``stream`` in whatever encoding it has: a character it cannot encode (a lone
    surrogate, or CJK text on an ASCII terminal) is written as its escape (``\\udc80``), which is
    also how JSON spells it, so ``--json`` output stays valid JSON."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._encoding = getattr(stream, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        safe = text.encode(self._encoding, _ESCAPE).decode(self._encoding)
        return self._stream.write(safe)

    def flush(self) -> None:
        self._stream.flush()


def json_text(data: Any) -> str:
    """``--json`` output: indented, readable text (``ensure_ascii=False``; :class:`SafeOutput`
    escapes what the terminal cannot encode) and strict JSON: ``ValueError`` rather than ``NaN``,
    which a strict reader refuses (every report is finite by construction)."""
    return json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False) + "\n"


def write_page(path: str, page: str) -> None:
    """Write an HTML report as UTF-8. Its text is escaped for HTML already; a lone surrogate (a
    provider split an emoji, a file name that is not UTF-8) cannot be UTF-8 at all, so it is
    written as its escape (``\\udc80``), visible in the page, and the file stays valid UTF-8.
    ``OSError`` when it cannot be written."""
    Path(path).write_text(page, encoding="utf-8", errors="backslashreplace")


def one_line(text: object, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` on one line (every run of white space, line breaks included, becomes one space),
    at most ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def fail(command: str, message: object) -> int:
    """Print ``toolstitch COMMAND: MESSAGE`` as one line on stderr; the exit code for unusable input."""
    SafeOutput(sys.stderr).write(f"toolstitch {command}: {one_line(message)}\n")
    return EXIT_UNUSABLE
