"""``replay(path)``: a recorded stream, fed again to an accumulator, with the original timing if asked.

Two inputs are accepted, told apart by their content rather than their name:

* a JSONL recording written by ``wrap(client, record=...)`` or ``stream.record(...)`` (header,
  one line per chunk with its offset, footer); a file of bare chunk objects, one per line, is
  read too, without timing;
* a raw SSE body (``data:`` lines, as a provider sent it), decoded the way the ``openai`` SDK
  decodes it: ``data: [DONE]`` ends the stream, and an event whose data carries an ``error``
  object ends it with that error, as the SDK would raise it.

A replay reproduces the calls of the original stream: the same chunks reach an accumulator that
checks them the same way (the recorded request's ``tools``, limits and empty-arguments policy), and
a stream that failed fails again, as :class:`RecordedError`, so its open calls end ``incomplete``.
The error is not raised into the iteration (a replay is for looking at a failure, not for having
it again); read it from :attr:`Replay.error`.

For a timed recording the accumulator's clock is the recorded one: ``replay.tool_calls[0].metrics``
and ``replay.accumulator.metrics`` hold the original timestamps (seconds since the request), and
:attr:`Replay.timeline` places every fragment at its recorded time.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import IO, Any, Literal

from openai.types.chat import ChatCompletion

from ..core import Accumulator, Anomaly, Limits, ResponseAccumulator, ToolCall
from ..errors import RecordedError, RecordingFormatError
from ._contract import read_contract
from ._recorder import FORMAT
from ._responses_contract import read_responses_contract, responses_accumulator
from ._timeline import Timeline, TimelineBuilder

__all__ = ["MAX_OFFSET_MS", "Outcome", "Replay", "replay"]

_LINE_END = re.compile(r"\r\n|\r|\n")
#: The largest offset a recording may hold: a week, in milliseconds. A stream is never open that
#: long; a larger (or negative, or non-finite) offset is damage, and ``timing=True`` would sleep on it.
MAX_OFFSET_MS = 7 * 24 * 3600 * 1000.0


Format = Literal["recording", "chunks", "sse"]
Outcome = Literal["completed", "error", "closed", "truncated"]
"""How a replayed stream ended (:attr:`Replay.outcome`): ``completed``; ``error`` (the SDK raised,
or a raw body's error event); ``closed`` (the caller closed the stream early); ``truncated`` (a
recording without its footer: the process died while it streamed). The footer's first three are
the recorder's (``_recorder.py``)."""


class Replay:
    """A recorded stream, re-fed to an accumulator as you iterate it.

    Iterate it for the chunks (plain dicts, as the provider sent them); or read
    :attr:`tool_calls`, :meth:`get_final_completion` or :attr:`timeline`, which consume the rest
    first. ``timing=True`` sleeps so each chunk comes out at its recorded offset from the start of
    the iteration (the time to first chunk included).
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | IO[str],
        *,
        timing: bool = False,
        accumulator: Accumulator | None = None,
    ) -> None:
        if isinstance(source, (str, os.PathLike)):
            self.source = str(source)
            try:
                text = Path(source).read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise RecordingFormatError(f"{self.source}: not UTF-8 text ({exc.reason})") from None
        else:
            self.source = str(getattr(source, "name", "<stream>"))
            text = source.read()
            if not isinstance(text, str):
                raise RecordingFormatError(f"{self.source}: not a text file (open it in text mode)")
        self.header: dict[str, Any] | None = None
        """The recording's header (request, versions, options); ``None`` for other inputs."""
        self.footer: dict[str, Any] | None = None
        """The recording's footer (outcome, error); ``None`` when absent."""
        self.error: RecordedError | None = None
        """What the original stream ended with, if it failed (or the recording was cut short)."""
        self.chunks: list[Any] = []
        """The recorded chunks, as plain data."""
        self.offsets: list[float | None] = []
        """Each chunk's offset in milliseconds after the request (``None`` when not recorded)."""
        self.format: Format = self._parse(text)
        self.timed = bool(self.offsets) and all(o is not None for o in self.offsets)
        """True when every chunk has a recorded offset."""
        self._timing = timing and self.timed
        self._now = 0.0
        self.accumulator = accumulator if accumulator is not None else self._accumulator()
        """The accumulator fed by this replay."""
        self._builder = TimelineBuilder("ms" if self.timed else "chunk")
        self._timeline: Timeline | None = None
        self._iterator = self._run()

    def __repr__(self) -> str:
        return f"Replay({self.source!r}, format={self.format!r}, chunks={len(self.chunks)})"

    # -- reading the file ----------------------------------------------------------------------

    def _parse(self, text: str) -> Format:
        first = next((line.strip() for line in _LINE_END.split(text) if line.strip()), None)
        if first is None:
            raise RecordingFormatError(f"{self.source}: empty file")
        if first.startswith("{"):
            return self._parse_jsonl(text)
        if first.startswith(("data:", "event:", "id:", "retry:", ":")):
            self._parse_sse(text)
            return "sse"
        raise RecordingFormatError(
            f"{self.source}: neither a toolstitch recording (JSONL) nor an SSE body (data: lines)"
        )

    def _parse_jsonl(self, text: str) -> Format:
        lines = [(n, line) for n, line in enumerate(_LINE_END.split(text), 1) if line.strip()]
        bare = False
        for position, (number, line) in enumerate(lines):
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to read
                if position == len(lines) - 1 and self.chunks:
                    break  # the last line was cut mid-write (the process died): read as no footer
                raise RecordingFormatError(f"{self.source}:{number}: not JSON ({exc})") from None
            if not isinstance(record, dict):
                raise RecordingFormatError(f"{self.source}:{number}: expected a JSON object")
            kind = record.get("type")
            if kind == "header" and position == 0:
                if record.get("format") != FORMAT:
                    raise RecordingFormatError(f"{self.source}:{number}: unknown recording format")
                self.header = record
            elif kind == "chunk" and "chunk" in record:
                self.chunks.append(record["chunk"])
                self.offsets.append(self._offset(record, number))
            elif kind == "footer":
                self._offset(record, number)
                self.footer = record
                break
            elif kind is None and ("choices" in record or record.get("object") == "chat.completion.chunk"):
                bare = True
                self.chunks.append(record)
                self.offsets.append(None)
            else:
                raise RecordingFormatError(f"{self.source}:{number}: unexpected record {line[:60]!r}")
        if self.header is None and not bare:
            raise RecordingFormatError(f"{self.source}: no recording header")
        if self.header is not None:
            error = (self.footer or {}).get("error")
            if self.footer is None:
                self.error = RecordedError(
                    "the recording ends without a footer (the recording process stopped mid-stream)",
                    type_name="TruncatedRecording",
                )
            elif isinstance(error, dict):
                status = error.get("status_code")
                self.error = RecordedError(
                    str(error.get("message", "")),
                    type_name=str(error.get("type", "Exception")),
                    body=error.get("body"),
                    status_code=status if isinstance(status, int) else None,
                )
        return "chunks" if bare else "recording"

    def _offset(self, record: dict[str, Any], number: int) -> float | None:
        """A record's ``offset_ms``: absent is untimed; anything but a number from 0 to
        :data:`MAX_OFFSET_MS` (NaN, infinity, 1e308, a string, ``true``) makes the file unusable."""
        offset = record.get("offset_ms")
        if offset is None:
            return None
        if (
            isinstance(offset, bool)
            or not isinstance(offset, (int, float))
            or not 0 <= offset <= MAX_OFFSET_MS  # False for NaN too
        ):
            raise RecordingFormatError(
                f"{self.source}:{number}: offset_ms must be a number from 0 to {MAX_OFFSET_MS:.0f},"
                f" not {repr(offset)[:40]}"  # repr: a newline in the value stays on one line
            )
        return float(offset)

    def _parse_sse(self, text: str) -> None:
        """Decode as the SDK does: events end at a blank line; ``[DONE]`` and ``error`` end the stream."""
        event: str | None = None
        data: list[str] = []
        line_number = 0
        # The piece after the last line break is not a finished line: like the SDK, never
        # dispatch an event that did not end with a blank line.
        for line_number, line in enumerate(_LINE_END.split(text)[:-1], 1):
            if line:
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
                continue
            if not data and event is None:
                continue
            # The SDK yields the data of any event but an error as a chunk; so does replay.
            payload = "\n".join(data)
            event, data = None, []
            if payload.startswith("[DONE]"):
                return
            try:
                chunk = json.loads(payload)
            except (ValueError, RecursionError):  # RecursionError: nested deeper than json reads
                self.error = RecordedError(
                    f"line {line_number}: SSE data is not JSON: {payload[:80]!r}", type_name="JSONDecodeError"
                )
                return
            if isinstance(chunk, Mapping) and chunk.get("error"):
                error = chunk["error"]
                message = error.get("message") if isinstance(error, Mapping) else None
                self.error = RecordedError(
                    message if isinstance(message, str) and message else "An error occurred during streaming",
                    type_name="APIError",
                    body=error,
                )
                return
            self.chunks.append(chunk)
            self.offsets.append(None)

    def _accumulator(self) -> Accumulator | ResponseAccumulator:
        """An accumulator that checks calls as the recorded stream's did, on the recorded clock."""
        header = self.header or {}
        request = header.get("request") if isinstance(header.get("request"), dict) else {}
        options = header.get("options") if isinstance(header.get("options"), dict) else {}
        assert isinstance(request, dict) and isinstance(options, dict)
        responses = options.get("api") == "responses"  # a Responses API stream: its events, its reader
        # as the live stream read it: what it refused is refused
        contract = read_responses_contract(request) if responses else read_contract(request)
        if contract.unreadable is None and contract.tools == [] and options.get("tools_offered") != "none":
            # no tools recorded, and no marker that none were offered: not known (ts.stitch without
            # tools), so names and schemas go unchecked, as they did live
            contract = replace(contract, tools=None)
        limits = None
        if isinstance(options.get("limits"), dict):
            known = {f.name for f in fields(Limits)}
            try:
                limits = Limits(**{k: v for k, v in options["limits"].items() if k in known})
            except (TypeError, ValueError, OverflowError):
                limits = None  # recorded limits that are not limits: the defaults check instead
        empty: Literal["invalid", "object"] = (
            "object" if options.get("empty_arguments") == "object" else "invalid"
        )
        try:
            if responses:
                return responses_accumulator(
                    contract,
                    limits=limits,
                    empty_arguments=empty,
                    started_at=0.0 if self.timed else None,
                    clock=self._clock if self.timed else None,
                )
            return contract.accumulator(
                limits=limits,
                empty_arguments=empty,
                started_at=0.0 if self.timed else None,
                clock=self._clock if self.timed else None,
                recover_text_tool_calls=options.get("recover_text_tool_calls") is True,
            )
        except Exception as exc:  # fail closed: recorded tools the core cannot take, one clear error
            raise RecordingFormatError(
                f"{self.source}: the recorded request cannot be checked ({type(exc).__name__}: {exc})"
            ) from None

    def _clock(self) -> float:
        return self._now

    # -- feeding -------------------------------------------------------------------------------

    def _run(self) -> Iterator[Any]:
        acc, builder = self.accumulator, self._builder
        start = time.monotonic()
        for number, (chunk, offset) in enumerate(zip(self.chunks, self.offsets, strict=True)):
            position = float(number) if offset is None else offset
            if offset is not None:
                self._now = offset / 1000.0
                if self._timing:
                    delay = start + self._now - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
            events = acc.feed(chunk)
            builder.observe(position, acc, events)
            yield chunk
        end = self._end_position()
        if self.timed:
            self._now = end / 1000.0
        # A stream the user closed early ends as it did live: nothing sealed on the strength of the end.
        acc.end(self.error, closed=self.error is None and self.outcome in ("closed", "truncated"))
        self._timeline = builder.finish(end, acc)

    def _end_position(self) -> float:
        if not self.timed:
            return float(len(self.chunks))
        footer_offset = (self.footer or {}).get("offset_ms")
        last = self.offsets[-1] if self.offsets else None
        if isinstance(footer_offset, (int, float)):
            return max(float(footer_offset), last or 0.0)
        return last or 0.0

    def __iter__(self) -> Iterator[Any]:
        return self._iterator

    def __next__(self) -> Any:
        return next(self._iterator)

    def until_done(self) -> Replay:
        """Feed whatever has not been iterated yet."""
        for _ in self._iterator:
            pass
        return self

    # -- results -------------------------------------------------------------------------------

    @property
    def request(self) -> dict[str, Any]:
        """The recorded request parameters (empty for inputs without a header)."""
        request = (self.header or {}).get("request")
        return request if isinstance(request, dict) else {}

    @property
    def outcome(self) -> str:
        """One of :data:`Outcome`: ``completed``, ``error``, ``closed`` (by the caller), or
        ``truncated`` (no footer). A footer's own word is returned as it is written."""
        if self.footer is not None:
            return str(self.footer.get("outcome", "completed"))
        if self.header is not None:
            return "truncated"
        return "error" if self.error is not None else "completed"

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of choice 0, after the whole recording was fed."""
        return self.until_done().accumulator.tool_calls

    def calls(self, choice: int | None = None) -> list[ToolCall]:
        return self.until_done().accumulator.calls(choice)

    @property
    def anomalies(self) -> list[Anomaly]:
        return self.until_done().accumulator.anomalies

    def get_final_completion(self) -> ChatCompletion:
        """The ``ChatCompletion``; raises ``IncompleteStreamError`` as the original stream did."""
        accumulator = self.until_done().accumulator
        if not isinstance(accumulator, Accumulator):
            raise TypeError("a recorded Responses stream builds a Response, not a ChatCompletion")
        return accumulator.get_final_completion()

    @property
    def timeline(self) -> Timeline:
        """Fragments per call at their recorded positions (see ``_timeline``)."""
        self.until_done()
        assert self._timeline is not None
        return self._timeline


def replay(
    path: str | os.PathLike[str] | IO[str],
    *,
    timing: bool = False,
    accumulator: Accumulator | None = None,
) -> Replay:
    """Replay a JSONL recording or a raw ``.sse`` body into an accumulator.

    ``timing=True`` reproduces the recorded delays while iterating. ``accumulator`` replaces the
    default one (which uses the recorded request's ``tools`` and options, on the recorded clock).
    Raises :class:`RecordingFormatError` when the input is neither format, ``OSError`` when it
    cannot be read.
    """
    return Replay(path, timing=timing, accumulator=accumulator)
