"""The sans-I/O core: chunks in, events out, one ``ChatCompletion`` at the end.

``Accumulator`` knows nothing of HTTP, threads or asyncio (in the manner of ``h11``): the sync and
async stream wrappers, replay, and tests all drive the same object with :meth:`Accumulator.feed`.

The rules it enforces (see ``docs/design.md``):

1. Calls are keyed by ``index``: ``_read.py`` reads each chunk (every quirk of shape), ``_route.py``
   finds each fragment's call (every quirk of routing and identity, id synthesis). What stays here
   needs the stream's state across chunks: a finish_reason repeated or missing, a role or usage
   repeated, content after the finish, and the choice-level policies (text recovery, limits).
2. Argument text is appended and parsed once, at seal; the scanner reads it only when asked.
3. ``""``, a missing ``arguments`` and a missing ``function`` add nothing; ``""`` is never ``{}``
   unless ``empty_arguments="object"`` says so, which is recorded as an anomaly.
4. A call is ``ready`` only after its choice's ``finish_reason``, a strict parse, and (when the
   request's ``tools`` are known) a schema check. Ending early makes open calls ``incomplete``.
5. ``feed``, ``end`` and event building never raise on bad input: a chunk it cannot use becomes an
   anomaly. An exception inside toolstitch while a chunk is read refuses every call that chunk
   touched (``InternalFault``, never ``ready``), records ``internal_error``, and the rest of the
   chunk (other choices, the ``finish_reason``) is still read (rule 9, fail closed).
6. Unknown provider fields (``reasoning_content``, ``reasoning``, ``extra_content`` …) survive into
   the final message.
7. Per chunk it reads fields and appends strings; the ``ChatCompletion`` is built once, at the end.
8. Memory is bounded by :class:`Limits` (per call, per choice, choices, the whole stream) and
   every pass over choices and calls is linear.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, replace
from typing import Any, Literal

from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ValidationError

from ..errors import InBandError, IncompleteStreamError, InternalFault, LimitExceeded, ToolCallError
from ._anomaly import Anomaly, AnomalyCode
from ._call import ToolCall, push, text_size
from ._clock import now, timings_dict
from ._events import (
    AnomalyRecorded,
    ChoiceFinished,
    Event,
    ReasoningDelta,
    StreamEnded,
    ToolCallIncomplete,
    ToolCallInvalid,
    ToolCallReady,
    content_delta,
)
from ._limits import Limits, retained, sample
from ._read import ChoiceState, read_chunk, read_fragment
from ._recover import TextToolCallRecovery
from ._route import ensure_ids
from ._seal import CallChecks
from ._serialisable import serialisable
from ._values import MAX_LABEL, REASONING_FIELDS, opt_int, opt_str, show

__all__ = ["Accumulator", "StreamMetrics"]

_NO_EVENTS: Sequence[Event] = ()
_ENVELOPE_FIELDS = ("id", "model", "created", "object", "system_fingerprint", "service_tier")


_REENTERED = RuntimeError("feed() or end() was called while a chunk was being read")
_MAX_USAGE = 1 << 20
"""Bytes of one usage value (it replaces the previous one, so it is bounded on its own)."""
_MAX_FINISH_REASONS = 16
"""How many finish_reasons of one choice are kept (a hostile server can send one per chunk)."""


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


def _dump(value: Any) -> Any:
    """Plain data from an SDK model (once, at the end), or the value itself."""
    # The other to-plain helpers (history's to_plain, recording's plain, the loop's _plain) live in
    # layers above this one and do more (copies, JSON-safe text, dicts only); this is the core's one.
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    return value


class Accumulator:
    """Merges streamed chunks into finished tool calls and one ``ChatCompletion``.

    ``tools`` are the request's tools (dicts as sent to the SDK, from any iterable: it is read once,
    into a list); when given, sealed calls are checked against them: an unknown name or a schema
    failure makes the call ``invalid`` (an empty list offers no tool, so every call is ``invalid``
    with ``UnknownTool``; ``None``, the default, means the tools are not known: names go
    unchecked). ``tool_choice`` and ``parallel_tool_calls`` are the request's values: a call that
    breaks them (``tool_choice="none"``, a forced function, every call after the first of a choice
    under ``parallel_tool_calls=False``) is ``invalid`` with ``ContractViolation``.
    ``empty_arguments="object"`` reads ``""`` arguments as ``{}`` (recorded as an anomaly); the
    default ``"invalid"`` refuses them, since a missing value is not an empty one, except for a tool
    whose schema declares no properties, where ``""`` and ``{}`` cannot differ (also recorded).
    ``recover_text_tool_calls=True`` reads tool calls that a server wrote as text in ``content``
    (``<tool_call>{...}</tool_call>`` and similar) once the choice finishes; see ``_recover.py``.
    ``clock`` replaces ``time.monotonic`` for every timestamp: replay passes the recorded times, so
    the metrics of a replayed stream are those of the original.
    """

    def __init__(
        self,
        tools: Iterable[Any] | None = None,
        *,
        limits: Limits | None = None,
        empty_arguments: Literal["invalid", "object"] = "invalid",
        started_at: float | None = None,
        clock: Callable[[], float] | None = None,
        recover_text_tool_calls: bool = False,
        tool_choice: Any = None,
        parallel_tool_calls: Any = None,
    ) -> None:
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError("limits must be a toolstitch.Limits")
        self.limits = limits = limits or Limits()
        # Read once, whatever the iterable (a generator, dict.values(), map): the same list is
        # checked against here and by text recovery.
        tool_list = list(tools) if tools is not None else None
        self._checks = CallChecks(
            tool_list,
            empty_arguments=empty_arguments,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
        )
        self._recovery = TextToolCallRecovery(tool_list) if recover_text_tool_calls else None
        self._offers_none = tool_list == []  # for check_options: a replay must refuse every call too
        self._empty_arguments: Literal["invalid", "object"] = empty_arguments  # for check_options
        self._choices: dict[int, ChoiceState] = {}
        self.anomalies: list[Anomaly] = []
        """Every anomaly of the stream, once per (code, choice, call)."""
        self._anomaly_keys: set[tuple[str, int | None, int | None]] = set()
        self._clock = now if clock is None else clock
        self.metrics = StreamMetrics(self._clock() if started_at is None else started_at)
        self.ended = False
        self.error: BaseException | None = None
        """The error that ended the input, if it ended with one."""
        self._last_seq: int | None = None
        self._bytes_left = limits.max_stream_bytes
        self.finished: list[int] = []
        """The index of each choice that received its ``finish_reason``, in the order they did:
        what a consumer that reads no events (``feed(..., events=False)``) checks to learn that a
        chunk finished a choice (the guard of ``wrap(client, guard=True)`` does)."""
        self.dropped_choices = 0
        """Choice pieces dropped because ``Limits.max_choices`` choices were already open."""
        # Envelope fields: the first non-empty value wins, except usage (the last wins).
        self._id: str | None = None
        self._model: str | None = None
        self._created: int | None = None
        self._object: str | None = None
        self._system_fingerprint: str | None = None
        self._service_tier: str | None = None
        self._usage: Any = None
        self._extra: dict[str, Any] = {}
        self._envelope_unset: tuple[str, ...] = _ENVELOPE_FIELDS
        """The envelope fields not kept yet (the first usable value wins): read while any is left."""
        self._live: list[ToolCall] = []
        """The calls that were open when :meth:`_open_calls` last looked, and those opened since."""
        self._touched: ToolCall | None = None
        """The call the tool-call entry being read reached (refused if reading it fails)."""
        self._reading = False
        """True while a chunk is being read: a ``feed`` or ``end`` from inside it is refused."""
        self._t: float | None = None
        """The current chunk's time, read from the clock once, when first needed (:meth:`_now`)."""

    # -- reading -----------------------------------------------------------------------------

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of choice 0, in index order."""
        return self.calls(0)

    def calls(self, choice: int | None = None) -> list[ToolCall]:
        """The tool calls of one choice (or of all choices when ``choice`` is None), in index order."""
        if choice is not None:
            state = self._choices.get(choice)
            return _ordered(state.table.calls) if state else []
        out: list[ToolCall] = []
        for index in sorted(self._choices):
            out.extend(_ordered(self._choices[index].table.calls))
        return out

    @property
    def finish_reasons(self) -> dict[int, list[str]]:
        """Every finish_reason seen, per choice, in order."""
        return {i: list(c.finish_reasons) for i, c in sorted(self._choices.items())}

    @property
    def usage(self) -> Any:
        """The last usage seen (providers that send cumulative usage end with the total)."""
        return self._usage

    @property
    def check_options(self) -> dict[str, Any]:
        """How this accumulator checks calls, as plain data (limits, ``empty_arguments``,
        ``recover_text_tool_calls``, and ``tools_offered: "none"`` when the tools are an empty list):
        what a recording stores so that a replay checks the same way. The recorded request holds
        the tools themselves; the marker tells "offered none" from "not known" (no request)."""
        options: dict[str, Any] = {
            "limits": asdict(self.limits),
            "empty_arguments": self._empty_arguments,
            "recover_text_tool_calls": self._recovery is not None,
        }
        if self._offers_none:
            options["tools_offered"] = "none"
        return options

    # -- feeding -----------------------------------------------------------------------------

    def feed(self, chunk: Any, seq: int | None = None, *, events: bool = True) -> Sequence[Event]:
        """Take one chunk (a ``ChatCompletionChunk`` or a dict) and return what happened.

        ``seq`` is an optional monotonic sequence number (for example the SSE event id): a chunk
        whose number is not greater than the last one seen is a transport replay and is dropped,
        with an anomaly. Without ``seq`` every chunk is taken as new, so a chunk fed twice is
        counted twice (its arguments appended twice): pass ``seq`` when the transport can resend.

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

    _read = read_chunk
    """Read one input: the one reader of chunks (``_read.py``), called as a method (no frame of
    its own). The Responses API's accumulator reads its events here instead; everything around it
    is this class's."""

    def _in_band_error(self) -> None:
        """An input carried an in-band error, which ends the stream (a hook for subclasses)."""

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
                    if call._status == "open":
                        call._invalidate(InternalFault("toolstitch failed; the call was refused"))
        return events

    def _charge(self, size: int, what: str, choice: int | None, events: list[Event]) -> bool:
        """Take ``size`` bytes from the stream budget; False (and a noted anomaly) when over it."""
        left = self._bytes_left - size
        if left < 0:
            self._record(
                Anomaly(
                    AnomalyCode.LIMIT_EXCEEDED,
                    f"Limits.max_stream_bytes={self.limits.max_stream_bytes} reached: {what} beyond it "
                    "was not kept",
                    choice,
                ),
                None,
                events,
            )
            return False
        self._bytes_left = left
        return True

    @staticmethod
    def _is_limit(error: ToolCallError) -> bool:
        return isinstance(error, LimitExceeded)

    def _keep(self, value: Any, what: str, choice: int | None, events: list[Event]) -> bool:
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
                events,
            )
            return False
        return self._charge(size, what, choice, events)

    def _take_envelope(self, fields: dict[str, Any]) -> None:
        """Keep the first usable value of each envelope field still unset (a wrong type reads as
        absent); once all are kept, a chunk's envelope is not read at all."""
        get = fields.get
        kept_any = False
        for key in self._envelope_unset:
            value = get(key)
            if value is None:
                continue
            kept = opt_int(value) if key == "created" else opt_str(value)
            if kept is not None:
                setattr(self, "_" + key, kept)
                kept_any = True
        if kept_any:
            self._envelope_unset = tuple(k for k in _ENVELOPE_FIELDS if getattr(self, "_" + k) is None)

    def _take_usage(self, usage: Any, events: list[Event]) -> None:
        if not isinstance(usage, (dict, BaseModel)):
            return
        if self._usage is not None:
            self._record(
                Anomaly(AnomalyCode.USAGE_REPEATED, "usage arrived on more than one chunk"), None, events
            )
        size = retained(usage, self.limits.max_depth, stop=_MAX_USAGE)
        if 0 <= size <= _MAX_USAGE:  # replaced, not accumulated: one value is kept at a time
            self._usage = usage
        else:
            self._record(
                Anomaly(AnomalyCode.TOO_DEEP, "usage was nested too deep or too big; dropped"), None, events
            )

    def _take_chunk_fields(self, unknown: dict[str, Any], events: list[Event]) -> None:
        """Unknown chunk fields, kept for the final completion (rule 6), within the limits."""
        for key, value in unknown.items():
            if self._keep(value, f"the chunk field {show(key)}", None, events):
                self._extra[key] = value

    def _open_choice(self, index: int, events: list[Event]) -> ChoiceState | None:
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
                events,
            )
            return None
        guessed = self._choices.get(0)
        if guessed is not None and guessed.guessed and index != 0:
            # Pieces without a choice index were read as choice 0 while it was the only one;
            # now there is another, so some of them may have been its: refuse what they reached.
            guessed.guessed = False
            self._damaged(guessed, "pieces without a choice index were read as choice 0", None, events)
        state = self._choices[index] = ChoiceState(index)
        return state

    def _damaged(self, state: ChoiceState | None, what: str, raw: Any, events: list[Event]) -> None:
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
            events,
        )
        if state is not None:
            calls = [c for c in state.table.calls if c._status == "open"]
        else:
            calls = self._open_calls()
        self._refuse(
            calls,
            None,
            events,
            None,
            why="a part of a chunk that may have carried its text could not be read",
        )

    def _duplicate_choice(self, index: int, raw: Any, events: list[Event]) -> None:
        """A second piece for choice ``index`` in one chunk: every call of that choice is refused,
        sealed ones included (a completion's two "choice 0" must not merge into one)."""
        self._record(
            Anomaly(
                AnomalyCode.MALFORMED_CHUNK,
                f"two pieces of one chunk claim choice {index}; the second was dropped and the "
                "choice's calls refused",
                index,
                raw=raw,
            ),
            None,
            events,
        )
        state = self._choices.get(index)
        if state is not None:
            why = "two pieces of one chunk claimed its choice, so its text cannot be told apart"
            self._refuse(list(state.table.calls), None, events, None, why=why)
            state.duplicated = True

    def _fault(
        self, state: ChoiceState, exc: BaseException, sealing: list[ToolCall] | None, events: list[Event]
    ) -> None:
        """toolstitch failed while reading a choice: refuse its open calls, and those a failed
        finish was sealing (rule 9); the rest of the chunk is still read."""
        self._record(_fault(exc, "reading a choice", state.index, None), None, events)
        calls = [c for c in state.table.calls if c._status == "open"]
        if sealing:
            calls.extend(sealing)
        self._refuse(calls, None, events, None)

    def _fragment_fault(self, state: ChoiceState, exc: BaseException, raw: Any, events: list[Event]) -> None:
        """toolstitch failed on one tool-call entry: refuse the call it reached (every open call of
        its choice when it reached none yet); the chunk's other entries and choices are still read."""
        self._record(_fault(exc, "routing a tool-call fragment", state.index, raw), None, events)
        touched = self._touched
        calls = [touched] if touched is not None else [c for c in state.table.calls if c._status == "open"]
        self._refuse(calls, None, events, None)

    def _refuse(
        self,
        calls: list[ToolCall],
        exc: BaseException | None,
        events: list[Event],
        raw: Any,
        why: str | None = None,
    ) -> None:
        """Turn ``calls`` invalid with ``InternalFault``; withdraw a ``ToolCallReady`` of this feed."""
        if exc is not None:
            self._record(_fault(exc, "reading a chunk", None, raw), None, events)
        refused: set[int] = set()
        for call in calls:
            if call._status not in ("open", "ready") or id(call) in refused:
                continue
            if call._status == "open":
                call._metrics.sealed_at = self._clock()
            error = InternalFault(
                (why or "toolstitch failed on a chunk that touched this call")
                + "; its arguments may not be exactly what arrived, so it was refused",
                raw=call.arguments,
            )
            call._invalidate(error)
            refused.add(id(call))
            events.append(ToolCallInvalid(call, error))
            self._record(
                Anomaly(AnomalyCode.INTERNAL_ERROR, "the call was refused after an internal failure")
                if why is None
                else Anomaly(AnomalyCode.MALFORMED_CHUNK, f"the call was refused: {why}"),
                call,
                events,
            )
        if refused:
            events[:] = [e for e in events if not (isinstance(e, ToolCallReady) and id(e.call) in refused)]

    def _open_calls(self) -> list[ToolCall]:
        """Every open call, in opening order. Kept as a list pruned on each read, so that asking
        again after the calls were refused costs what is still open, not every call of the stream
        (a hostile chunk can ask once per piece)."""
        live = self._live = [c for c in self._live if c._status == "open"]
        return list(live)

    def _take_role(self, state: ChoiceState, role: Any, events: list[Event]) -> None:
        if type(role) is not str or len(role) > MAX_LABEL:
            self._record(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, f"role was {show(role)}; skipped", state.index),
                None,
                events,
            )
        elif state.role is not None:
            self._record(
                Anomaly(AnomalyCode.ROLE_REPEATED, "role repeated on a later delta", state.index),
                None,
                events,
            )
        elif role:
            state.role = role

    def _take_content(self, state: ChoiceState, text: str, events: list[Event], want: bool) -> None:
        index = state.index
        if state.finish_reason is not None:
            self._record(
                Anomaly(AnomalyCode.FRAGMENT_AFTER_FINISH, "content after finish_reason", index), None, events
            )
        if self._charge(text_size(text), "content", index, events):
            push(state.content, text)
        if want:
            events.append(content_delta(index, text))

    def _take_delta_fields(self, state: ChoiceState, extra: dict[str, Any], events: list[Event]) -> None:
        """Unknown delta fields that belong to the message: reasoning text (concatenated, Q29) and
        structured values (lists extended, objects last-wins). Scalars beside them are per-chunk
        labels (Groq's ``channel: "analysis"``, Mistral's ``index`` inside the delta, Together's
        ``token_id``): concatenated or replayed in history they would be garbage, and OpenAI
        rejects unknown message fields."""
        index = state.index
        for key, value in extra.items():
            if type(value) is str:
                if not value or key not in REASONING_FIELDS:
                    continue
                if self._charge(text_size(value), "reasoning text", index, events):
                    parts = state.reasoning.get(key)
                    if parts is None:
                        parts = state.reasoning[key] = []
                    push(parts, value)
                events.append(ReasoningDelta(index, key, value))
            elif not isinstance(value, (dict, list, BaseModel)) or not self._keep(
                value, f"the delta field {show(key)}", index, events
            ):
                continue
            elif type(value) is list:
                existing = state.extra.get(key)
                if isinstance(existing, list):
                    existing.extend(value)
                else:
                    state.extra[key] = list(value)
            else:
                state.extra[key] = value

    def _take_logprobs(self, state: ChoiceState, logprobs: Any, events: list[Event]) -> None:
        index = state.index
        for field in ("content", "refusal"):
            items = logprobs.get(field) if type(logprobs) is dict else getattr(logprobs, field, None)
            if not items:
                continue
            if type(items) is not list:
                self._record(
                    Anomaly(
                        AnomalyCode.MALFORMED_CHUNK,
                        f"logprobs.{field} was a {type(items).__name__}, not a list; skipped",
                        index,
                    ),
                    None,
                    events,
                )
                continue
            if not self._keep(items, f"logprobs.{field}", index, events):
                continue
            if field == "content":
                if state.logprobs_content is None:
                    state.logprobs_content = []
                state.logprobs_content.extend(items)
            else:
                if state.logprobs_refusal is None:
                    state.logprobs_refusal = []
                state.logprobs_refusal.extend(items)

    def _finish(self, state: ChoiceState, reason: str, events: list[Event]) -> None:
        t = self._now()
        notes: list[Anomaly] = []
        first = state.finish_reason is None
        if self._recovery is not None and state.finish_reason is None and reason != "length":
            self._recover_text_calls(state, events)
        if len(state.finish_reasons) < _MAX_FINISH_REASONS:  # bounded: one per chunk is possible
            state.finish_reasons.append(reason)
        if state.finish_reason is not None:
            notes.append(
                Anomaly(
                    AnomalyCode.FINISH_REASON_REPEATED,
                    f"a second finish_reason {show(reason)} after {state.finish_reason!r}",
                    state.index,
                )
            )
        else:
            state.finish_reason = reason
        calls = state.table.calls
        # Told to ``finished`` only when this finish decides something (bounded by choices and
        # calls, however many finish_reasons a hostile server sends): the first, or one that seals
        # a call opened after the first.
        deciding = first or any(c._status == "open" for c in calls)
        if calls and reason != "tool_calls":
            notes.append(
                Anomaly(
                    AnomalyCode.FINISH_REASON_STOP_WITH_TOOL_CALLS,
                    f"finish_reason {show(reason)} on a choice that carries tool calls",
                    state.index,
                )
            )
        if reason == "length":
            # Output was cut by the token limit: no call of this choice may run (rule 4).
            for call in calls:
                if call._status == "open":
                    call._metrics.sealed_at = t
                    call._mark_incomplete("the choice finished with finish_reason 'length'")
                    events.append(ToolCallIncomplete(call))
        else:
            self._seal_calls(state, calls, t, events)
        if calls:
            self._ensure_ids(state, _ordered(calls))
        for note in notes:
            self._record(note, None, events)
        if deciding:
            self.finished.append(state.index)
        events.append(ChoiceFinished(state.index, reason))

    def _recover_text_calls(self, state: ChoiceState, events: list[Event]) -> None:
        """Opt-in (Q32): tool calls written as text in the finished content become calls, read
        as the entries a provider would have streamed, by the one reader."""
        if state.table.calls or not state.content:
            return
        assert self._recovery is not None
        rest, entries = self._recovery.entries("".join(state.content), 0, self.limits.max_depth)
        if entries:
            state.content = [rest] if rest else []
            for entry, note in entries:
                call = read_fragment(self, state, entry, events, True)
                self._record(note, call, events)

    def _seal_calls(self, state: ChoiceState, calls: list[ToolCall], t: float, events: list[Event]) -> None:
        """Seal the open ``calls`` of ``state`` and check them (``_seal.py``)."""
        first = state.first_call
        if first is None and state.table.calls:
            # Fixed at the first seal: a call that opens later (after the finish) is never "first".
            first = state.first_call = min(state.table.calls, key=_order)
        checks = self._checks
        for call in calls:
            if call._status != "open":
                continue
            notes: list[Anomaly] = []
            checks.seal(call, t, call is first, notes)
            for note in notes:
                self._record(note, call, events)
            if call.ready:
                events.append(ToolCallReady(call))
            elif call._error is not None:
                events.append(ToolCallInvalid(call, call._error))

    def _record(self, note: Anomaly, call: ToolCall | None, events: list[Event]) -> None:
        """Keep an anomaly once per (code, choice, call), on the call and on the stream.

        ``raw`` is kept as sent when it is small, else as a bounded sample (``Limits.sample_chars``):
        an anomaly must not keep 50 MB of a refused fragment alive.
        """
        if call is not None:
            key: tuple[str, int | None, int | None] = (note.code, call._choice, call._slot)
        else:
            key = (note.code, note.choice, None)
        if key in self._anomaly_keys:
            return
        raw = note.raw
        if (raw is not None and type(raw) is not str) or (
            type(raw) is str and len(raw) > self.limits.sample_chars
        ):
            raw = sample(raw, self.limits.sample_chars)
        if call is not None and (note.choice != call._choice or note.call_index != call._index):
            note = replace(note, choice=call._choice, call_index=call._index, raw=raw)
        elif raw is not note.raw:
            note = replace(note, raw=raw)
        if call is not None:
            call._anomalies.append(note)
        self._anomaly_keys.add(key)
        self.anomalies.append(note)
        events.append(AnomalyRecorded(note))

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
                self._refuse([c for c in open_before if c._status == "ready"], exc, events, None)
            for call in open_before:
                if call._status == "ready":
                    call._invalidate(InternalFault("toolstitch failed while sealing; refused"))
                elif call._status == "open":
                    call._mark_incomplete("the stream ended, and toolstitch failed while sealing")
                    events.append(ToolCallIncomplete(call))
        events.append(StreamEnded(error, self._usage))
        return events

    def _end(self, error: BaseException | None, closed: bool, t: float, events: list[Event]) -> None:
        clean = error is None and not closed
        any_finished = any(c.finish_reason is not None for c in self._choices.values())
        for state in self._choices.values():
            calls = state.table.calls
            if not calls:
                continue
            self._ensure_ids(state, _ordered(calls))
            open_calls = [c for c in calls if c._status == "open"]
            if not open_calls:
                continue
            if (
                clean
                and state.finish_reason is None
                and any_finished
                and all(c._scan().complete for c in open_calls)
            ):
                # Another choice finished and the stream ended cleanly; this one's calls all hold a
                # closed JSON value, so nothing of them can be missing: seal them (noted).
                self._record(
                    Anomaly(
                        AnomalyCode.FINISH_REASON_MISSING,
                        "the stream ended without a finish_reason for this choice; its complete "
                        "calls were sealed as if it had finished with 'tool_calls'",
                        state.index,
                    ),
                    None,
                    events,
                )
                state.finish_reason = "tool_calls"
                self._seal_calls(state, open_calls, t, events)
                continue
            if clean and state.finish_reason not in (None, "length"):
                self._seal_calls(state, open_calls, t, events)
                continue
            if error is not None:
                reason = f"the stream failed ({type(error).__name__}) before the call was sealed"
            elif closed:
                reason = "the stream was closed before the call was sealed"
            else:
                reason = "the stream ended before the choice received a finish_reason"
            for call in open_calls:
                call._mark_incomplete(reason)
                events.append(ToolCallIncomplete(call))

    # -- the finished completion -------------------------------------------------------------

    def get_final_completion(self) -> ChatCompletion:
        """Build the ``ChatCompletion`` (once the input is over; this ends it if not yet ended).

        Raises :class:`~toolstitch.errors.IncompleteStreamError` when the stream failed, or when a
        choice never received a ``finish_reason``; the error carries the partial completion and
        the calls. Raises nothing else.
        """
        self.end()
        data = self._completion_data()
        try:
            data, problems = serialisable(data)
        except Exception as exc:  # fail closed: keep the data as built, and say so
            problems = [f"{type(exc).__name__} while checking the completion is serialisable"]
        for problem in problems:
            self._record(Anomaly(AnomalyCode.MALFORMED_CHUNK, f"in the completion: {problem}"), None, [])
        unfinished = [c.index for c in self._choices.values() if c.finish_reason is None]
        if self.error is not None or unfinished or not self._choices:
            if self.error is not None:
                why = f"the stream failed with {type(self.error).__name__}: {show(str(self.error), 500)}"
            elif not self._choices:
                why = "the stream carried no choices"
            else:
                why = f"choice(s) {unfinished} never received a finish_reason"
            raise IncompleteStreamError(
                why, partial=ChatCompletion.construct(**data), tool_calls=self.calls()
            )
        try:
            return ChatCompletion.model_validate(data)
        except Exception as exc:
            # A provider value outside the SDK's literals (say finish_reason "eos"): keep the data
            # as sent rather than lose the completion, and say so.
            message = str(exc) if isinstance(exc, ValidationError) else f"{type(exc).__name__}: {exc}"
            self._record(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, f"completion does not validate: {show(message, 2000)}"),
                None,
                [],
            )
            return ChatCompletion.construct(**data)

    def _completion_data(self) -> dict[str, Any]:
        choices = []
        for i in sorted(self._choices):
            state = self._choices[i]
            try:
                choices.append(self._choice_data(state))
            except Exception as exc:
                self._record(_fault(exc, "building the final message", i, None), None, [])
                choices.append(self._choice_data(state, full=False))
        data: dict[str, Any] = {}
        try:
            for key, value in self._extra.items():
                data[key] = _dump(value)
            usage = _dump(self._usage) if self._usage is not None else None
        except Exception as exc:
            self._record(_fault(exc, "building the completion's envelope", None, None), None, [])
            data, usage = {}, None
        data.update(
            id=self._id or "",
            object="chat.completion",
            created=self._created if self._created is not None else 0,
            model=self._model or "",
            choices=choices,
        )
        if self._system_fingerprint is not None:
            data["system_fingerprint"] = self._system_fingerprint
        if self._service_tier is not None:
            data["service_tier"] = self._service_tier
        if usage is not None:
            data["usage"] = usage
        return data

    def _choice_data(self, state: ChoiceState, full: bool = True) -> dict[str, Any]:
        """One choice of the completion. ``full=False`` (when building it in full failed) leaves out
        unknown fields and logprobs, and keeps the calls as they are: the bare message still holds
        every call, so the history stays answerable."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(state.content) if state.content else None,
            "refusal": "".join(state.refusal) if state.refusal else None,
        }
        calls = _ordered(state.table.calls)
        logprobs = None
        if full:
            for key, parts in state.reasoning.items():
                message[key] = "".join(parts)
            for key, value in state.extra.items():
                message[key] = _dump(value) if not isinstance(value, list) else [_dump(v) for v in value]
            if calls:
                self._ensure_ids(state, calls)
            if state.logprobs_content is not None or state.logprobs_refusal is not None:
                logprobs = {
                    "content": _dump_all(state.logprobs_content),
                    "refusal": _dump_all(state.logprobs_refusal),
                }
        if calls:
            message["tool_calls"] = [_call_data(c, full) for c in calls]
        return {
            "index": state.index,
            "message": message,
            "finish_reason": state.finish_reason,
            "logprobs": logprobs,
        }

    def _ensure_ids(self, state: ChoiceState, calls: list[ToolCall]) -> None:
        """Give every call a usable, unique id (``_route.ensure_ids``); the repairs are recorded."""
        basis = f"{self._id or ''}:{self._created}:{self._model}:{state.index}"
        for call, note in ensure_ids(calls, basis):
            self._record(note, call, [])


def _fault(exc: BaseException, doing: str, choice: int | None, raw: Any) -> Anomaly:
    """The ``internal_error`` anomaly for an exception caught while ``doing`` something."""
    try:
        why = show(str(exc), 200)
    except Exception:
        why = "(no message)"
    return Anomaly(
        AnomalyCode.INTERNAL_ERROR,
        f"toolstitch failed while {doing} ({type(exc).__name__}: {why}); the calls it touched were "
        "refused, the rest of the chunk was read",
        choice,
        raw=raw,
    )


def _order(call: ToolCall) -> tuple[int, int]:
    return (call._index, call._slot)


def _ordered(calls: list[ToolCall]) -> list[ToolCall]:
    return sorted(calls, key=_order)


def _call_data(call: ToolCall, full: bool = True) -> dict[str, Any]:
    extra = call._extra if full else {}
    data: dict[str, Any] = {k: _dump(v) for k, v in extra.items() if k != "function"}
    arguments = call.arguments
    if arguments == "" and call._status == "ready":
        # Ready on "" only where "" and {} cannot differ (a tool without parameters, or
        # empty_arguments="object"): the message says {}, so that its arguments parse to ``parsed``
        # for whoever reads them (the raw text stays in the recording).
        arguments = "{}"
    function: dict[str, Any] = {"name": call._name or "", "arguments": arguments}
    fextra = extra.get("function")
    if isinstance(fextra, dict):
        function.update({k: v for k, v in fextra.items() if k not in function})
    data.update(id=call._id or "", type="function", function=function)
    return data


def _dump_all(items: list[Any] | None) -> list[Any] | None:
    return None if items is None else [_dump(x) for x in items]
