"""An incremental scanner for streamed JSON argument text.

Rule 2 of docs/design.md: append, then parse once. A prefix of JSON is not JSON, so nothing here
*parses*; the scanner only tracks enough state (bracket stack, inside-a-string, escape, pending
``\\uXXXX`` digits) to answer two questions early, while the text is still arriving:

* can this text still become valid JSON? (``error`` is set the moment it cannot), and
* is the top-level value already complete? (``complete`` is set at its closing bracket).

Each fragment is scanned exactly once, from where the previous one stopped: the total cost is linear
in the argument bytes, never quadratic. The scanner is deliberately conservative: it reports an error
only for text that certainly cannot become valid JSON (a wrong closing bracket, a bad escape, a raw
control character inside a string, a value that does not start with ``{``, text after the complete
value). Anything subtler is left to the strict parser that runs once, at seal.
"""

from __future__ import annotations

import re

__all__ = ["JSONScanner"]

# Outside strings only these characters change the scanner's state.
_STRUCTURAL = re.compile(r'[{}\[\]"]')
# Inside strings: a run of characters that change nothing (anything but the closing quote, a
# backslash or a raw control character) and of whole, valid escapes.
_STRING_BODY = re.compile(r'(?:[^"\\\x00-\x1f]+|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
_BODY = _STRING_BODY.match
_CUT_HEX = {left: "\\u" + "0" * (4 - left) for left in (1, 2, 3, 4)}
"""A ``\\u`` escape with ``left`` hex digits still to come, as a whole escape needs its start."""
_NON_WHITESPACE = re.compile(r"[^ \t\r\n]")
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = frozenset('"\\/bfnrt')
_CLOSER_OF = {"{": "}", "[": "]"}


class JSONScanner:
    """Tracks the lexical state of one call's argument text across fragments."""

    __slots__ = (
        "_escape",
        "_hex_left",
        "_in_string",
        "_stack",
        "complete",
        "complete_at",
        "error",
        "error_at",
        "offset",
    )

    def __init__(self) -> None:
        self._stack: list[str] = []
        self._in_string = False
        self._escape = False
        self._hex_left = 0
        self.offset = 0
        """Characters scanned so far."""
        self.complete = False
        """True once the top-level value has closed (and stays true unless text follows it)."""
        self.complete_at: int | None = None
        """Character offset just after the top-level value's closing bracket."""
        self.error: str | None = None
        """Why the text can no longer become valid JSON; ``None`` while it still can."""
        self.error_at: int | None = None

    @property
    def in_string(self) -> bool:
        """True while inside a string (an escape may be pending)."""
        return self._in_string

    @property
    def in_array(self) -> bool:
        """True when the innermost open container is an array."""
        return bool(self._stack) and self._stack[-1] == "]"

    @property
    def started(self) -> bool:
        """True once the opening ``{`` has been seen."""
        return bool(self._stack) or self.complete

    def _fail(self, message: str, at: int) -> None:
        self.error = message
        self.error_at = at
        self.complete = False
        # Nothing after an error is read: the state stops here, and no later fragment is told to be
        # inside a string on the strength of it (``feed``'s None).
        self._in_string = False

    def feed(self, text: str) -> bool | None:
        """Scan ``text``, the next fragment. True when it closed the top-level value or made the
        text impossible as JSON (what the owner announces); after an error, text is only counted.

        None when the whole fragment stayed inside one string, read to its end with no escape
        left open (plain characters and whole escapes: most fragments of a long argument). That
        is the one reading of where a string ends: the owner lets the early check take it too
        (``EarlyCheck.free``) rather than read the fragment again."""
        if self._in_string:
            # Inside a string, plain characters and whole escapes change nothing but the offset:
            # most fragments of a long argument. Text without a backslash is told by two scans
            # and a test in C; only text with an escape (or after one the last fragment cut, its
            # start put back) asks the regex, which costs several times more per call here.
            # (``match``, never ``fullmatch``: the pattern's nested repetition would backtrack
            # without end on a miss.)
            if self._escape or self._hex_left or "\\" in text:
                body = text
                if self._escape:
                    body = "\\" + text
                elif self._hex_left:
                    body = _CUT_HEX[self._hex_left] + text
                if _BODY(body).end() == len(body):  # type: ignore[union-attr]  # matches ""
                    self._escape = False
                    self._hex_left = 0
                    self.offset += len(text)
                    return None
            elif '"' not in text and text.isprintable():
                self.offset += len(text)
                return None
        if self.error is not None or not text:
            self.offset += len(text)
            return False
        was_complete = self.complete
        self._scan(text)
        return self.complete is not was_complete or self.error is not None

    def _scan(self, text: str) -> None:
        base = self.offset
        self.offset += len(text)
        i = 0
        n = len(text)
        stack = self._stack
        while i < n:
            if self._in_string:
                if self._hex_left:
                    take = min(self._hex_left, n - i)
                    for j in range(i, i + take):
                        if text[j] not in _HEX:
                            self._fail("invalid \\u escape in a string", base + j)
                            return
                    self._hex_left -= take
                    i += take
                    continue
                if self._escape:
                    c = text[i]
                    self._escape = False
                    if c == "u":
                        self._hex_left = 4
                    elif c not in _SIMPLE_ESCAPES:
                        self._fail(f"invalid escape \\{c} in a string", base + i)
                        return
                    i += 1
                    continue
                # A run of plain characters and whole escapes, in one C call; it stops at the
                # closing quote, at an escape the fragment cuts (or that is not valid), or at a
                # raw control character.
                i = _STRING_BODY.match(text, i).end()  # type: ignore[union-attr]  # matches ""
                if i == n:
                    return
                c = text[i]
                if c == '"':
                    self._in_string = False
                    i += 1
                elif c != "\\":
                    self._fail("raw control character inside a string", base + i)
                    return
                elif i + 1 == n:
                    self._escape = True
                    return
                elif text[i + 1] != "u":
                    self._fail(f"invalid escape \\{text[i + 1]} in a string", base + i + 1)
                    return
                else:
                    # ``\u`` with fewer than four hex digits: cut by the fragment, or not hex.
                    for j in range(i + 2, n):
                        if text[j] not in _HEX:
                            self._fail("invalid \\u escape in a string", base + j)
                            return
                    self._hex_left = 4 - (n - i - 2)
                    return
            elif self.complete:
                m = _NON_WHITESPACE.search(text, i)
                if m is not None:
                    self._fail("text after the complete JSON value", base + m.start())
                return
            elif not stack:
                m = _NON_WHITESPACE.search(text, i)
                if m is None:
                    return
                if m.group() != "{":
                    self._fail("arguments must be a JSON object starting with '{'", base + m.start())
                    return
                stack.append("}")
                i = m.end()
            else:
                m = _STRUCTURAL.search(text, i)
                if m is None:
                    return
                c = m.group()
                i = m.end()
                if c == '"':
                    self._in_string = True
                elif c in _CLOSER_OF:
                    stack.append(_CLOSER_OF[c])
                elif c != stack[-1]:
                    self._fail(f"unexpected {c!r}; expected {stack[-1]!r}", base + i - 1)
                    return
                else:
                    stack.pop()
                    if not stack:
                        self.complete = True
                        self.complete_at = base + i
