"""A server-sent-events decoder with exactly the semantics of the SDK's ``openai._streaming.SSEDecoder``.

Same events (``event``, ``data``, ``id``, ``retry``), same exceptions at the same point, for every
body and every way of cutting it into reads; only cheaper per event. The rules, as the SDK (3.x)
applies them, which the tests check against the installed release byte for byte:

* A line ends at ``\\r\\n``, ``\\n`` or ``\\r`` (a ``\\r\\n`` split across two reads is one line end).
  What follows the last line end is a line too, once the body ends.
* Every line is decoded as UTF-8 on its own, strictly: invalid bytes raise ``UnicodeDecodeError`` when
  that line is complete (comments included), after the events before it were yielded.
* An empty line dispatches the pending event when it has an ``event``, a ``data`` line (even an empty
  one), a ``retry``, or when an ``id`` was ever seen (the last event id is never reset, so from then
  on every empty line dispatches an event, as the SDK does).
* ``:`` starts a comment. A field is ``name:value`` with one leading space of ``value`` dropped;
  ``data`` lines are joined with ``\\n``; ``event`` sets the type (an empty one is ``None``); an ``id``
  containing NUL is ignored; ``retry`` keeps whatever ``int()`` accepts; other fields are ignored.
* A body cut mid-event dispatches nothing for that event.

A read that is one whole event as servers write it (``event:``, ``data:``, the empty line) is taken in
one decode (:meth:`SSEDecoder._whole`), with the same result as those rules give it.

Events are the SDK's own ``ServerSentEvent`` objects (:class:`Event`, a subclass that is cheaper to
build and to parse), so its ``Stream.__stream__`` consumes them as its own. :mod:`._fast` installs
this decoder only after a self-check on :data:`SAMPLE_BODIES` shows that the installed release
decodes them identically (older releases split lines differently).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

from openai._streaming import ServerSentEvent

from ._json import loads

__all__ = ["SAMPLE_BODIES", "Event", "SSEDecoder"]

_LINE_END = re.compile(b"[\r\n]")


class Event(ServerSentEvent):
    """The SDK's ``ServerSentEvent`` (a subclass: ``isinstance`` holds), built with one call.

    Its ``event``, ``data``, ``id`` and ``retry`` are what the SDK's properties would return for
    the same arguments (an empty ``event`` is ``None``), held in slots that stand in front of those
    properties, so building one costs a third of the SDK's keyword constructor; ``json()`` is
    :func:`._json.loads`, ``json.loads``'s value and errors, parsed faster."""

    __slots__ = ("data", "event", "id", "retry")

    def __init__(self, event: str | None, data: str, id: str | None, retry: int | None) -> None:
        # Slots named as the SDK's read-only properties, which they stand in front of.
        self.event = event or None  # type: ignore[misc]
        self.data = data  # type: ignore[misc]
        self.id = id  # type: ignore[misc]
        self.retry = retry  # type: ignore[misc]

    def json(self) -> Any:
        return loads(self.data)


class SSEDecoder:
    """Decode the bytes of one response into events (``iter_bytes`` / ``aiter_bytes``)."""

    __slots__ = ("_buffer", "_data", "_event", "_last_event_id", "_retry", "_skip_lf")

    def __init__(self) -> None:
        self._buffer = bytearray()  # the start of a line whose end has not arrived yet
        self._skip_lf = False  # the last line ended with \r: a \n right after it is that line end
        self._reset()

    def _reset(self) -> None:
        self._event: str | None = None
        self._data: list[str] = []
        self._last_event_id: str | None = None
        self._retry: int | None = None

    # ------------------------------------------------------------------ lines

    def _lines(self, chunk: Any) -> list[bytes]:
        """The lines that ``chunk`` completes, in order.

        ``bytes`` and ``bytearray`` take the split fast path. Any other read (a ``memoryview`` of
        any format or shape, an ``array``, another buffer) goes through :meth:`_lines_cr`, which
        applies the very operations the SDK's line decoder applies to it (``re.finditer``, indexing,
        ``memoryview`` slices): what the SDK decodes is decoded the same, and what it refuses raises
        the same error; a buffer never reaches ``bytes``-only methods such as ``split``."""
        kind = type(chunk)
        if (kind is not bytes and kind is not bytearray) or self._skip_lf or b"\r" in chunk:
            return self._lines_cr(chunk)
        parts: list[bytes] = chunk.split(b"\n")
        tail = parts.pop()
        if parts and self._buffer:
            self._buffer += parts[0]
            parts[0] = bytes(self._buffer)
            self._buffer.clear()
        if tail:
            self._buffer += tail
        return parts

    def _lines_cr(self, chunk: Any) -> list[bytes]:
        """The general case: any of the three line ends, a \\r\\n possibly split across reads."""
        lines: list[bytes] = []
        start = 0
        for match in _LINE_END.finditer(chunk):
            end = match.start()
            if self._skip_lf and end == start and chunk[end] == 10:
                self._skip_lf = False
                start = end + 1
                continue
            self._skip_lf = False
            self._buffer.extend(memoryview(chunk)[start:end])  # as the SDK does, for any buffer
            lines.append(bytes(self._buffer))
            self._buffer.clear()
            self._skip_lf = chunk[end] == 13
            start = end + 1
        if start < len(chunk):
            self._skip_lf = False
            self._buffer.extend(memoryview(chunk)[start : len(chunk)])
        return lines

    def _rest(self) -> list[bytes]:
        """The last line, when the body ended without a line end."""
        if not self._buffer:
            return []
        line = bytes(self._buffer)
        self._buffer.clear()
        return [line]

    # ------------------------------------------------------------------ events

    def _events(self, lines: list[bytes]) -> Iterator[ServerSentEvent]:
        for raw in lines:
            line = raw.decode("utf-8")
            if not line:
                if not self._event and not self._data and not self._last_event_id and self._retry is None:
                    continue
                data = self._data
                yield Event(
                    self._event,
                    data[0] if len(data) == 1 else "\n".join(data),
                    self._last_event_id,
                    self._retry,
                )
                self._event = None
                self._data = []
                self._retry = None
                continue
            if line[:6] == "data: ":  # the common line, without partition()
                self._data.append(line[6:])
                continue
            if line[:7] == "event: ":  # the Responses API's other line, likewise
                self._event = line[7:]
                continue
            if line[0] == ":":
                continue
            name, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._event = value
            elif name == "id":
                if "\0" not in value:
                    self._last_event_id = value
            elif name == "retry":
                with contextlib.suppress(TypeError, ValueError):
                    self._retry = int(value)

    def _whole(self, chunk: Any) -> Event | None:
        """The event of a read that is one whole event as servers write them (an ``event: X``
        line or none, one ``data: Y`` line, the empty line; ``bytes``, no ``\r``, valid UTF-8),
        when nothing is pending: what the rules above give for it, in one decode and two slices
        instead of a pass over three lines. None for any other read (the rules then read it)."""
        if (
            type(chunk) is not bytes
            or chunk[-2:] != b"\n\n"
            or self._buffer
            or self._skip_lf
            or self._data
            or self._event is not None
            or self._retry is not None
            or b"\r" in chunk
        ):
            return None
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError:
            return None  # the rules raise it, at its line, after the events before it
        event = None
        start = 0
        if text[:7] == "event: ":
            start = text.find("\n") + 1
            event = text[7 : start - 1]
        if text[start : start + 6] != "data: " or text.find("\n", start) != len(text) - 2:
            return None
        return Event(event, text[start + 6 : -2], self._last_event_id, None)

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[ServerSentEvent]:
        """Every event in the bytes ``iterator`` yields (the SDK's ``SSEBytesDecoder`` protocol)."""
        try:
            for chunk in iterator:
                whole = self._whole(chunk)
                if whole is not None:
                    yield whole
                    continue
                yield from self._events(self._lines(chunk))
            yield from self._events(self._rest())
        finally:
            self._reset()

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        """The async twin of :meth:`iter_bytes`."""
        try:
            async for chunk in iterator:
                whole = self._whole(chunk)
                if whole is not None:
                    yield whole
                    continue
                for sse in self._events(self._lines(chunk)):
                    yield sse
            for sse in self._events(self._rest()):
                yield sse
        finally:
            self._reset()


#: Bodies on which a release's decoder must agree with this one (cut at several read sizes) before
#: ``decode="fast"`` uses it: each rule above, and each place older releases split differently.
SAMPLE_BODIES: tuple[bytes, ...] = (
    b'data: {"a": 1}\n\ndata: [DONE]\n\n',
    b'data:{"a":1}\r\n\r\ndata: x\r\rdata: y\rdata: z\n\n',
    b"event: error\ndata: {}\n\n: comment\nid: 7\nretry: 12\n\n\n",
    b"data: a\ndata: b\ndata:\ndata\n\nevent:\ndata: c\nfoo: bar\n\n",
    b"id: a\x00b\nretry: x\nretry: 1_0\n\n:\n\n",
    b"data: \xc3\xa9\xe2\x82\xac\n\ndata: cut mid-event",
    b"data: line \x0b\x0c\x1c\x85 separators\n\ndata: \xe2\x80\xa8 \n\n",
    b"data: ok\n\ndata: \xff\n\ndata: never\n\n",
    b"data: ok\n\ndata: \xe2\x82",
    b"\n\n\r\n\r\r\ndata: late\r\n\r\n",
)
