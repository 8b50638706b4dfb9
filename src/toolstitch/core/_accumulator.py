"""The Chat Completions accumulator: chunks in, events out, one ``ChatCompletion`` at the end.

``Accumulator`` knows nothing of HTTP, threads or asyncio (in the manner of ``h11``): the sync and
async stream wrappers, replay, and tests all drive the same object with :meth:`Accumulator.feed`.
It is a sibling of the Responses API's accumulator (``_responses.py``): both stand on
``_store.CallStore`` (the calls, the owner that writes them, anomalies, ending) and neither
inherits the other's API.

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

from collections.abc import Callable, Iterable
from dataclasses import asdict
from operator import itemgetter
from typing import Any, Literal

from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ValidationError

from ..errors import IncompleteStreamError
from ._anomaly import Anomaly, AnomalyCode
from ._call import CUSTOM, ToolCall, push, text_size
from ._events import (
    ChoiceFinished,
    Event,
    ReasoningDelta,
    ToolCallIncomplete,
    content_delta,
)
from ._limits import Limits
from ._read import ChoiceState, read_chunk, read_fragment
from ._recover import TextToolCallRecovery
from ._seal import CallChecks
from ._serialisable import serialisable
from ._store import CallStore, StreamMetrics, fault_note, ordered
from ._values import MAX_LABEL, REASONING_FIELDS, opt_int, opt_str, show

__all__ = ["Accumulator", "StreamMetrics"]

_ENVELOPE_FIELDS = ("id", "model", "created", "object", "system_fingerprint", "service_tier")


def _probe(fields: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """``fields`` of a chunk as a tuple (a single field is asked twice: ``itemgetter`` of one key
    returns the value itself)."""
    return itemgetter(*fields, *fields[:1]) if len(fields) == 1 else itemgetter(*fields)


_MAX_FINISH_REASONS = 16
"""How many finish_reasons of one choice are kept (a hostile server can send one per chunk)."""


def _dump(value: Any) -> Any:
    """Plain data from an SDK model (once, at the end), or the value itself."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    return value


class Accumulator(CallStore):
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
        limits = limits or Limits()
        # Read once, whatever the iterable (a generator, dict.values(), map): the same list is
        # checked against here and by text recovery.
        tool_list = list(tools) if tools is not None else None
        checks = CallChecks(
            tool_list,
            empty_arguments=empty_arguments,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
        )
        super().__init__(checks, limits, started_at, clock)
        self._recovery = TextToolCallRecovery(tool_list) if recover_text_tool_calls else None
        self._offers_none = tool_list == []  # for check_options: a replay must refuse every call too
        self._empty_arguments: Literal["invalid", "object"] = empty_arguments  # for check_options
        # Envelope fields: the first non-empty value wins, except usage (the last wins).
        self._object: str | None = None
        self._system_fingerprint: str | None = None
        self._service_tier: str | None = None
        self._extra: dict[str, Any] = {}
        self._envelope_unset: tuple[str, ...] = _ENVELOPE_FIELDS
        """The envelope fields not kept yet (the first usable value wins): read while any is left."""
        self._envelope_probe: Callable[[dict[str, Any]], tuple[Any, ...]] | None = _probe(_ENVELOPE_FIELDS)
        """Those fields of a chunk as one tuple, in one C call (None once all are kept): a chunk is
        read for its envelope only when one of them is not null."""

    _read = read_chunk  # type: ignore[assignment]  # the reader takes the chat accumulator
    """Read one chunk: the one reader of chunks (``_read.py``), called as a method (no frame of
    its own)."""

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
            unset = tuple(k for k in _ENVELOPE_FIELDS if getattr(self, "_" + k) is None)
            self._envelope_unset = unset
            self._envelope_probe = _probe(unset) if unset else None

    def _take_chunk_fields(self, unknown: dict[str, Any], events: list[Event]) -> None:
        """Unknown chunk fields, kept for the final completion (rule 6), within the limits."""
        for key, value in unknown.items():
            if self._keep(value, f"the chunk field {show(key)}", None, events):
                self._extra[key] = value

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
        # A finish decides when it is the first, or seals a call opened after the first.
        deciding = first or any(c.status == "open" for c in state.table.calls)
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
        if calls and reason == "length":
            notes.append(
                Anomaly(
                    AnomalyCode.FINISH_REASON_LENGTH,
                    "finish_reason 'length' on a choice that carries tool calls: the output was cut "
                    "by the token limit, so none of its calls may run",
                    state.index,
                )
            )
        elif calls and reason != "tool_calls":
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
                if self._owner.end(call, "the choice finished with finish_reason 'length'", t):
                    events.append(ToolCallIncomplete(call))
        else:
            self._seal_calls(state, calls, t, events)
        if calls:
            self._ensure_ids(state, ordered(calls))
        for note in notes:
            self._record(note, None, events)
        self._decide(state, deciding)
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

    def _end(self, error: BaseException | None, closed: bool, t: float, events: list[Event]) -> None:
        clean = error is None and not closed
        any_finished = any(c.finish_reason is not None for c in self._choices.values())
        for state in self._choices.values():
            calls = state.table.calls
            if not calls:
                continue
            self._ensure_ids(state, ordered(calls))
            open_calls = [c for c in calls if c.status == "open"]
            if not open_calls:
                continue
            if (
                clean
                and state.finish_reason is None
                and any_finished
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
                if self._owner.end(call, reason, t):
                    events.append(ToolCallIncomplete(call))

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
                self._record(fault_note(exc, "building the final message", i, None), None, [])
                choices.append(self._choice_data(state, full=False))
        data: dict[str, Any] = {}
        try:
            for key, value in self._extra.items():
                data[key] = _dump(value)
            usage = _dump(self._usage) if self._usage is not None else None
        except Exception as exc:
            self._record(fault_note(exc, "building the completion's envelope", None, None), None, [])
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
        calls = ordered(state.table.calls)
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


def _call_data(call: ToolCall, full: bool = True) -> dict[str, Any]:
    extra = call.extra if full else {}
    data: dict[str, Any] = {k: _dump(v) for k, v in extra.items() if k != "function" and k != "custom"}
    if call.type == CUSTOM:
        # A custom tool's call in the shape the API defines (``ChatCompletionMessageCustomToolCall``):
        # its input is the text itself.
        custom: dict[str, Any] = {"name": call.name or "", "input": call.arguments}
        cextra = extra.get("custom")
        if isinstance(cextra, dict):
            custom.update({k: v for k, v in cextra.items() if k not in custom})
        data.update(id=call.id or "", type=CUSTOM, custom=custom)
        return data
    arguments = call.arguments
    if arguments == "" and call.status == "ready":
        # Ready on "" only where "" and {} cannot differ (a tool without parameters, or
        # empty_arguments="object"): the message says {}, so that its arguments parse to ``parsed``
        # for whoever reads them (the raw text stays in the recording).
        arguments = "{}"
    function: dict[str, Any] = {"name": call.name or "", "arguments": arguments}
    fextra = extra.get("function")
    if isinstance(fextra, dict):
        function.update({k: v for k, v in fextra.items() if k not in function})
    data.update(id=call.id or "", type="function", function=function)
    return data


def _dump_all(items: list[Any] | None) -> list[Any] | None:
    return None if items is None else [_dump(x) for x in items]
