"""The Chat Completions accumulator: chunks in, events out, one ``ChatCompletion`` at the end.

``Accumulator`` knows nothing of HTTP, threads or asyncio (in the manner of ``h11``): the sync and
async stream wrappers, replay, and tests all drive the same object with :meth:`Accumulator.feed`.
It is a sibling of the Responses API's accumulator (``_responses.py``): both stand on
``_store.CallStore`` (the calls, the owner that writes them, anomalies, ending) and neither
inherits the other's API. Each holds its own reader: here, :meth:`Accumulator._read` and the
methods below it.

The one reader: every chunk (the SDK's ``ChatCompletionChunk``, a subclass, a plain ``dict``
decoded from SSE or replayed) goes through :meth:`Accumulator._read`: the envelope, each choice,
each delta, each ``delta.tool_calls`` entry. Each decision (which choice, which call, which id and
name, which limit, which anomaly) is made once, here or in the module this calls for it
(``_values.py`` for one value, ``_route.py`` for which call a fragment belongs to, ``_owner.py``
for what the fragment does to its call); there is no second path for a common shape. It is cheap
because a standard chunk asks few questions: the fields of an object are read from one dict
(:func:`_read_sdk`), nothing is built per chunk but the events asked for, and argument text is
appended, never scanned (rule 2). ``events`` (a bool; the lists of events are ``out``) is the
switch, named as :meth:`feed` names it, between :meth:`feed` with events and the
wrapped stream that nobody reads events from: without it, the two events nearly every chunk makes
(``ContentDelta``, ``ArgumentsDelta``) are not built and the scanner is not asked where the JSON
stands. A part of a chunk that cannot be read is recorded, and the call it may have belonged to is
refused: the fragment's own call when it is known, else every open call of its choice, else every
open call of the stream (rule 9).

The rules it enforces (see ``docs/design.md``):

1. Calls are keyed by ``index``: the reader reads each chunk (every quirk of shape), ``_route.py``
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
from functools import partial
from operator import is_not, itemgetter
from typing import Any, Literal

from openai.types.chat import ChatCompletion
from openai.types.chat import ChatCompletionChunk as _SdkChunk
from openai.types.chat.chat_completion_chunk import Choice as _SdkChoice
from openai.types.chat.chat_completion_chunk import ChoiceDelta as _SdkDelta
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall as _SdkEntry
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCallFunction as _SdkFunction
from pydantic import BaseModel, ValidationError

from ..errors import InBandError, IncompleteStreamError, MalformedArguments
from ._anomaly import Anomaly, AnomalyCode
from ._call import CUSTOM, ToolCall, push, text_size
from ._events import (
    ChoiceFinished,
    Event,
    ReasoningDelta,
    RefusalDelta,
    ToolCallIncomplete,
    content_delta,
)
from ._limits import Limits
from ._owner import Identity
from ._recover import TextToolCallRecovery
from ._route import FURTHER, NEW_ID, SKIP, argument_text, resolve_call
from ._serialisable import serialisable
from ._store import CallStore, ChoiceState, StreamMetrics, fault_note, ordered
from ._values import (
    CHUNK_KEYS,
    DELTA_KEYS,
    FUNCTION_KEYS,
    MAX_INDEX,
    MAX_LABEL,
    REASONING_FIELDS,
    TOOL_CALL_KEYS,
    Shape,
    clean_str,
    json_text,
    opt_int,
    opt_str,
    read_index,
    read_object,
    show,
)

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
        # Read once, whatever the iterable (a generator, dict.values(), map): the same list is
        # checked against here and by text recovery.
        tool_list = list(tools) if tools is not None else None
        super().__init__(
            tool_list, limits, empty_arguments, tool_choice, parallel_tool_calls, started_at, clock
        )
        self._recovery = TextToolCallRecovery(tool_list) if recover_text_tool_calls else None
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

    # -- reading: the one reader of chunks ---------------------------------------------------

    def _read(self, chunk: Any, out: list[Event], events: bool) -> None:
        """Read one chunk; what happened is appended to ``out``.

        The envelope, then, when the chunk is the SDK's own piece of nothing but one plain
        continuation of a call (an index and argument text, no ``{``), its text goes to the owner at
        once; any other chunk is read choice by choice (:meth:`_read_choices`). Raises
        :class:`InBandError` for a chunk carrying an ``error`` (the accumulator ends the input with
        it); every other problem is recorded, and refuses what it may have touched.

        The continuation makes no decision of its own (what the text does to the call, in any
        state, is the owner's; a choice whose calls are still watched for cumulative resends, as
        each is until its second text, takes the long way): each test only checks that the piece asks
        none of the questions the full reading answers (an unknown field, a finish, logprobs,
        content, a role, a refusal, an id, a name, a type, a text that may open a new JSON value:
        ``_route.resolve_call``), and the owner decides what the text does to the call, as for
        every fragment (``tests/core/test_hot_exit.py`` holds it to the long way). Most chunks of a
        stream are this piece; it is read in this one frame, from each object's ``__dict__``,
        because that is what keeps a chunk cheap (rule 7).
        """
        unknown: dict[str, Any] | None = None
        if type(chunk) is _SdkChunk and not chunk.__pydantic_extra__:
            fields = chunk.__dict__
            try:
                usage, choices = _TAKE_CHUNK(fields)
            except KeyError:  # a declared field missing from __dict__ (model_construct)
                fields, unknown, (usage, choices) = read_object(chunk, _CHUNK)  # type: ignore[misc]
        else:
            read = read_object(chunk, _CHUNK)
            if read is None:
                # Whatever it carried cannot be told: any open call may have lost a fragment (rule 9).
                self._damaged(None, f"a chunk must be an object, got {type(chunk).__name__}", chunk, out)
                return
            fields, unknown, (usage, choices) = read
        if unknown is not None:
            error = unknown.get("error")
            if error:
                # Like the SDK (``openai._streaming``): any truthy ``error`` is a failure, object or string.
                raise InBandError(error)
            self._take_chunk_fields(unknown, out)
        probe = self._envelope_probe  # the envelope fields not kept yet (None, once all are)
        if probe is not None:
            try:
                news = any(map(_NOT_NONE, probe(fields)))  # identity only: no value's __eq__ runs
            except KeyError:  # a dict, or a model built without them: asked one by one
                news = any(fields.get(key) is not None for key in self._envelope_unset)
            if news:
                self._take_envelope(fields)
        if usage is not None:
            self._take_usage(usage, out)
        if type(choices) is not list or not choices:
            if choices is not None and type(choices) is not list:
                # What else the chunk carried cannot be told: any open call may have lost a fragment.
                self._damaged(None, "choices is not a list", choices, out)
            elif usage is None:
                self._record(
                    Anomaly(AnomalyCode.EMPTY_CHOICES, "a chunk had no choices and no usage", raw=chunk),
                    None,
                    out,
                )
            return
        raw = choices[0]
        if len(choices) != 1 or type(raw) is not _SdkChoice or raw.__pydantic_extra__:
            return self._read_choices(choices, out, events)
        try:
            index, delta, finish, logprobs = _TAKE_CHOICE(raw.__dict__)
        except KeyError:
            return self._read_choices(choices, out, events)
        if finish is not None or logprobs is not None or type(index) is not int:
            return self._read_choices(choices, out, events)
        if type(delta) is not _SdkDelta or delta.__pydantic_extra__:
            return self._read_choices(choices, out, events)
        try:
            tool_calls, content, role, refusal, function_call = _TAKE_DELTA(delta.__dict__)
        except KeyError:
            return self._read_choices(choices, out, events)
        if content is not None or role is not None or refusal is not None or function_call is not None:
            return self._read_choices(choices, out, events)
        state = self._choices.get(index)
        if state is None or type(tool_calls) is not list or len(tool_calls) != 1:
            return self._read_choices(choices, out, events)
        entry = tool_calls[0]
        if type(entry) is not _SdkEntry or entry.__pydantic_extra__:
            return self._read_choices(choices, out, events)
        try:
            position, fid, ftype, function = _TAKE_ENTRY(entry.__dict__)
        except KeyError:
            return self._read_choices(choices, out, events)
        if (
            fid is not None
            or ftype is not None
            or type(function) is not _SdkFunction
            or function.__pydantic_extra__
        ):
            return self._read_choices(choices, out, events)
        try:
            name, arguments = _TAKE_FUNCTION(function.__dict__)
        except KeyError:
            return self._read_choices(choices, out, events)
        if name is not None or type(arguments) is not str or not arguments or "{" in arguments:
            return self._read_choices(choices, out, events)
        table = state.table
        call = table.by_index.get(position) if type(position) is int else None
        if call is None or table.chains or table.custom:
            return self._read_choices(choices, out, events)
        self._touched = call
        owner = self._owner
        try:
            owner.fragment(call, (arguments, entry, events), out)
        except Exception as exc:
            self._fragment_fault(state, exc, entry, out)
            return None
        if owner.notes:  # a limit it reached
            for note in owner.take_notes():
                self._record(note, call, out)
        return None

    def _read_choices(self, choices: list[Any], out: list[Event], events: bool) -> None:
        """Each choice of a chunk: its delta (role, content, refusal, unknown fields, tool-call
        entries), logprobs and finish_reason. A failure refuses the calls of the choice it was
        reading, and the next choice is still read (rule 9)."""
        seen: set[int] | None = set() if len(choices) > 1 else None
        for raw in choices:
            read = _read_sdk(raw, _SdkChoice, _CHOICE)
            if read is None:
                self._damaged(None, "a choice is not an object", raw, out)
                continue
            index, delta, finish, logprobs = read[1]
            if type(index) is not int or index < 0 or index >= MAX_INDEX:
                index = self._choice_index(index, raw, out)
                if index is None:
                    continue
            if seen is not None:
                if index in seen:
                    # Two pieces of one chunk (or two choices of one completion) claim the same choice:
                    # which text belongs to which cannot be told, so none of that choice's calls runs.
                    self._duplicate_choice(index, raw, out)
                    continue
                seen.add(index)
            state = self._choices.get(index)
            if state is None:
                state = self._open_choice(index, out)
                if state is None:
                    continue
            sealing: list[ToolCall] | None = None
            try:
                if delta is not None:
                    read = _read_sdk(delta, _SdkDelta, _DELTA)
                    if read is None:
                        self._damaged(state, "delta is not an object", delta, out)
                    else:
                        rest, (tool_calls, content, role, refusal, function_call) = read
                        if content is not None:
                            if type(content) is str:
                                if content:
                                    self._take_content(state, content, out, events)
                            else:
                                self._skipped(state, "content", content, out)
                        if rest is not None or role is not None or refusal is not None:
                            self._read_delta_rest(state, role, refusal, rest, out)
                        if tool_calls:
                            if type(tool_calls) is list:
                                for entry in tool_calls:
                                    if entry is not None:
                                        self._touched = None
                                        try:
                                            self._read_fragment(state, entry, out, events)
                                        except Exception as exc:
                                            self._fragment_fault(state, exc, entry, out)
                            else:
                                self._damaged(state, "tool_calls is not a list", tool_calls, out)
                        elif function_call is not None:
                            self._read_legacy(state, function_call, out, events)
                if logprobs is not None:
                    self._take_logprobs(state, logprobs, out)
                if finish is not None:
                    reason = self._finish_reason(state, finish, out)
                    if reason is not None:
                        # The calls this finish may seal: if sealing fails, none of them may stay ready.
                        sealing = [c for c in state.table.calls if c.status == "open"]
                        self._finish(state, reason, out)
            except Exception as exc:
                self._fault(state, exc, sealing, out)

    def _read_delta_rest(
        self,
        state: ChoiceState,
        role: Any,
        refusal: Any,
        unknown: dict[str, Any] | None,
        out: list[Event],
    ) -> None:
        """The rarer parts of a delta: role, refusal, unknown fields (reasoning text, Q29)."""
        if role is not None:
            self._take_role(state, role, out)
        if refusal is not None:
            if type(refusal) is str:
                if refusal:
                    if self._charge(text_size(refusal), "refusal text", state.index, out):
                        push(state.refusal, refusal)
                    out.append(RefusalDelta(state.index, refusal))
            else:
                self._skipped(state, "refusal", refusal, out)
        if unknown is not None:
            self._take_delta_fields(state, unknown, out)

    def _choice_index(self, value: Any, raw: Any, out: list[Event]) -> int | None:
        """The choice index of a piece whose ``index`` is not a plain integer, or None (dropped).

        Read like a call's index (``"1"``, ``1.0``: noted). Missing or unusable, it can only be
        guessed as 0, and only while the stream has no other choice; the guess is remembered
        (``ChoiceState.guessed``): if another choice turns up, choice 0's calls are refused, since
        some of its fragments may have been another choice's. With several choices, a piece that names
        none is dropped and every open call refused.
        """
        if value is not None:
            index, note = read_index(value)
            if index is not None:
                self._record(
                    Anomaly(AnomalyCode.NON_INTEGER_INDEX, f"choice {note}", index, raw=raw), None, out
                )
                return index
        if any(i != 0 for i in self._choices):
            self._damaged(None, f"a choice piece with index {show(value)} among several choices", raw, out)
            return None
        self._record(
            Anomaly(AnomalyCode.MALFORMED_CHUNK, f"choice index {show(value)} read as 0", 0, raw=raw),
            None,
            out,
        )
        state = self._choices.get(0)
        if state is None:
            state = self._open_choice(0, out)
        if state is not None:
            state.guessed = True
        return 0

    def _finish_reason(self, state: ChoiceState, value: Any, out: list[Event]) -> str | None:
        if type(value) is str and 0 < len(value) <= MAX_LABEL:
            return value
        if value == "":
            note = Anomaly(
                AnomalyCode.FINISH_REASON_EMPTY, 'finish_reason was ""; read as not finished', state.index
            )
        else:
            note = Anomaly(
                AnomalyCode.MALFORMED_CHUNK,
                f"finish_reason was {show(value)}; read as not finished",
                state.index,
                raw=value,
            )
        self._record(note, None, out)
        return None

    def _skipped(self, state: ChoiceState, what: str, value: Any, out: list[Event]) -> None:
        self._record(
            Anomaly(
                AnomalyCode.MALFORMED_CHUNK,
                f"{what} was a {type(value).__name__}; skipped",
                state.index,
                raw=value,
            ),
            None,
            out,
        )

    def _read_fragment(
        self, state: ChoiceState, entry: Any, out: list[Event], events: bool
    ) -> ToolCall | None:
        """One ``delta.tool_calls`` entry: clean its values, find its call, write what it carries.
        Returns the call it reached (None when it opened none).

        One path, with an early exit: a plain continuation (an index and argument text, nothing
        else, that the router finds a call for) of a choice with no call watched for resends is
        handed to the owner (:meth:`~._owner.CallOwner.fragment`) as soon as it is routed; every
        other fragment goes on through the lines below it, to the same entrance."""
        read = _read_sdk(entry, _SdkEntry, _ENTRY)
        if read is None:
            self._damaged(state, "a tool call entry is not an object", entry, out)
            return None
        extra, (index, fid, ftype, function) = read
        notes: list[Anomaly] = []
        unreadable: str | None = None
        name = arguments = None
        replace = False
        if function is not None:
            name, arguments, replace, fextra, unreadable = _function_part(
                function, self.limits.max_depth, notes, entry
            )
            if fextra is not None:
                extra = {**extra, "function": fextra} if extra else {"function": fextra}
        custom = extra.get("custom") if extra is not None else None
        if custom is not None and extra is not None:
            # A custom tool's call, in the shape the API defines for it: its name and its input (text,
            # not JSON) sit in ``custom``. Read into the same call as a function's would be; the
            # input is never routed or resent as JSON (``argument_text``), and the type decides at seal
            # which rules the call is held to, so a shape that disagrees with its type is refused below.
            extra = {k: v for k, v in extra.items() if k != "custom"} or None
            if function is not None:
                notes.append(
                    Anomaly(AnomalyCode.MALFORMED_CHUNK, "it carries both function and custom", raw=entry)
                )
                unreadable = unreadable or "it carries both a function and a custom tool's part"
            else:
                name, arguments, cextra, why = _custom_part(custom, notes, entry)
                unreadable = unreadable or why
                if cextra is not None:
                    extra = {**extra, "custom": cextra} if extra else {"custom": cextra}
            state.table.custom = True
        elif ftype == CUSTOM:
            state.table.custom = True
        if index is not None and (type(index) is not int or index < 0 or index >= MAX_INDEX):
            index, why = read_index(index)
            if why is not None:
                notes.append(Anomaly(AnomalyCode.NON_INTEGER_INDEX, why, raw=entry))
        if fid is not None:
            fid, why = clean_str(fid, "id", notes, entry)
            unreadable = unreadable or why
        if ftype is not None and (type(ftype) is not str or len(ftype) > MAX_LABEL):
            notes.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, f"type was {show(ftype)}", raw=entry))
            ftype = None
            unreadable = "its type could not be read"
        table = state.table
        plain = extra is None and unreadable is None
        # A custom tool's input is text, not JSON: it is routed by index, id and name alone.
        routed = arguments if custom is None else None
        empty = plain and not (custom is not None and arguments)
        call, index, flags = resolve_call(table, index, fid, name, routed, empty, state.index, entry, notes)
        owner = self._owner
        bare = fid is None and name is None and ftype is None and not flags and not replace
        if call is not None and plain and bare and arguments and not (notes or table.chains or table.custom):
            # A plain continuation, with no call of the choice watched for resends (every call's
            # first text is): nothing more to route.
            self._touched = call
            owner.fragment(call, (arguments, entry, events), out)
            if owner.notes:  # a limit it reached
                for note in owner.take_notes():
                    self._record(note, call, out)
            return call
        if index == SKIP:
            for note in notes:
                self._record(note, None, out)
            return None
        opening = call is None
        if call is None:
            call = self._open_call(state, index, entry, notes, out)
            if call is None:
                return None
        self._touched = call
        if extra is not None and not self._keep(extra, "a tool call's unknown fields", state.index, out):
            extra = None
        kind = ftype if ftype and ftype != "null" else call.type
        if custom is not None and kind is None:
            ftype = kind = CUSTOM  # no type stated: its shape says what it is
        clash = _type_clash(kind, call.type, ftype, custom is not None, function is not None)
        if clash is not None:
            notes.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, clash, raw=entry))
        text: str | None = None
        replace_all = False
        if arguments:
            # The text to add: as sent, unless a cumulative resend, a replacement, a further value or
            # a sealed call makes it something else (``_route.argument_text``). A custom tool's input
            # is appended as it came (it is no JSON whose resends could be told).
            further = bool(flags & FURTHER) or custom is not None
            text, replace_all = argument_text(table, call, arguments, replace, further, entry, notes)
        taint = _distrust(call, unreadable, clash, flags)
        if fid is not None or name is not None or ftype is not None or extra is not None or opening:
            identity = Identity(fid, name, ftype, extra, bool(flags & NEW_ID), entry)
            owner.identify(call, identity, out, opening)
        if taint is not None:
            owner.taint(call, taint)
        if replace_all:
            owner.resend(call, (text or "", entry, events), out)
        else:
            owner.fragment(call, (text or "", entry, events), out)
        if fid is not None and call.id == fid:
            table.by_id.setdefault(fid, call)
        if owner.notes:
            notes.extend(owner.take_notes())
        for note in notes:
            self._record(note, call, out)
        return call

    def _read_legacy(self, state: ChoiceState, fc: Any, out: list[Event], events: bool) -> None:
        """A legacy ``delta.function_call`` piece, read as the entry of tool call 0 (its id will be
        synthesized), through the same lines as any entry."""
        if read_object(fc, _FUNCTION) is None:
            self._damaged(state, "function_call is not an object", fc, out)
            return
        entry = {"index": 0, "type": "function", "function": fc}
        call = self._read_fragment(state, entry, out, events)
        note = Anomaly(
            AnomalyCode.LEGACY_FUNCTION_CALL, "legacy delta.function_call read as a tool call", state.index
        )
        self._record(note, call, out)

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

    def _take_chunk_fields(self, unknown: dict[str, Any], out: list[Event]) -> None:
        """Unknown chunk fields, kept for the final completion (rule 6), within the limits."""
        for key, value in unknown.items():
            if self._keep(value, f"the chunk field {show(key)}", None, out):
                self._extra[key] = value

    def _duplicate_choice(self, index: int, raw: Any, out: list[Event]) -> None:
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
            out,
        )
        state = self._choices.get(index)
        if state is not None:
            why = "two pieces of one chunk claimed its choice, so its text cannot be told apart"
            self._refuse(list(state.table.calls), None, out, None, why=why)
            state.duplicated = True

    def _take_role(self, state: ChoiceState, role: Any, out: list[Event]) -> None:
        if type(role) is not str or len(role) > MAX_LABEL:
            self._record(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, f"role was {show(role)}; skipped", state.index),
                None,
                out,
            )
        elif state.role is not None:
            self._record(
                Anomaly(AnomalyCode.ROLE_REPEATED, "role repeated on a later delta", state.index),
                None,
                out,
            )
        elif role:
            state.role = role

    def _take_content(self, state: ChoiceState, text: str, out: list[Event], events: bool) -> None:
        index = state.index
        if state.finish_reason is not None:
            self._record(
                Anomaly(AnomalyCode.FRAGMENT_AFTER_FINISH, "content after finish_reason", index), None, out
            )
        if self._charge(text_size(text), "content", index, out):
            push(state.content, text)
        if events:
            out.append(content_delta(index, text))

    def _take_delta_fields(self, state: ChoiceState, extra: dict[str, Any], out: list[Event]) -> None:
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
                if self._charge(text_size(value), "reasoning text", index, out):
                    parts = state.reasoning.get(key)
                    if parts is None:
                        parts = state.reasoning[key] = []
                    push(parts, value)
                out.append(ReasoningDelta(index, key, value))
            elif not isinstance(value, (dict, list, BaseModel)) or not self._keep(
                value, f"the delta field {show(key)}", index, out
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

    def _take_logprobs(self, state: ChoiceState, logprobs: Any, out: list[Event]) -> None:
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
                    out,
                )
                continue
            if not self._keep(items, f"logprobs.{field}", index, out):
                continue
            if field == "content":
                if state.logprobs_content is None:
                    state.logprobs_content = []
                state.logprobs_content.extend(items)
            else:
                if state.logprobs_refusal is None:
                    state.logprobs_refusal = []
                state.logprobs_refusal.extend(items)

    def _finish(self, state: ChoiceState, reason: str, out: list[Event]) -> None:
        t = self._now()
        notes: list[Anomaly] = []
        first = state.finish_reason is None
        # A finish decides when it is the first, or seals a call opened after the first.
        deciding = first or any(c.status == "open" for c in state.table.calls)
        if self._recovery is not None and state.finish_reason is None and reason != "length":
            self._recover_text_calls(state, out)
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
                    out.append(ToolCallIncomplete(call))
        else:
            self._seal_calls(state, calls, t, out)
        if calls:
            self._ensure_ids(state, ordered(calls))
        for note in notes:
            self._record(note, None, out)
        self._decide(state, deciding)
        out.append(ChoiceFinished(state.index, reason))

    def _recover_text_calls(self, state: ChoiceState, out: list[Event]) -> None:
        """Opt-in (Q32): tool calls written as text in the finished content become calls, read
        as the entries a provider would have streamed, by the one reader."""
        if state.table.calls or not state.content:
            return
        assert self._recovery is not None
        rest, entries = self._recovery.entries("".join(state.content), 0, self.limits.max_depth)
        if entries:
            state.content = [rest] if rest else []
            for entry, note in entries:
                call = self._read_fragment(state, entry, out, True)
                self._record(note, call, out)

    def _end(self, error: BaseException | None, closed: bool, t: float, out: list[Event]) -> None:
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
                    out,
                )
                state.finish_reason = "tool_calls"
                self._seal_calls(state, open_calls, t, out)
                continue
            if clean and state.finish_reason not in (None, "length"):
                self._seal_calls(state, open_calls, t, out)
                continue
            if error is not None:
                reason = f"the stream failed ({type(error).__name__}) before the call was sealed"
            elif closed:
                reason = "the stream was closed before the call was sealed"
            else:
                reason = "the stream ended before the choice received a finish_reason"
            for call in open_calls:
                if self._owner.end(call, reason, t):
                    out.append(ToolCallIncomplete(call))

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


_NOT_NONE = partial(is_not, None)
_CHUNK = Shape(CHUNK_KEYS, ("usage", "choices"))
_CHOICE = Shape(
    frozenset({"index", "delta", "finish_reason", "logprobs"}),
    ("index", "delta", "finish_reason", "logprobs"),
)
_DELTA = Shape(DELTA_KEYS, ("tool_calls", "content", "role", "refusal", "function_call"))
_ENTRY = Shape(TOOL_CALL_KEYS, ("index", "id", "type", "function"))
_FUNCTION = Shape(FUNCTION_KEYS, ("name", "arguments"))
# Each shape's ``take`` as a name of its own: the chunk reader calls them once per chunk.
_TAKE_CHUNK, _TAKE_CHOICE, _TAKE_DELTA = _CHUNK.take, _CHOICE.take, _DELTA.take
_TAKE_ENTRY, _TAKE_FUNCTION = _ENTRY.take, _FUNCTION.take
_CUSTOM = Shape(frozenset({"name", "input"}), ("name", "input"))
"""A custom tool's call part (``{"type": "custom", "custom": {"name": ..., "input": ...}}``): the
SDK's stream types declare only ``function``, so it arrives among an entry's unknown fields."""


def _read_sdk(value: Any, sdk: type[Any], shape: Shape) -> tuple[dict[str, Any] | None, Any] | None:
    """``(unknown fields, values)`` of one object of a chunk, or None when it is not an object:
    the values straight from ``__dict__`` when it is the SDK's own class with nothing extra (where
    pydantic keeps every declared field, which is what :func:`~._values.read_object` would return
    for it, without the call), else through ``read_object``. Either way the values then meet the
    same decisions. (The chunk itself, and the one plain continuation, are read in
    :meth:`Accumulator._read`'s own frame.)"""
    if type(value) is sdk and not value.__pydantic_extra__:
        try:
            return None, shape.take(value.__dict__)
        except KeyError:  # a declared field missing from __dict__ (model_construct)
            pass
    read = read_object(value, shape)
    return None if read is None else (read[1], read[2])


def _function_part(
    function: Any, max_depth: int, notes: list[Anomaly], raw: Any
) -> tuple[Any, Any, bool, dict[str, Any] | None, str | None]:
    """``(name, arguments, replaces, unknown fields, unreadable)`` of an entry's ``function``: its
    values cleaned; arguments that are not text are read by :func:`_odd_arguments`."""
    read = _read_sdk(function, _SdkFunction, _FUNCTION)
    if read is None:
        notes.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "function is not an object", raw=raw))
        return None, None, False, None, "its function is not an object"
    fextra, (name, arguments) = read
    unreadable = replace = None
    if name is not None:
        name, unreadable = clean_str(name, "name", notes, raw)
    if arguments is not None and type(arguments) is not str:
        arguments, replace, why = _odd_arguments(arguments, max_depth, notes, raw)
        unreadable = unreadable or why
    return name, arguments, bool(replace), fextra, unreadable


def _distrust(
    call: ToolCall, unreadable: str | None, clash: str | None, flags: int
) -> MalformedArguments | None:
    """Why a fragment makes its call untrustworthy (refused at seal), else None: a part of it could
    not be read, its shape disagrees with its type, or it is a further JSON value."""
    if unreadable is not None:
        return MalformedArguments(
            f"a fragment of this call could not be read ({unreadable}): the call may not be what "
            "the provider sent, so it is refused",
            raw=call.arguments,
        )
    if clash is not None:
        return MalformedArguments(
            f"{clash}: a custom tool's input is held to its format and a function's arguments to "
            "its schema, and this call cannot be told to be either, so it is refused",
            raw=call.arguments,
        )
    if flags & FURTHER:
        return MalformedArguments(
            "a further JSON value arrived for this call after its arguments were complete, with "
            "no new id and no name: the call holds the concatenated text and is refused, since the "
            "later value contradicts the first and neither can be trusted alone",
            raw=call.arguments,
        )
    return None


def _custom_part(
    value: Any, notes: list[Anomaly], raw: Any
) -> tuple[Any, Any, dict[str, Any] | None, str | None]:
    """``(name, input, unknown fields, unreadable)`` of an entry's ``custom`` part: its values
    cleaned like a function's; an input that is not text cannot be read (the call is refused)."""
    read = read_object(value, _CUSTOM)
    if read is None:
        notes.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "custom is not an object", raw=raw))
        return None, None, None, "its custom part is not an object"
    _, unknown, (name, text) = read
    why = None
    if name is not None:
        name, why = clean_str(name, "name", notes, raw)
    if text is not None and type(text) is not str:
        notes.append(
            Anomaly(
                AnomalyCode.ARGUMENTS_NOT_STRING,
                f"a custom tool's input was a {type(text).__name__}; the call is refused",
                raw=raw,
            )
        )
        return name, None, unknown, why or f"its input was a {type(text).__name__}, not text"
    return name, text, unknown, why


def _type_clash(
    kind: str | None, was: str | None, ftype: str | None, custom: bool, function: bool
) -> str | None:
    """Why a fragment's wire shape disagrees with the call's type, else None: ``custom`` under
    any type but ``"custom"``, ``function`` under ``"custom"``, or a type that changes between the
    two. The type decides which checks the seal applies (a format or a schema), so a call whose
    shape and type differ could pass the checks of the one it is not."""
    if custom and kind != CUSTOM:
        return f"its type is {show(kind)}, yet it carries a custom tool's input"
    if function and kind == CUSTOM:
        return "its type is 'custom', yet it carries function arguments"
    if ftype and ftype != "null" and was is not None and (ftype == CUSTOM) != (was == CUSTOM):
        return f"its type changed from {show(was)} to {show(ftype)}"
    return None


def _odd_arguments(
    value: Any, max_depth: int, notes: list[Anomaly], raw: Any
) -> tuple[str | None, bool, str | None]:
    """``arguments`` that is not a string: ``(text, replaces, unreadable)``.

    A JSON object or array is the whole argument text sent as a value (Q18): serialised once and
    read as replacing the text so far (noted). Anything else (a number, a bool, a ``str`` subclass,
    a value JSON cannot hold) cannot be read: the call is refused.
    """
    if type(value) is dict or type(value) is list:
        notes.append(Anomaly(AnomalyCode.ARGUMENTS_OBJECT, "arguments arrived as a JSON value", raw=raw))
        text, error = json_text(value, max_depth)
        if text is None:
            return None, False, f"arguments arrived as an object that is not JSON: {error}"
        return text, True, None
    notes.append(
        Anomaly(
            AnomalyCode.ARGUMENTS_NOT_STRING,
            f"arguments was a {type(value).__name__}; the call is refused",
            raw=raw,
        )
    )
    return None, False, f"its arguments were a {type(value).__name__}, not text"


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
