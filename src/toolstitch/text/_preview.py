"""Display-only previews of arguments that are still streaming (``ToolCall.preview``, issue 13).

A UI wants to show ``{"city": "San F`` as ``{'city': 'San F'}`` while the model is still writing it.
Rule 2 of docs/design.md allows such a preview and forbids acting on it: it is never ``parsed``, the
gate and the executor never read it, and a ready call's preview *is* its ``parsed`` value.

What a preview shows, for the argument text so far:

* ``None`` until the opening ``{`` has arrived;
* every key whose value has begun, with that value as far as it is known: a finished value as it
  will parse; an open string as the prefix that has arrived (an escape cut in half is left out
  until it is whole); an open object or array with the members that have begun;
* never an unfinished number or literal (``12`` may still become ``125``, ``tr`` is not ``true``),
  never a key whose name or colon has not fully arrived: keys are never invented.

So for every prefix of a valid JSON object, each key of the preview is a key of the final value and
each string a prefix of the final string (``tests/core/test_preview.py``). Text that cannot become
JSON freezes the preview where the text went wrong; nothing here raises.

Incremental: :class:`Preview` keeps its parser state between reads and, on each read, parses only
the text that arrived since the last one (plus at most one held-back token: a number, literal or
escape that may still continue). Strings are decoded in runs by the C JSON decoder. Nothing is
done while nobody reads a preview: the state is built on the first read.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["Preview"]

# Parser states.
_START, _KEY_OR_CLOSE, _KEY, _COLON, _VALUE, _VALUE_OR_CLOSE, _AFTER, _STRING, _DONE, _STOPPED = range(10)

_WHITESPACE = re.compile(r"[ \t\n\r]*")
# A run of string content the JSON decoder can take whole: plain characters and complete escapes.
# Only ever used as ``match(...).end()`` with nothing after the loop, so the greedy match never
# backtracks (possessive quantifiers would say so, but need Python 3.11; the floor is 3.10).
_STRING_RUN = re.compile(r'(?:[^"\\\x00-\x1f]+|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
_HIGH_SURROGATE_END = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\Z")
# What may be held back at the end of an open string: a high surrogate escape (its low half may
# follow) and an escape cut in half.
_HELD = re.compile(r"(?:\\u[dD][89abAB][0-9a-fA-F]{2})?(?:\\(?:u[0-9a-fA-F]{0,3})?)?\Z")
_NUMBER_CHARS = re.compile(r"[-+0-9.eE]+")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LETTERS = re.compile(r"[a-z]+")
_LITERALS = {"true": True, "false": False, "null": None}
_MAX_TOKEN = 1000
"""A number or literal longer than this is not one anybody wants previewed: the preview stops."""
_MAX_DEPTH = 64
_FRESH_BELOW = 8192
"""Characters of argument text up to which every read builds a fresh, complete preview."""
_LAG = 8
"""Past that, a new preview is built once the text has grown by 1/_LAG since the last one."""


class Preview:
    """The parser state of one call's preview. Read with :meth:`read`; never raises."""

    __slots__ = (
        "_pending",
        "_root",
        "_snapshot",
        "_snapshot_at",
        "_stack",
        "_state",
        "_string",
        "_string_key",
        "consumed",
    )

    def __init__(self) -> None:
        self.consumed = 0
        """Characters of the argument text handed to the parser so far."""
        self._pending = ""
        self._state = _START
        self._root: dict[str, Any] | None = None
        # One frame per open container: [container, key awaiting its value (objects), or the index
        # of the open string in a list].
        self._stack: list[list[Any]] = []
        self._string: list[str] = []
        """Decoded pieces of the open string."""
        self._string_key = False
        self._snapshot: dict[str, Any] | None = None
        """The copy handed out last, and how much text it showed: handed out again while the text
        that arrived since is small beside it (see :meth:`read`)."""
        self._snapshot_at = 0

    def read(self, new_text: str) -> dict[str, Any] | None:
        """Parse ``new_text`` (the argument text that arrived since the last read) and return a
        copy of the preview: a fresh dict, so a caller keeping it sees it unchanged later."""
        self.consumed += len(new_text)
        if new_text and self._state not in (_DONE, _STOPPED):
            try:
                self._parse(self._pending + new_text)
            except Exception:  # display only: a parser fault freezes the preview, never raises
                self._state = _STOPPED
                self._pending = ""
        if self._root is None:
            return None
        snapshot = self._snapshot
        if (
            snapshot is not None
            and self._snapshot_at > _FRESH_BELOW
            and (self.consumed - self._snapshot_at) * _LAG < self._snapshot_at
        ):
            # Building a copy costs the size of what it shows. Past _FRESH_BELOW characters a new
            # copy is built only once an eighth more text has arrived, so reading after every
            # fragment stays linear in the argument's size (a copy per fragment would make it
            # quadratic: 7 minutes of CPU at the default 4 MiB limit). The copy handed out is an
            # earlier preview of the same text: still a true prefix, just less of it.
            return snapshot
        if self._state == _STRING and not self._string_key:
            self._show_open_string()
        copied: dict[str, Any] = _copy(self._root)
        self._snapshot = copied
        self._snapshot_at = self.consumed
        return copied

    # -- parsing -------------------------------------------------------------------------------

    def _parse(self, text: str) -> None:
        n = len(text)
        pos = 0
        stack = self._stack
        while pos < n:
            state = self._state
            if state == _STRING:
                pos = self._string_part(text, pos)
                if self._state == _STRING:  # the rest is held back or waits for more text
                    return
                continue
            if state in (_DONE, _STOPPED):
                self._pending = ""
                return
            pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
            if pos >= n:
                break
            c = text[pos]
            if state == _START:
                if c != "{":
                    return self._stop()
                self._root = {}
                stack.append([self._root, None])
                self._state = _KEY_OR_CLOSE
                pos += 1
            elif state in (_KEY_OR_CLOSE, _KEY):
                if c == '"':
                    self._open_string(key=True)
                    pos += 1
                elif c == "}" and state == _KEY_OR_CLOSE:
                    pos = self._close(pos)
                else:
                    return self._stop()
            elif state == _COLON:
                if c != ":":
                    return self._stop()
                self._state = _VALUE
                pos += 1
            elif state == _AFTER:
                frame = stack[-1]
                is_object = type(frame[0]) is dict
                if c == ",":
                    self._state = _KEY if is_object else _VALUE
                    pos += 1
                elif c == ("}" if is_object else "]"):
                    pos = self._close(pos)
                else:
                    return self._stop()
            else:  # _VALUE or _VALUE_OR_CLOSE
                if c == "]" and state == _VALUE_OR_CLOSE:
                    pos = self._close(pos)
                elif c == '"':
                    self._open_string(key=False)
                    pos += 1
                elif c == "{" or c == "[":
                    if len(stack) >= _MAX_DEPTH:
                        return self._stop()
                    container: Any = {} if c == "{" else []
                    self._attach(container)
                    stack.append([container, None])
                    self._state = _KEY_OR_CLOSE if c == "{" else _VALUE_OR_CLOSE
                    pos += 1
                else:
                    matcher = _NUMBER_CHARS if c == "-" or "0" <= c <= "9" else _LETTERS
                    m = matcher.match(text, pos)
                    if m is None:
                        return self._stop()
                    token = m.group()
                    if m.end() >= n and token not in _LITERALS:
                        # It may go on (``12`` -> ``125``): held back until something follows it.
                        if len(token) > _MAX_TOKEN:
                            return self._stop()
                        self._pending = text[pos:]
                        return
                    if matcher is _LETTERS:
                        if token not in _LITERALS:
                            return self._stop()
                        value: Any = _LITERALS[token]
                    elif _NUMBER.fullmatch(token):
                        value = json.loads(token)
                    else:
                        return self._stop()
                    self._attach(value)
                    self._state = _AFTER
                    pos = m.end()
        self._pending = ""

    def _stop(self) -> None:
        """The text cannot become JSON here: the preview stays as it is (an open string with the
        prefix that arrived before the fault)."""
        if self._state == _STRING and not self._string_key:
            self._show_open_string()
        self._state = _STOPPED
        self._pending = ""

    def _attach(self, value: Any) -> None:
        """Put a value that has begun into the innermost open container."""
        frame = self._stack[-1]
        container = frame[0]
        if type(container) is dict:
            container[frame[1]] = value
        else:
            container.append(value)

    def _close(self, pos: int) -> int:
        self._stack.pop()
        self._state = _AFTER if self._stack else _DONE
        return pos + 1

    def _open_string(self, key: bool) -> None:
        self._state = _STRING
        self._string_key = key
        self._string = []
        if not key:
            # Shown at once as its (empty) prefix; in a list, remember the slot it fills.
            frame = self._stack[-1]
            if type(frame[0]) is list:
                frame[0].append("")
                frame[1] = len(frame[0]) - 1
            else:
                frame[0][frame[1]] = ""

    def _string_part(self, text: str, pos: int) -> int:
        """Decode what can be decoded of the open string from ``pos``; returns the next position."""
        n = len(text)
        end = _STRING_RUN.match(text, pos).end()  # type: ignore[union-attr]
        closes = end < n and text[end] == '"'
        broken = not closes and end < n and text[end] != "\\"  # a raw control character
        run_end = end
        if not closes and not broken:
            # A high surrogate escape at the very end may pair with a low one still to come.
            m = _HIGH_SURROGATE_END.search(text, pos, end)
            if m is not None:
                run_end = m.start()
        if run_end > pos:
            self._string.append(json.loads('"' + text[pos:run_end] + '"'))
        if broken:
            self._stop()
            return n
        if closes:
            value = "".join(self._string)
            self._string = []
            frame = self._stack[-1]
            if self._string_key:
                frame[1] = value
                self._state = _COLON
            else:
                frame[0][frame[1]] = value  # the key (objects) or the slot (lists) it filled
                self._state = _AFTER
            return end + 1
        rest = text[run_end:]
        if not _HELD.match(rest):
            self._stop()  # an escape JSON does not have
            return n
        self._pending = rest
        return n

    def _show_open_string(self) -> None:
        """Write the open string's prefix into its container (joined once per read)."""
        if len(self._string) > 1:
            self._string = ["".join(self._string)]
        value = self._string[0] if self._string else ""
        frame = self._stack[-1]
        frame[0][frame[1]] = value


def _copy(value: Any) -> Any:
    """A copy of the preview's containers (strings and numbers are immutable and shared)."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) if type(v) in (dict, list) else v for k, v in value.items()}
    if kind is list:
        return [_copy(v) if type(v) in (dict, list) else v for v in value]
    return value
