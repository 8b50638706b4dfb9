"""What both accumulators share: the store of a stream's calls, and everything around reading.

:class:`CallStore` is the common ground of the two sibling accumulators (``_accumulator.py`` for
Chat Completions chunks, ``_responses.py`` for Responses events): the choices and their call
tables, the owner of every call's life (:class:`~._call.CallOwner`, the only writer of a call),
the stream's anomalies (kept once per code and call), its metrics, the one guarded ``feed`` (a
replayed sequence number, re-entry, an input after the end, and the last net that refuses every
open call when toolstitch itself fails), refusing calls, sealing, and ending. Each accumulator adds
its reader (``_read``) and its finished result; neither inherits the other's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel

from ..errors import InBandError, InternalFault, MalformedArguments
from ._anomaly import Anomaly, AnomalyCode
from ._call import ToolCall
from ._clock import now, timings_dict
from ._events import (
    AnomalyRecorded,
    Event,
    StreamEnded,
    ToolCallIncomplete,
    ToolCallInvalid,
    ToolCallReady,
    ToolCallStarted,
)
from ._limits import Limits, retained, sample
from ._owner import CallOwner, Finish
from ._route import CallTable, ensure_ids, open_call
from ._seal import CallChecks
from ._values import show

__all__ = ["CallStore", "StreamMetrics", "fault_note", "ordered"]

_NO_EVENTS: Sequence[Event] = ()
_REENTERED = RuntimeError("feed() or end() was called while a chunk was being read")
_MAX_USAGE = 1 << 20
"""Bytes of one usage value (it replaces the previous one, so it is bounded on its own)."""


class StreamMetrics:
    """Stream-level counts and monotonic timestamps (seconds from ``time.monotonic()``; Unix time
    through ``toolstitch.metrics.wall_clock`` or :meth:`as_dict`)."""

    __slots__ = ("chunks", "ended_at", "first_chunk_at", "first_tool_call_at", "started_at")

    def __init__(self, started_at: float) -> None:
        self.started_at = started_at
        self.first_chunk_at: float | None = None
        self.first_tool_call_at: float | None = None
        self.ended_at: float | None = None
        self.chunks = 0

    @property
    def time_to_first_chunk(self) -> float | None:
        """Seconds from the start (request or accumulator creation) to the first chunk."""
        return None if self.first_chunk_at is None else self.first_chunk_at - self.started_at

    @property
    def time_to_first_tool_call(self) -> float | None:
        """Seconds from the start to the first tool-call header."""
        if self.first_tool_call_at is None:
            return None
        return self.first_tool_call_at - self.started_at

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): the counts, the ``*_at`` instants as Unix time, and the derived
        ``time_to_first_chunk`` and ``time_to_first_tool_call`` (seconds)."""
        return timings_dict(
            {
                "chunks": self.chunks,
                "started_at": self.started_at,
                "first_chunk_at": self.first_chunk_at,
                "first_tool_call_at": self.first_tool_call_at,
                "ended_at": self.ended_at,
                "time_to_first_chunk": self.time_to_first_chunk,
                "time_to_first_tool_call": self.time_to_first_tool_call,
            }
        )


class ChoiceState:
    """Everything accumulated for one choice."""

    __slots__ = (
        "content",
        "duplicated",
        "extra",
        "finish_reason",
        "finish_reasons",
        "first_call",
        "guessed",
        "index",
        "logprobs_content",
        "logprobs_refusal",
        "reasoning",
        "refusal",
        "role",
        "table",
        "verdict",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.role: str | None = None
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: dict[str, list[str]] = {}
        self.extra: dict[str, Any] = {}
        self.logprobs_content: list[Any] | None = None
        self.logprobs_refusal: list[Any] | None = None
        self.finish_reason: str | None = None
        self.finish_reasons: list[str] = []
        self.table = CallTable()
        self.first_call: ToolCall | None = None
        """The choice's first call (by index), fixed when its calls are first sealed."""
        self.duplicated = False
        """Two pieces of one chunk claimed this choice: its calls were refused, and any call it
        opens later is refused too."""
        self.verdict = 0
        """How many of its calls were not ready when a finish last decided it (``_store._decide``)."""
        self.guessed = False
        """A piece without a usable choice index was read as this choice (0): if another choice
        turns up, that guess may have been wrong, and the calls it touched are refused."""


class CallStore:
    """The calls of one stream and what both accumulators do around them (see the module)."""

    _unit = "chunk"
    """What one input is called in messages (``"event"`` for the Responses reader)."""

    def __init__(
        self,
        tools: list[Any] | None,
        limits: Limits | None,
        empty_arguments: Literal["invalid", "object"],
        tool_choice: Any,
        parallel_tool_calls: Any,
        started_at: float | None,
        clock: Callable[[], float] | None,
    ) -> None:
        """The request's parts both APIs read the same way: ``tools`` already in the chat shape,
        read once into a list (each accumulator's own reading), ``tool_choice`` likewise."""
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError("limits must be a toolstitch.Limits")
        limits = limits or Limits()
        checks = CallChecks(
            tools,
            empty_arguments=empty_arguments,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
        )
        self._offers_none = tools == []
        """For check_options: a replay must refuse every call too."""
        self._empty_arguments: Literal["invalid", "object"] = empty_arguments  # for check_options
        self.limits = limits
        self._choices: dict[int, ChoiceState] = {}
        self.anomalies: list[Anomaly] = []
        """Every anomaly of the stream, once per (code, choice, call)."""
        self._anomaly_keys: set[tuple[str, int | None, int | None]] = set()
        self._clock = now if clock is None else clock
        self._owner = CallOwner(limits, self._clock)
        """The one writer of this stream's calls (``_owner.py``)."""
        self._checks = checks
        self.metrics = StreamMetrics(self._clock() if started_at is None else started_at)
        self.ended = False
        self.error: BaseException | None = None
        """The error that ended the input, if it ended with one."""
        self._last_seq: int | None = None
        self.finished: list[int] = []
        """The index of each choice (0 for a response) that a finish decided, in order: the one
        signal the guard of ``wrap(client, guard=True)`` and eager dispatch read (see
        :meth:`_decide`). A consumer that reads no events checks it to learn that an input
        finished a choice, or finished it again with its calls changed."""
        self.dropped_choices = 0
        """Choice pieces dropped because ``Limits.max_choices`` choices were already open."""
        self._usage: Any = None
        self._id: str | None = None
        self._model: str | None = None
        self._created: int | None = None
        """The envelope the made ids are based on (``_ensure_ids``)."""
        self._live: list[ToolCall] = []
        """The calls that were open when :meth:`_open_calls` last looked, and those opened since."""
        self._touched: ToolCall | None = None
        """The call the input being read reached (refused if reading it fails)."""
        self._reading = False
        """True while an input is being read: a ``feed`` or ``end`` from inside it is refused."""
        self._t: float | None = None
        """The current input's time, read from the clock once, when first needed (:meth:`_now`)."""

    @property
    def _checks(self) -> CallChecks:
        """The request's checks: the owner holds them, since it also asks them while calls stream
        (the verdicts that are certain early, ``text/_early.py``)."""
        return self._owner.checks  # type: ignore[return-value]

    @_checks.setter
    def _checks(self, checks: CallChecks) -> None:
        self._owner.checks = checks

    @property
    def check_options(self) -> dict[str, Any]:
        """How this accumulator checks calls, as plain data (what a recording stores so that a
        replay checks the same way): each accumulator says."""
        raise NotImplementedError

    @property
    def finish_reasons(self) -> dict[int, list[str]]:
        """Every finish_reason seen, per choice, in order (``completed`` for a response)."""
        return {i: list(c.finish_reasons) for i, c in sorted(self._choices.items())}

    @property
    def owner(self) -> CallOwner:
        """The owner of this stream's calls: the readers hand it their events."""
        return self._owner

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of choice 0, in index order."""
        return self.calls(0)

    def calls(self, choice: int | None = None) -> list[ToolCall]:
        """The tool calls of one choice (or of all choices when ``choice`` is None), in index order."""
        if choice is not None:
            state = self._choices.get(choice)
            return ordered(state.table.calls) if state else []
        out: list[ToolCall] = []
        for index in sorted(self._choices):
            out.extend(ordered(self._choices[index].table.calls))
        return out

    def feed(self, chunk: Any, seq: int | None = None, *, events: bool = True) -> Sequence[Event]:
        """Take one chunk (a ``ChatCompletionChunk`` or a dict; for the Responses reader, one
        stream event, an SDK event object or a dict) and return what happened.

        ``seq`` is an optional monotonic sequence number (for example the SSE event id): a chunk
        whose number is not greater than the last one seen is a transport replay and is dropped,
        with an anomaly. Without ``seq`` every chunk is taken as new, so a chunk fed twice is
        counted twice (its arguments appended twice): pass ``seq`` when the transport can resend.
        (A Responses event's own ``sequence_number`` is checked besides, by its reader.)

        ``events=False`` is for a consumer that never reads the events (the wrapped stream, unless
        its user asked for them): the state written is the same, but the per-chunk events are not
        built and the scanner is not asked where each call's JSON stands; the result is empty.

        Never raises: a failure inside toolstitch refuses the calls the chunk touched.
        """
        out: list[Event] = []
        try:
            metrics = self.metrics
            if self.ended:
                self._record(
                    Anomaly(AnomalyCode.CHUNK_AFTER_END, f"a {self._unit} arrived after the end", raw=chunk),
                    None,
                    out,
                )
                self._late_input(chunk, out)
                return out if events else _NO_EVENTS
            if seq is not None:
                if self._last_seq is not None and seq <= self._last_seq:
                    self._record(
                        Anomaly(
                            AnomalyCode.REPLAYED_CHUNK,
                            f"{self._unit} #{show(seq)} was already seen; dropped",
                            raw=chunk,
                        ),
                        None,
                        out,
                    )
                    return out if events else _NO_EVENTS
                self._last_seq = seq
            if self._reading:
                # Fed again from inside a read (a caller's clock, a hostile value that calls back):
                # the outer read's view of the stream is no longer what the stream is. Refuse.
                self._refuse(self._open_calls(), _REENTERED, out, chunk)
                return out if events else _NO_EVENTS
            self._t = None
            metrics.chunks += 1
            self._reading = True
            try:
                if metrics.first_chunk_at is None:
                    metrics.first_chunk_at = self._now()
                self._read(chunk, out, events)
            except InBandError as exc:
                # The SDK raises these itself; fed by hand, the chunk ends the input with the error.
                self._reading = False
                self._record(Anomaly(AnomalyCode.IN_BAND_ERROR, str(exc), raw=chunk), None, out)
                self._in_band_error()
                out.extend(self.end(exc))
            except Exception as exc:
                # Which calls the chunk touched is unknown here: every open call may have lost a
                # fragment (rule 9).
                self._refuse(self._open_calls(), exc, out, chunk)
            finally:
                self._reading = False
        except Exception as exc:  # the last net: every finer one failed too
            return self._panic(exc)
        return out if events else _NO_EVENTS

    _unit = "chunk"
    """What one input is called in messages (``"event"`` for the Responses reader)."""

    def _read(self, chunk: Any, out: list[Event], events: bool) -> None:
        """Read one input into the owner's events: each accumulator's reader."""
        raise NotImplementedError

    def _in_band_error(self) -> None:
        """An input carried an in-band error, which ends the stream (a hook for subclasses)."""

    def refuse_open(self, reason: str, code: str = "stream_gap") -> Sequence[Event]:
        """Refuse every call still open: each becomes ``invalid`` with ``reason`` (the owner's fault
        event), and one anomaly with ``code`` is recorded on the stream. Returns the events.

        For what reads the stream around this accumulator and learns that input is missing or
        untrustworthy (a resumed stream with a gap in its sequence numbers, a replayed number with
        other content, another response's events): any open call may have lost a piece, so none of
        them may run (rule 9). Sealed calls keep their status; after :meth:`end`, nothing changes.
        """
        if self.ended:
            return _NO_EVENTS
        out: list[Event] = []
        try:
            self._record(Anomaly(code, reason), None, out)
            self._refuse(self._open_calls(), None, out, None, why=reason)
        except Exception:  # fail closed: whatever is open is refused without the bookkeeping
            for call in self._open_calls():
                self._owner.refuse(call, InternalFault(reason))
        return out

    def _late_input(self, chunk: Any, out: list[Event]) -> None:
        """An input after the end (a hook: the Responses reader tells the guard of a final event)."""

    def _now(self) -> float:
        """The current chunk's time: the clock is read once per chunk, and only when needed."""
        t = self._t
        if t is None:
            t = self._t = self._clock()
        return t

    def _panic(self, exc: BaseException) -> Sequence[Event]:
        """Refuse every open call, record the failure, raise nothing (fail closed, rule 9)."""
        events: list[Event] = []
        try:
            self._refuse(self._open_calls(), exc, events, None)
        except Exception:
            for state in self._choices.values():
                for call in state.table.calls:
                    if call.status == "open":
                        self._owner.refuse(call, InternalFault("toolstitch failed; the call was refused"))
        return events

    def _charge(self, size: int, what: str, choice: int | None, out: list[Event]) -> bool:
        """Take ``size`` bytes from the stream budget (the owner's); False (and a noted anomaly)
        when over it."""
        if self._owner.charge(size):
            return True
        self._record(
            Anomaly(
                AnomalyCode.LIMIT_EXCEEDED,
                f"Limits.max_stream_bytes={self.limits.max_stream_bytes} reached: {what} beyond it "
                "was not kept",
                choice,
            ),
            None,
            out,
        )
        return False

    def _keep(self, value: Any, what: str, choice: int | None, out: list[Event]) -> bool:
        """May ``value`` (an unknown field, usage, logprobs) be kept? Too deep or over budget: no."""
        size = retained(value, self.limits.max_depth)
        if size < 0:
            self._record(
                Anomaly(
                    AnomalyCode.TOO_DEEP,
                    f"{what} was nested deeper than Limits.max_depth={self.limits.max_depth}; dropped",
                    choice,
                ),
                None,
                out,
            )
            return False
        return self._charge(size, what, choice, out)

    def _take_usage(self, usage: Any, out: list[Event]) -> None:
        if not isinstance(usage, (dict, BaseModel)):
            return
        if self._usage is not None:
            self._record(
                Anomaly(AnomalyCode.USAGE_REPEATED, "usage arrived on more than one chunk"), None, out
            )
        size = retained(usage, self.limits.max_depth, stop=_MAX_USAGE)
        if 0 <= size <= _MAX_USAGE:  # replaced, not accumulated: one value is kept at a time
            self._usage = usage
        else:
            self._record(
                Anomaly(AnomalyCode.TOO_DEEP, "usage was nested too deep or too big; dropped"), None, out
            )

    def _open_choice(self, index: int, out: list[Event]) -> ChoiceState | None:
        """A new choice, or None past ``Limits.max_choices`` (the piece is dropped and counted)."""
        if len(self._choices) >= self.limits.max_choices:
            self.dropped_choices += 1
            self._record(
                Anomaly(
                    AnomalyCode.LIMIT_EXCEEDED,
                    f"more than Limits.max_choices={self.limits.max_choices} choices; choice "
                    f"{index} was dropped ({self.dropped_choices} pieces so far)",
                ),
                None,
                out,
            )
            return None
        guessed = self._choices.get(0)
        if guessed is not None and guessed.guessed and index != 0:
            # Pieces without a choice index were read as choice 0 while it was the only one;
            # now there is another, so some of them may have been its: refuse what they reached.
            guessed.guessed = False
            self._damaged(guessed, "pieces without a choice index were read as choice 0", None, out)
        state = self._choices[index] = ChoiceState(index)
        return state

    def _open_call(
        self, state: ChoiceState, index: int, raw: Any, notes: list[Anomaly], out: list[Event]
    ) -> ToolCall | None:
        """Open the call a fragment starts, or None past ``Limits.max_calls_per_choice`` (counted)."""
        table = state.table
        limits = self.limits
        if len(table.calls) > limits.max_calls_per_choice:
            # One refused call is kept as the sample; beyond it only a counter grows.
            table.refused += 1
            self._record(
                Anomaly(
                    AnomalyCode.LIMIT_EXCEEDED,
                    f"more than Limits.max_calls_per_choice={limits.max_calls_per_choice} tool calls; "
                    "further calls were counted, not kept",
                    state.index,
                ),
                None,
                out,
            )
            return None
        t = self._now()
        call = open_call(table, self._owner, state.index, index, t, self._WATCHES_RESENDS)
        self._live.append(call)
        if state.duplicated:
            self._owner.taint(
                call,
                MalformedArguments(
                    "its choice was claimed by two pieces of one chunk, so its text cannot be told apart"
                ),
            )
        if self.metrics.first_tool_call_at is None:
            self.metrics.first_tool_call_at = t
        if state.finish_reason is not None:
            notes.append(
                Anomaly(
                    AnomalyCode.FRAGMENT_AFTER_FINISH,
                    "a new tool call opened after the choice's finish_reason",
                    raw=raw,
                )
            )
        out.append(ToolCallStarted(call))
        return call

    def _damaged(self, state: ChoiceState | None, what: str, raw: Any, out: list[Event]) -> None:
        """A part of a chunk could not be read: the calls it may have carried a fragment for (the
        open calls of ``state``, or of every choice when the choice is unknown) are refused."""
        where = state.index if state is not None else None
        self._record(
            Anomaly(
                AnomalyCode.MALFORMED_CHUNK,
                f"{what}; the open calls it may have belonged to were refused",
                where,
                raw=raw,
            ),
            None,
            out,
        )
        if state is not None:
            calls = [c for c in state.table.calls if c.status == "open"]
        else:
            calls = self._open_calls()
        self._refuse(
            calls,
            None,
            out,
            None,
            why="a part of a chunk that may have carried its text could not be read",
        )

    def _fault(
        self, state: ChoiceState, exc: BaseException, sealing: list[ToolCall] | None, out: list[Event]
    ) -> None:
        """toolstitch failed while reading a choice: refuse its open calls, and those a failed
        finish was sealing (rule 9); the rest of the chunk is still read."""
        self._record(fault_note(exc, "reading a choice", state.index, None), None, out)
        calls = [c for c in state.table.calls if c.status == "open"]
        if sealing:
            calls.extend(sealing)
        self._refuse(calls, None, out, None)

    def _fragment_fault(self, state: ChoiceState, exc: BaseException, raw: Any, out: list[Event]) -> None:
        """toolstitch failed on one tool-call entry: refuse the call it reached (every open call of
        its choice when it reached none yet); the chunk's other entries and choices are still read."""
        self._record(fault_note(exc, "routing a tool-call fragment", state.index, raw), None, out)
        touched = self._touched
        calls = [touched] if touched is not None else [c for c in state.table.calls if c.status == "open"]
        self._refuse(calls, None, out, None)

    def _refuse(
        self,
        calls: list[ToolCall],
        exc: BaseException | None,
        out: list[Event],
        raw: Any,
        why: str | None = None,
    ) -> None:
        """Turn ``calls`` invalid with ``InternalFault``; withdraw a ``ToolCallReady`` of this feed.
        Anomalies an interrupted event left with the owner are recorded on the stream here, so
        that none is later taken for another call's."""
        owner = self._owner
        if owner.notes:
            for note in owner.take_notes():
                self._record(note, None, out)
        if exc is not None:
            self._record(fault_note(exc, "reading a chunk", None, raw), None, out)
        refused: set[int] = set()
        for call in calls:
            if call.status not in ("open", "ready") or id(call) in refused:
                continue
            error = InternalFault(
                (why or "toolstitch failed on a chunk that touched this call")
                + "; its arguments may not be exactly what arrived, so it was refused",
                raw=call.arguments[: self.limits.sample_chars],
            )
            if not owner.refuse(call, error, out):
                continue
            refused.add(id(call))
            self._record(
                Anomaly(AnomalyCode.INTERNAL_ERROR, "the call was refused after an internal failure")
                if why is None
                else Anomaly(AnomalyCode.MALFORMED_CHUNK, f"the call was refused: {why}"),
                call,
                out,
            )
        if refused:
            out[:] = [e for e in out if not (isinstance(e, ToolCallReady) and id(e.call) in refused)]

    def _open_calls(self) -> list[ToolCall]:
        """Every open call, in opening order. Kept as a list pruned on each read, so that asking
        again after the calls were refused costs what is still open, not every call of the stream
        (a hostile chunk can ask once per piece)."""
        live = self._live = [c for c in self._live if c.status == "open"]
        return list(live)

    def _seal_calls(self, state: ChoiceState, calls: list[ToolCall], t: float, out: list[Event]) -> None:
        """Seal the open ``calls`` of ``state`` and check them (``_seal.py``)."""
        first = state.first_call
        if first is None and state.table.calls:
            # Fixed at the first seal: a call that opens later (after the finish) is never "first".
            first = state.first_call = min(state.table.calls, key=_order)
        checks = self._checks
        owner = self._owner
        for call in calls:
            if call.status != "open":
                continue
            news = owner.seal(call, Finish(t, checks, call is first))
            for note in owner.take_notes():
                self._record(note, call, out)
            if call.ready:
                out.append(ToolCallReady(call))
            elif call.error is not None and news:
                out.append(ToolCallInvalid(call, call.error))

    def _decide(self, state: ChoiceState, first: bool) -> None:
        """Tell ``finished`` that a finish decided ``state`` (the one signal the guard and eager
        dispatch read): the first finish, and any later one that finds its calls in another state
        than the last time (a late fragment refused a call, a call opened after the finish).
        Bounded: each call changes state a few times at most, however many finishes arrive."""
        calls = state.table.calls
        verdict = sum(1 for c in calls if c.status != "ready") if calls else 0
        if first or verdict != state.verdict:
            state.verdict = verdict
            self.finished.append(state.index)

    def _record(self, note: Anomaly, call: ToolCall | None, out: list[Event]) -> None:
        """Keep an anomaly once per (code, choice, call), on the call and on the stream.

        ``raw`` is kept as sent when it is small, else as a bounded sample (``Limits.sample_chars``):
        an anomaly must not keep 50 MB of a refused fragment alive.
        """
        if call is not None:
            key: tuple[str, int | None, int | None] = (note.code, call.choice, call.slot)
        else:
            key = (note.code, note.choice, None)
        if key in self._anomaly_keys:
            return
        raw = note.raw
        if (raw is not None and type(raw) is not str) or (
            type(raw) is str and len(raw) > self.limits.sample_chars
        ):
            raw = sample(raw, self.limits.sample_chars)
        if call is not None and (note.choice != call.choice or note.call_index != call.index):
            note = replace(note, choice=call.choice, call_index=call.index, raw=raw)
        elif raw is not note.raw:
            note = replace(note, raw=raw)
        if call is not None:
            self._owner.annotate(call, note)
        self._anomaly_keys.add(key)
        self.anomalies.append(note)
        out.append(AnomalyRecorded(note))

    # -- ending ------------------------------------------------------------------------------

    def end(self, error: BaseException | None = None, *, closed: bool = False) -> Sequence[Event]:
        """The input is over (``error`` when it failed). Open calls become ``incomplete``.

        Idempotent. A call opened after its choice had already finished is sealed here when the
        stream ended cleanly (the provider said the choice was done); on an error it stays
        incomplete. ``closed=True`` says the consumer closed the input before it ended: not a
        failure (``error`` stays None, finished choices still build a completion), but not a clean
        end either, so nothing is sealed on the strength of the end: more could have followed.
        Linear in choices and calls.
        """
        if self.ended:
            return _NO_EVENTS
        events: list[Event] = []
        if self._reading:
            # Ended from inside a read (a caller's clock): nothing is sealed on a half-read chunk.
            self._refuse(self._open_calls(), _REENTERED, events, None)
        self.ended = True
        self.error = error
        open_before = self._open_calls()
        try:
            t = self._clock()
            self.metrics.ended_at = t
            self._end(error, closed, t, events)
        except Exception as exc:
            # Fail closed: whatever this end sealed is withdrawn; what is still open is incomplete.
            with contextlib.suppress(Exception):  # the plain loop below still runs
                self._refuse([c for c in open_before if c.status == "ready"], exc, events, None)
            for call in open_before:
                if call.status == "ready":
                    self._owner.refuse(call, InternalFault("toolstitch failed while sealing; refused"))
                elif self._owner.end(call, "the stream ended, and toolstitch failed while sealing"):
                    events.append(ToolCallIncomplete(call))
        events.append(StreamEnded(error, self._usage))
        return events

    def _end(self, error: BaseException | None, closed: bool, t: float, out: list[Event]) -> None:
        """Each API's own end: what happens to the calls still open (a hook)."""
        for call in self._open_calls():
            self._owner.end(call, "the input ended before the call was sealed", t)
            out.append(ToolCallIncomplete(call))

    _WATCHES_RESENDS = True
    """Is each new call watched for cumulative resends from its first text (``_route.argument_text``)?
    Chat Completions: yes. The Responses API states each call's text whole instead: no."""

    _REPLACES_UNSENDABLE_IDS = True
    """Does a call whose id holds a lone surrogate get a made id? Chat Completions: yes (the message
    is the server's words read back, and no request can carry such an id). The Responses API: no,
    its output item keeps the ``call_id`` and an output must answer that item, so both are written
    as the request can carry them (``core.valid_unicode``)."""

    def _ensure_ids(self, state: ChoiceState, calls: list[ToolCall]) -> None:
        """Give every call a usable, unique id (``_route.ensure_ids``); the repairs are recorded."""
        basis = f"{self._id or ''}:{self._created}:{self._model}:{state.index}"
        for call, made, note in ensure_ids(calls, basis, self._REPLACES_UNSENDABLE_IDS):
            self._owner.give_id(call, made)
            self._record(note, call, [])


def fault_note(exc: BaseException, doing: str, choice: int | None, raw: Any) -> Anomaly:
    """The ``internal_error`` anomaly for an exception caught while ``doing`` something."""
    try:
        why = show(str(exc), 200)
    except Exception:
        why = "(no message)"
    return Anomaly(
        AnomalyCode.INTERNAL_ERROR,
        f"toolstitch failed while {doing} ({type(exc).__name__}: {why}); the calls it touched were "
        "refused, the rest of the input was read",
        choice,
        raw=raw,
    )


def _order(call: ToolCall) -> tuple[int, int]:
    return (call.index, call.slot)


def ordered(calls: list[ToolCall]) -> list[ToolCall]:
    """Calls in message order: by index, then by opening order."""
    return sorted(calls, key=_order)
