"""The sans-I/O core: chunks in, events out, one ``ChatCompletion`` at the end.

``Accumulator`` knows nothing of HTTP, threads or asyncio (in the manner of ``h11``): the sync and
async stream wrappers, replay, and tests all drive the same object with :meth:`Accumulator.feed`.

The rules it enforces (see ``DESIGN.md``):

1. Calls are keyed by ``index`` (through the normalize layer, which owns every provider quirk).
2. Argument text is appended, scanned incrementally, and parsed once, at seal.
3. ``""``, a missing ``arguments`` and a missing ``function`` add nothing; ``""`` is never ``{}``
   unless ``empty_arguments="object"`` says so, which is recorded as an anomaly.
4. A call is ``ready`` only after its choice's ``finish_reason``, a strict parse, and (when the
   request's ``tools`` are known) a schema check. Ending early makes open calls ``incomplete``.
5. ``feed`` never raises on bad input: a chunk it cannot use becomes an anomaly.
6. Unknown provider fields (``reasoning_content``, ``reasoning``, ``extra_content`` …) survive into
   the final message.
7. Per chunk it reads fields and appends strings; the ``ChatCompletion`` is built once, at the end.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Literal

from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from ..errors import IncompleteStreamError, LimitExceeded, MalformedChunk
from ._anomaly import Anomaly, AnomalyCode
from ._call import ToolCall, now
from ._events import (
    AnomalyRecorded,
    ArgumentsComplete,
    ArgumentsDelta,
    ArgumentsMalformed,
    ChoiceFinished,
    ContentDelta,
    Event,
    ReasoningDelta,
    RefusalDelta,
    StreamEnded,
    ToolCallIncomplete,
    ToolCallInvalid,
    ToolCallReady,
    ToolCallStarted,
)
from ._limits import Limits
from ._normalize import (
    SKIP,
    CallTable,
    ChoicePiece,
    InBandError,
    ToolFragment,
    apply_identity,
    argument_text,
    read_chunk,
    resolve_call,
)
from ._recover import TextToolCallRecovery
from ._schema import ToolSchemas

__all__ = ["Accumulator", "StreamMetrics"]

_NO_EVENTS: Sequence[Event] = ()


class StreamMetrics:
    """Stream-level counts and monotonic timestamps (seconds from ``time.monotonic()``)."""

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


class _Choice:
    """Everything accumulated for one choice."""

    __slots__ = (
        "content",
        "extra",
        "finish_reason",
        "finish_reasons",
        "index",
        "logprobs_content",
        "logprobs_refusal",
        "reasoning",
        "refusal",
        "role",
        "table",
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


def _dump(value: Any) -> Any:
    """Plain data from an SDK model (once, at the end), or the value itself."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    return value


class Accumulator:
    """Merges streamed chunks into finished tool calls and one ``ChatCompletion``.

    ``tools`` are the request's tools (dicts as sent to the SDK); when given, sealed calls are
    checked against them: an unknown name or a schema failure makes the call ``invalid``.
    ``empty_arguments="object"`` reads ``""`` arguments as ``{}`` (recorded as an anomaly); the
    default ``"invalid"`` refuses them, since a missing value is not an empty one.
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
    ) -> None:
        if empty_arguments not in ("invalid", "object"):
            raise ValueError('empty_arguments must be "invalid" or "object"')
        self.limits = limits or Limits()
        self._schemas = ToolSchemas(tools) if tools else None
        self._empty_as_object = empty_arguments == "object"
        self._recovery = TextToolCallRecovery(tools) if recover_text_tool_calls else None
        self._choices: dict[int, _Choice] = {}
        self.anomalies: list[Anomaly] = []
        """Every anomaly of the stream, once per (code, choice, call)."""
        self._anomaly_keys: set[tuple[str, int | None, int | None]] = set()
        self._clock = now if clock is None else clock
        self.metrics = StreamMetrics(self._clock() if started_at is None else started_at)
        self.ended = False
        self.error: BaseException | None = None
        """The error that ended the input, if it ended with one."""
        self._last_seq: int | None = None
        # Envelope fields: the first non-empty value wins, except usage (the last wins).
        self._id: str | None = None
        self._model: str | None = None
        self._created: int | None = None
        self._object: str | None = None
        self._system_fingerprint: str | None = None
        self._service_tier: str | None = None
        self._usage: Any = None
        self._extra: dict[str, Any] = {}

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

    # -- feeding -----------------------------------------------------------------------------

    def feed(self, chunk: Any, seq: int | None = None) -> Sequence[Event]:
        """Take one chunk (a ``ChatCompletionChunk`` or a dict) and return what happened.

        ``seq`` is an optional monotonic sequence number (for example the SSE event id): a chunk
        whose number is not greater than the last one seen is a transport replay and is dropped,
        with an anomaly. Without ``seq`` every chunk is taken as new, so a chunk fed twice is
        counted twice (its arguments appended twice): pass ``seq`` when the transport can resend.
        """
        if self.ended:
            return self._note_chunk(AnomalyCode.CHUNK_AFTER_END, "a chunk arrived after the end", chunk)
        if seq is not None:
            if self._last_seq is not None and seq <= self._last_seq:
                return self._note_chunk(
                    AnomalyCode.REPLAYED_CHUNK, f"chunk #{seq} was already seen; dropped", chunk
                )
            self._last_seq = seq
        t = self._clock()
        metrics = self.metrics
        if metrics.first_chunk_at is None:
            metrics.first_chunk_at = t
        metrics.chunks += 1
        notes: list[Anomaly] = []
        try:
            envelope, pieces = read_chunk(chunk, notes)
        except MalformedChunk as exc:
            return self._note_chunk(AnomalyCode.MALFORMED_CHUNK, str(exc), chunk)
        except InBandError as exc:
            # The SDK raises these itself; fed by hand, the chunk ends the input with the error.
            return [*self._note_chunk(AnomalyCode.IN_BAND_ERROR, str(exc), chunk), *self.end(exc)]
        events: list[Event] = []
        try:
            self._take_envelope(envelope, bool(pieces), notes, chunk)
            for piece in pieces:
                self._take_choice(piece, t, events, notes)
        except Exception as exc:
            notes.append(Anomaly(AnomalyCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}", raw=chunk))
        for note in notes:
            self._record(note, None, events)
        return events or _NO_EVENTS

    def _note_chunk(self, code: str, message: str, chunk: Any) -> Sequence[Event]:
        events: list[Event] = []
        self._record(Anomaly(code, message, raw=chunk), None, events)
        return events

    def _take_envelope(self, env: Any, has_choices: bool, notes: list[Anomaly], chunk: Any) -> None:
        if self._id is None and env.id:
            self._id = env.id
        if self._model is None and env.model:
            self._model = env.model
        if self._created is None and env.created is not None:
            self._created = env.created
        if self._object is None and env.object:
            self._object = env.object
        if env.system_fingerprint and self._system_fingerprint is None:
            self._system_fingerprint = env.system_fingerprint
        if env.service_tier and self._service_tier is None:
            self._service_tier = env.service_tier
        if env.usage is not None:
            if self._usage is not None:
                notes.append(Anomaly(AnomalyCode.USAGE_REPEATED, "usage arrived on more than one chunk"))
            self._usage = env.usage
        elif not has_choices:
            notes.append(Anomaly(AnomalyCode.EMPTY_CHOICES, "a chunk had no choices and no usage", raw=chunk))
        if env.extra:
            self._extra.update(env.extra)

    def _take_choice(self, piece: ChoicePiece, t: float, events: list[Event], notes: list[Anomaly]) -> None:
        index = piece.index
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = _Choice(index)
        finished = state.finish_reason is not None
        if piece.role:
            if state.role is not None:
                notes.append(Anomaly(AnomalyCode.ROLE_REPEATED, "role repeated on a later delta", index))
            else:
                state.role = piece.role
        text = piece.content
        if text:
            if finished:
                notes.append(Anomaly(AnomalyCode.FRAGMENT_AFTER_FINISH, "content after finish_reason", index))
            state.content.append(text)
            events.append(ContentDelta(index, text))
        text = piece.refusal
        if text:
            state.refusal.append(text)
            events.append(RefusalDelta(index, text))
        if piece.extra:
            self._take_extra(state, piece.extra, events)
        if piece.logprobs is not None:
            self._take_logprobs(state, piece.logprobs)
        if piece.tool_fragments:
            for frag in piece.tool_fragments:
                self._take_fragment(state, frag, t, events, notes)
        if piece.finish_reason is not None:
            self._finish(state, piece.finish_reason, t, events, notes)

    def _take_extra(self, state: _Choice, extra: dict[str, Any], events: list[Event]) -> None:
        """Unknown delta fields: text is concatenated, lists extended, anything else last-wins."""
        for key, value in extra.items():
            if value is None:
                continue
            if type(value) is str:
                if not value:
                    continue
                parts = state.reasoning.get(key)
                if parts is None:
                    parts = state.reasoning[key] = []
                parts.append(value)
                events.append(ReasoningDelta(state.index, key, value))
            elif type(value) is list:
                existing = state.extra.get(key)
                if isinstance(existing, list):
                    existing.extend(value)
                else:
                    state.extra[key] = list(value)
            else:
                state.extra[key] = value

    def _take_logprobs(self, state: _Choice, logprobs: Any) -> None:
        content = logprobs.get("content") if type(logprobs) is dict else getattr(logprobs, "content", None)
        if content:
            if state.logprobs_content is None:
                state.logprobs_content = []
            state.logprobs_content.extend(content)
        refusal = logprobs.get("refusal") if type(logprobs) is dict else getattr(logprobs, "refusal", None)
        if refusal:
            if state.logprobs_refusal is None:
                state.logprobs_refusal = []
            state.logprobs_refusal.extend(refusal)

    def _take_fragment(
        self,
        state: _Choice,
        frag: ToolFragment,
        t: float,
        events: list[Event],
        notes: list[Anomaly],
    ) -> None:
        table = state.table
        local: list[Anomaly] = frag.anomalies or []
        call, index = resolve_call(table, frag, state.index, local)
        if index == SKIP:
            for note in local:
                self._record(note, None, events)
            return
        # What the call was before this fragment: a change to "invalid" is announced below.
        before_status, before_error = ("open", None) if call is None else (call.status, call.error)
        if call is None:
            call = ToolCall(state.index, index, len(table.calls), self.limits)
            call.metrics.opened_at = t
            table.calls.append(call)
            table.by_index[index] = call
            if index > table.max_index:
                table.max_index = index
            if self.metrics.first_tool_call_at is None:
                self.metrics.first_tool_call_at = t
            if state.finish_reason is not None:
                local.append(
                    Anomaly(
                        AnomalyCode.FRAGMENT_AFTER_FINISH,
                        "a new tool call opened after the choice's finish_reason",
                        raw=frag.raw,
                    )
                )
            events.append(ToolCallStarted(call))
        had_id = call.id
        apply_identity(call, frag, local)
        if (
            before_status == "open"
            and call.slot >= self.limits.max_calls_per_choice
            and call.status == "open"
        ):
            # Refused only after its identity was written, so the refusal names the call.
            call.exceed_call_limit(self.limits.max_calls_per_choice, t)
        if had_id is None and call.id is not None and call.id not in table.by_id:
            table.by_id[call.id] = call
        call.metrics.fragments += 1
        text, replace_all = argument_text(call, frag, local)
        if text is not None:
            scanner = call.scanner
            was_complete = scanner.complete
            had_error = scanner.error is not None
            if replace_all:
                call.replace_arguments(text, t)
                kept = call.status == "open"
            else:
                kept = call.append(text, t)
            if kept:
                events.append(ArgumentsDelta(call, text))
                scanner = call.scanner
                if scanner.complete and not was_complete:
                    events.append(ArgumentsComplete(call))
                if scanner.error is not None and not had_error:
                    events.append(ArgumentsMalformed(call, scanner.error, scanner.error_at))
            elif before_status != "open" and not isinstance(call.error, LimitExceeded):
                local.append(
                    Anomaly(
                        AnomalyCode.FRAGMENT_AFTER_FINISH,
                        "argument text arrived for a sealed call; the call was refused",
                        raw=frag.raw,
                    )
                )
        # A limit, or a late fragment for a sealed call, turned the call invalid: say so, so that an
        # executor acting on ToolCallReady hears that the call must not run after all.
        if call.status == "invalid" and call.error is not None and call.error is not before_error:
            events.append(ToolCallInvalid(call, call.error))
        for note in local:
            self._record(note, call, events)

    def _finish(
        self, state: _Choice, reason: str, t: float, events: list[Event], notes: list[Anomaly]
    ) -> None:
        if self._recovery is not None and state.finish_reason is None and reason != "length":
            self._recover_text_calls(state, t, events, notes)
        state.finish_reasons.append(reason)
        if state.finish_reason is not None:
            notes.append(
                Anomaly(
                    AnomalyCode.FINISH_REASON_REPEATED,
                    f"a second finish_reason {reason!r} after {state.finish_reason!r}",
                    state.index,
                )
            )
        else:
            state.finish_reason = reason
        calls = state.table.calls
        if calls and reason != "tool_calls":
            notes.append(
                Anomaly(
                    AnomalyCode.FINISH_REASON_STOP_WITH_TOOL_CALLS,
                    f"finish_reason {reason!r} on a choice that carries tool calls",
                    state.index,
                )
            )
        if reason == "length":
            # Output was cut by the token limit: no call of this choice may run (rule 4).
            for call in calls:
                if call.status == "open":
                    call.metrics.sealed_at = t
                    call.mark_incomplete("the choice finished with finish_reason 'length'")
                    events.append(ToolCallIncomplete(call))
        else:
            self._seal_calls(calls, t, events)
        if calls:
            self._ensure_ids(state, _ordered(calls))
        events.append(ChoiceFinished(state.index, reason))

    def _recover_text_calls(
        self, state: _Choice, t: float, events: list[Event], notes: list[Anomaly]
    ) -> None:
        """Opt-in (Q32): tool calls written as text in the finished content become calls."""
        if state.table.calls or not state.content:
            return
        assert self._recovery is not None
        rest, frags = self._recovery.fragments("".join(state.content), 0)
        if frags:
            state.content = [rest] if rest else []
            for frag in frags:
                self._take_fragment(state, frag, t, events, notes)

    def _seal_calls(self, calls: list[ToolCall], t: float, events: list[Event]) -> None:
        for call in calls:
            if call.status != "open":
                continue
            call.seal(t, self._empty_as_object)
            if self._empty_as_object and call.chars == 0 and call.ready:
                self._record(
                    Anomaly(
                        AnomalyCode.EMPTY_ARGUMENTS_AS_OBJECT,
                        'empty arguments read as {} by the empty_arguments="object" policy',
                    ),
                    call,
                    events,
                )
            if call.ready and self._schemas is not None and call.name is not None:
                error = self._schemas.check(call.name, call.parsed, call.arguments)
                if error is not None:
                    call.invalidate(error)
            if call.ready:
                events.append(ToolCallReady(call))
            elif call.error is not None:
                events.append(ToolCallInvalid(call, call.error))

    def _record(self, note: Anomaly, call: ToolCall | None, events: list[Event]) -> None:
        """Keep an anomaly once per (code, choice, call), on the call and on the stream."""
        if call is not None:
            if note.choice != call.choice or note.call_index != call.index:
                note = replace(note, choice=call.choice, call_index=call.index)
            key: tuple[str, int | None, int | None] = (note.code, call.choice, call.slot)
            if key in self._anomaly_keys:
                return
            call.anomalies.append(note)
        else:
            key = (note.code, note.choice, None)
            if key in self._anomaly_keys:
                return
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
        """
        if self.ended:
            return _NO_EVENTS
        self.ended = True
        self.error = error
        t = self._clock()
        self.metrics.ended_at = t
        events: list[Event] = []
        for state in self._choices.values():
            if state.table.calls:
                self._ensure_ids(state, _ordered(state.table.calls))
            open_calls = [c for c in state.table.calls if c.status == "open"]
            if not open_calls:
                continue
            clean = error is None and not closed
            if (
                clean
                and state.finish_reason is None
                and any(other.finish_reason is not None for other in self._choices.values())
                and all(c.scanner.complete for c in open_calls)
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
                self._seal_calls(open_calls, t, events)
                continue
            if clean and state.finish_reason not in (None, "length"):
                self._seal_calls(open_calls, t, events)
                continue
            if error is not None:
                reason = f"the stream failed ({type(error).__name__}) before the call was sealed"
            elif closed:
                reason = "the stream was closed before the call was sealed"
            else:
                reason = "the stream ended before the choice received a finish_reason"
            for call in open_calls:
                call.mark_incomplete(reason)
                events.append(ToolCallIncomplete(call))
        events.append(StreamEnded(error, self._usage))
        return events

    # -- the finished completion -------------------------------------------------------------

    def get_final_completion(self) -> ChatCompletion:
        """Build the ``ChatCompletion`` (once the input is over; this ends it if not yet ended).

        Raises :class:`~toolstitch.IncompleteStreamError` when the stream failed, or when a choice
        never received a ``finish_reason``; the error carries the partial completion and the calls.
        """
        self.end()
        data = self._completion_data()
        unfinished = [c.index for c in self._choices.values() if c.finish_reason is None]
        if self.error is not None or unfinished or not self._choices:
            if self.error is not None:
                why = f"the stream failed with {type(self.error).__name__}: {self.error}"
            elif not self._choices:
                why = "the stream carried no choices"
            else:
                why = f"choice(s) {unfinished} never received a finish_reason"
            raise IncompleteStreamError(
                why, partial=ChatCompletion.construct(**data), tool_calls=self.calls()
            )
        try:
            return ChatCompletion.model_validate(data)
        except ValidationError as exc:
            # A provider value outside the SDK's literals (say finish_reason "eos"): keep the data
            # as sent rather than lose the completion, and say so.
            self._record(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, f"completion does not validate: {exc}"),
                None,
                [],
            )
            return ChatCompletion.construct(**data)

    def _completion_data(self) -> dict[str, Any]:
        choices = [self._choice_data(self._choices[i]) for i in sorted(self._choices)]
        data: dict[str, Any] = dict(self._extra)
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
        if self._usage is not None:
            data["usage"] = _dump(self._usage)
        return data

    def _choice_data(self, state: _Choice) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(state.content) if state.content else None,
            "refusal": "".join(state.refusal) if state.refusal else None,
        }
        for key, parts in state.reasoning.items():
            message[key] = "".join(parts)
        for key, value in state.extra.items():
            message[key] = _dump(value) if not isinstance(value, list) else [_dump(v) for v in value]
        calls = _ordered(state.table.calls)
        if calls:
            self._ensure_ids(state, calls)
            message["tool_calls"] = [_call_data(c) for c in calls]
        logprobs = None
        if state.logprobs_content is not None or state.logprobs_refusal is not None:
            logprobs = {
                "content": [_dump(x) for x in state.logprobs_content]
                if state.logprobs_content is not None
                else None,
                "refusal": [_dump(x) for x in state.logprobs_refusal]
                if state.logprobs_refusal is not None
                else None,
            }
        return {
            "index": state.index,
            "message": message,
            "finish_reason": state.finish_reason,
            "logprobs": logprobs,
        }

    def _ensure_ids(self, state: _Choice, calls: list[ToolCall]) -> None:
        """Give every call a non-empty id unique within its message (a valid history needs one)."""
        seen: set[str] = set()
        for call in calls:
            if call.id is not None and call.id not in seen:
                seen.add(call.id)
                continue
            code = AnomalyCode.CALL_ID_REUSED if call.id is not None else AnomalyCode.ID_SYNTHESIZED
            # Unique within the message (slot) and, in practice, across turns (the completion id,
            # or for providers that send none, its time and the arguments), so that idempotency by
            # call id never mistakes a later turn's call for an earlier one.
            basis = (
                f"{self._id or ''}:{self._created}:{self._model}:{state.index}:{call.slot}:"
                f"{call.name or ''}:{call.arguments}"
            )
            made = "call_ts" + hashlib.sha256(basis.encode()).hexdigest()[:20]
            self._record(
                Anomaly(code, f"id {call.id!r} unusable; synthesized {made!r}", raw=call.id),
                call,
                [],
            )
            call.id = made
            seen.add(made)


def _ordered(calls: list[ToolCall]) -> list[ToolCall]:
    return sorted(calls, key=lambda c: (c.index, c.slot))


def _call_data(call: ToolCall) -> dict[str, Any]:
    data: dict[str, Any] = {k: _dump(v) for k, v in call.extra.items() if k != "function"}
    function: dict[str, Any] = {"name": call.name or "", "arguments": call.arguments}
    fextra = call.extra.get("function")
    if isinstance(fextra, dict):
        function.update({k: v for k, v in fextra.items() if k not in function})
    data.update(id=call.id, type="function", function=function)
    return data
