"""The one reader: a raw chunk is read, routed and appended by these lines, whatever its shape.

Every chunk (the SDK's ``ChatCompletionChunk``, a subclass, a plain ``dict`` decoded from SSE or
replayed) goes through :func:`read_chunk`: the envelope, each choice, each delta, each
``delta.tool_calls`` entry. Each decision (which choice, which call, which id and name, which limit,
which anomaly) is made once, here or in the module this calls for it (``_values.py`` for one value,
``_route.py`` for which call a fragment belongs to); there is no second path for a common shape.
It is cheap because a standard chunk asks few questions, not because it is read by other code
(the one shortcut, :func:`_continues`, only tells that a chunk asks none of them and hands its
fragment to the owner, as the long way would: ``tests/core/test_hot_exit.py`` holds it to that):
the fields of an object are read from one dict, nothing is built per chunk but the events asked
for, and argument text is appended, never scanned (rule 2 of docs/design.md). Where an object is
one of the SDK's own chunk classes with no unknown fields, the line that reads it takes the values
straight from its ``__dict__`` (where pydantic keeps every declared field), which is what
:func:`~._values.read_object` would return for it, without the call; every other object goes
through ``read_object``. Either way the values then meet the same decisions.

``want`` is the switch between :meth:`Accumulator.feed` with events and the wrapped stream that
nobody reads events from: without it, the two events nearly every chunk makes (``ContentDelta``,
``ArgumentsDelta``) are not built and the scanner is not asked where the JSON stands.

Fail closed (rule 9): a part of a chunk that cannot be read (not an object, a value of an
unexpected type, a subclass where text was expected) is recorded, and the call it may have belonged
to is refused: the fragment's own call when it is known, else every open call of its choice, else
every open call of the stream. A call never ends ``ready`` on text that is not everything that
arrived for it.
"""

from __future__ import annotations

from functools import partial
from operator import is_not
from typing import TYPE_CHECKING, Any

from openai.types.chat import ChatCompletionChunk as _SdkChunk
from openai.types.chat.chat_completion_chunk import Choice as _SdkChoice
from openai.types.chat.chat_completion_chunk import ChoiceDelta as _SdkDelta
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall as _SdkEntry
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCallFunction as _SdkFunction

from ..errors import InBandError, MalformedArguments
from ._anomaly import Anomaly, AnomalyCode
from ._call import CUSTOM, Identity, ToolCall, push, text_size
from ._events import (
    Event,
    RefusalDelta,
    ToolCallStarted,
)
from ._route import FURTHER, NEW_ID, SKIP, CallTable, argument_text, open_call, resolve_call
from ._values import (
    CHUNK_KEYS,
    DELTA_KEYS,
    FUNCTION_KEYS,
    MAX_INDEX,
    MAX_LABEL,
    TOOL_CALL_KEYS,
    Shape,
    clean_str,
    json_text,
    read_index,
    read_object,
    show,
)

if TYPE_CHECKING:
    from ._accumulator import Accumulator
    from ._store import CallStore

__all__ = ["ChoiceState", "open_fragment_call", "read_chunk", "read_fragment"]


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


def read_chunk(acc: Accumulator, chunk: Any, events: list[Event], want: bool) -> None:
    """Read one chunk into ``acc``; what happened is appended to ``events``.

    The envelope, then each choice: its delta (role, content, refusal, unknown fields, tool-call
    entries), logprobs and finish_reason. Raises :class:`InBandError` for a chunk carrying an
    ``error`` (the accumulator ends the input with it); every other problem is recorded, and
    refuses what it may have touched.
    """
    unknown: dict[str, Any] | None = None
    if type(chunk) is _SdkChunk and not chunk.__pydantic_extra__:
        fields = chunk.__dict__
        try:
            usage, choices = _CHUNK.take(fields)
        except KeyError:  # a declared field missing from __dict__ (model_construct)
            fields, unknown, (usage, choices) = read_object(chunk, _CHUNK)  # type: ignore[misc]
    else:
        read = read_object(chunk, _CHUNK)
        if read is None:
            # Whatever it carried cannot be told: any open call may have lost a fragment (rule 9).
            acc._damaged(None, f"a chunk must be an object, got {type(chunk).__name__}", chunk, events)
            return
        fields, unknown, (usage, choices) = read
    if unknown is not None:
        error = unknown.get("error")
        if error:
            # Like the SDK (``openai._streaming``): any truthy ``error`` is a failure, object or string.
            raise InBandError(error)
        acc._take_chunk_fields(unknown, events)
    probe = acc._envelope_probe  # the envelope fields not kept yet (None, once all are)
    if probe is not None:
        try:
            news = any(map(_NOT_NONE, probe(fields)))  # identity only: no value's __eq__ runs
        except KeyError:  # a dict, or a model built without them: asked one by one
            news = any(fields.get(key) is not None for key in acc._envelope_unset)
        if news:
            acc._take_envelope(fields)
    if usage is not None:
        acc._take_usage(usage, events)
    if type(choices) is not list or not choices:
        if choices is not None and type(choices) is not list:
            # What else the chunk carried cannot be told: any open call may have lost a fragment.
            acc._damaged(None, "choices is not a list", choices, events)
        elif usage is None:
            acc._record(
                Anomaly(AnomalyCode.EMPTY_CHOICES, "a chunk had no choices and no usage", raw=chunk),
                None,
                events,
            )
        return
    if len(choices) == 1 and _continues(acc, choices[0], events, want):
        return
    seen: set[int] | None = set() if len(choices) > 1 else None
    for raw in choices:
        if type(raw) is _SdkChoice and not raw.__pydantic_extra__:
            try:
                index, delta, finish, logprobs = _CHOICE.take(raw.__dict__)
            except KeyError:  # a declared field missing from __dict__ (model_construct)
                index, delta, finish, logprobs = read_object(raw, _CHOICE)[2]  # type: ignore[index]
        else:
            read = read_object(raw, _CHOICE)
            if read is None:
                acc._damaged(None, "a choice is not an object", raw, events)
                continue
            index, delta, finish, logprobs = read[2]
        if type(index) is not int or index < 0 or index >= MAX_INDEX:
            index = _choice_index(acc, index, raw, events)
            if index is None:
                continue
        if seen is not None:
            if index in seen:
                # Two pieces of one chunk (or two choices of one completion) claim the same choice:
                # which text belongs to which cannot be told, so none of that choice's calls runs.
                acc._duplicate_choice(index, raw, events)
                continue
            seen.add(index)
        state = acc._choices.get(index)
        if state is None:
            state = acc._open_choice(index, events)
            if state is None:
                continue
        sealing: list[ToolCall] | None = None
        try:
            if delta is not None:
                rest: dict[str, Any] | None = None
                readable = True
                if type(delta) is _SdkDelta and not delta.__pydantic_extra__:
                    try:
                        tool_calls, content, role, refusal, function_call = _DELTA.take(delta.__dict__)
                    except KeyError:  # a declared field missing from __dict__ (model_construct)
                        _, rest, (tool_calls, content, role, refusal, function_call) = read_object(  # type: ignore[misc]
                            delta, _DELTA
                        )
                else:
                    read = read_object(delta, _DELTA)
                    if read is None:
                        readable = False
                    else:
                        _, rest, (tool_calls, content, role, refusal, function_call) = read
                if not readable:
                    acc._damaged(state, "delta is not an object", delta, events)
                else:
                    if content is not None:
                        if type(content) is str:
                            if content:
                                acc._take_content(state, content, events, want)
                        else:
                            _skipped(acc, state, "content", content, events)
                    if rest is not None or role is not None or refusal is not None:
                        _read_delta_rest(acc, state, role, refusal, rest, events)
                    if tool_calls:
                        if type(tool_calls) is list:
                            for entry in tool_calls:
                                if entry is not None:
                                    acc._touched = None
                                    try:
                                        read_fragment(acc, state, entry, events, want)
                                    except Exception as exc:
                                        acc._fragment_fault(state, exc, entry, events)
                        else:
                            acc._damaged(state, "tool_calls is not a list", tool_calls, events)
                    elif function_call is not None:
                        _read_legacy(acc, state, function_call, events, want)
            if logprobs is not None:
                acc._take_logprobs(state, logprobs, events)
            if finish is not None:
                reason = _finish_reason(acc, state, finish, events)
                if reason is not None:
                    # The calls this finish may seal: if sealing fails, none of them may stay ready.
                    sealing = [c for c in state.table.calls if c.status == "open"]
                    acc._finish(state, reason, events)
        except Exception as exc:
            acc._fault(state, exc, sealing, events)


_NOT_NONE = partial(is_not, None)
_CHUNK = Shape(CHUNK_KEYS, ("usage", "choices"))
_CHOICE = Shape(
    frozenset({"index", "delta", "finish_reason", "logprobs"}),
    ("index", "delta", "finish_reason", "logprobs"),
)
_DELTA = Shape(DELTA_KEYS, ("tool_calls", "content", "role", "refusal", "function_call"))
_ENTRY = Shape(TOOL_CALL_KEYS, ("index", "id", "type", "function"))
_FUNCTION = Shape(FUNCTION_KEYS, ("name", "arguments"))
_CUSTOM = Shape(frozenset({"name", "input"}), ("name", "input"))
"""A custom tool's call part (``{"type": "custom", "custom": {"name": ..., "input": ...}}``): the
SDK's stream types declare only ``function``, so it arrives among an entry's unknown fields."""


def _continues(acc: Accumulator, raw: Any, events: list[Event], want: bool) -> bool:
    """The chunk's one choice is the SDK's own piece of nothing but one plain continuation (an
    index and argument text, no ``{``, for a call the choice has at that index): handed to the
    owner's one entrance for text (:meth:`~._call.CallOwner.fragment`). True when it took it; False, with
    nothing done, for anything else, which the lines of :func:`read_chunk` read.

    No decision is made here: each test only checks that the piece asks none of the questions
    the full reading answers (an unknown field, a finish, logprobs, content, a role, a refusal, an
    id, a name, a type, a text that may open a new JSON value: ``_route.resolve_call``), and the
    owner decides what the text does to the call, as it does for every fragment. Most chunks of a
    stream are this piece; reading it in one frame is what keeps a chunk cheap (rule 7).
    """
    if type(raw) is not _SdkChoice or raw.__pydantic_extra__:
        return False
    try:
        index, delta, finish, logprobs = _CHOICE.take(raw.__dict__)
    except KeyError:
        return False
    if finish is not None or logprobs is not None or type(delta) is not _SdkDelta or delta.__pydantic_extra__:
        return False
    try:
        tool_calls, content, role, refusal, function_call = _DELTA.take(delta.__dict__)
    except KeyError:
        return False
    if (
        content is not None
        or role is not None
        or refusal is not None
        or function_call is not None
        or type(tool_calls) is not list
        or len(tool_calls) != 1
        or type(index) is not int
    ):
        return False
    state = acc._choices.get(index)
    entry = tool_calls[0]
    if state is None or type(entry) is not _SdkEntry or entry.__pydantic_extra__:
        return False
    try:
        position, fid, ftype, function = _ENTRY.take(entry.__dict__)
    except KeyError:
        return False
    if (
        fid is not None
        or ftype is not None
        or type(function) is not _SdkFunction
        or function.__pydantic_extra__
    ):
        return False
    try:
        name, arguments = _FUNCTION.take(function.__dict__)
    except KeyError:
        return False
    if name is not None or type(arguments) is not str or not arguments or "{" in arguments:
        return False
    table = state.table
    call = table.by_index.get(position) if type(position) is int else None
    if call is None or table.chains or table.custom or not call.begun:
        return False
    acc._touched = call
    owner = acc._owner
    try:
        owner.fragment(call, (arguments, entry, want), events)
    except Exception as exc:
        acc._fragment_fault(state, exc, entry, events)
        return True
    if owner.notes:  # a limit it reached
        for note in owner.take_notes():
            acc._record(note, call, events)
    return True


def _read_delta_rest(
    acc: Accumulator,
    state: ChoiceState,
    role: Any,
    refusal: Any,
    unknown: dict[str, Any] | None,
    events: list[Event],
) -> None:
    """The rarer parts of a delta: role, refusal, unknown fields (reasoning text, Q29)."""
    if role is not None:
        acc._take_role(state, role, events)
    if refusal is not None:
        if type(refusal) is str:
            if refusal:
                if acc._charge(text_size(refusal), "refusal text", state.index, events):
                    push(state.refusal, refusal)
                events.append(RefusalDelta(state.index, refusal))
        else:
            _skipped(acc, state, "refusal", refusal, events)
    if unknown is not None:
        acc._take_delta_fields(state, unknown, events)


def _choice_index(acc: Accumulator, value: Any, raw: Any, events: list[Event]) -> int | None:
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
            acc._record(
                Anomaly(AnomalyCode.NON_INTEGER_INDEX, f"choice {note}", index, raw=raw), None, events
            )
            return index
    if any(i != 0 for i in acc._choices):
        acc._damaged(None, f"a choice piece with index {show(value)} among several choices", raw, events)
        return None
    acc._record(
        Anomaly(AnomalyCode.MALFORMED_CHUNK, f"choice index {show(value)} read as 0", 0, raw=raw),
        None,
        events,
    )
    state = acc._choices.get(0)
    if state is None:
        state = acc._open_choice(0, events)
    if state is not None:
        state.guessed = True
    return 0


def _finish_reason(acc: Accumulator, state: ChoiceState, value: Any, events: list[Event]) -> str | None:
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
    acc._record(note, None, events)
    return None


def _skipped(acc: Accumulator, state: ChoiceState, what: str, value: Any, events: list[Event]) -> None:
    acc._record(
        Anomaly(
            AnomalyCode.MALFORMED_CHUNK,
            f"{what} was a {type(value).__name__}; skipped",
            state.index,
            raw=value,
        ),
        None,
        events,
    )


def read_fragment(
    acc: Accumulator, state: ChoiceState, entry: Any, events: list[Event], want: bool
) -> ToolCall | None:
    """One ``delta.tool_calls`` entry: clean its values, find its call, write what it carries.
    Returns the call it reached (None when it opened none).

    One path, with an early exit: a plain continuation (an index and argument text, nothing
    else, that the router finds an open call for; one in a chunk that carries nothing else was
    handed over before, by :func:`_continues`) of a call that is open and begun is handed to the
    owner (:meth:`~._call.CallOwner.fragment`) as soon as it is routed; every other fragment goes
    on through the lines below it, to the same entrance.
    """
    extra: dict[str, Any] | None = None
    if type(entry) is _SdkEntry and not entry.__pydantic_extra__:
        try:
            index, fid, ftype, function = _ENTRY.take(entry.__dict__)
        except KeyError:  # a declared field missing from __dict__ (model_construct)
            index, fid, ftype, function = read_object(entry, _ENTRY)[2]  # type: ignore[index]
    else:
        read = read_object(entry, _ENTRY)
        if read is None:
            acc._damaged(state, "a tool call entry is not an object", entry, events)
            return None
        _, extra, (index, fid, ftype, function) = read
    notes: list[Anomaly] = []
    unreadable: str | None = None
    name = arguments = None
    replace = False
    if function is not None:
        fextra: dict[str, Any] | None = None
        if type(function) is _SdkFunction and not function.__pydantic_extra__:
            try:
                name, arguments = _FUNCTION.take(function.__dict__)
            except KeyError:  # a declared field missing from __dict__ (model_construct)
                name, arguments = read_object(function, _FUNCTION)[2]  # type: ignore[index]
        else:
            read = read_object(function, _FUNCTION)
            if read is None:
                notes.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "function is not an object", raw=entry))
                unreadable = "its function is not an object"
            else:
                _, fextra, (name, arguments) = read
        if name is not None:
            name, why = clean_str(name, "name", notes, entry)
            unreadable = unreadable or why
        if arguments is not None and type(arguments) is not str:
            arguments, replace, why = _odd_arguments(arguments, acc.limits.max_depth, notes, entry)
            unreadable = unreadable or why
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
    owner = acc._owner
    if (
        call is not None
        and plain
        and arguments
        and fid is None
        and name is None
        and ftype is None
        and not flags
        and not notes
        and not replace
        and not table.chains
        and not table.custom
        and call.begun
    ):
        # A plain continuation of an open call whose text has begun: nothing more to route.
        acc._touched = call
        owner.fragment(call, (arguments, entry, want), events)
        if owner.notes:  # a limit it reached
            for note in owner.take_notes():
                acc._record(note, call, events)
        return call
    if index == SKIP:
        for note in notes:
            acc._record(note, None, events)
        return None
    opening = call is None
    if call is None:
        call = open_fragment_call(acc, state, index, entry, notes, events)
        if call is None:
            return None
    acc._touched = call
    if extra is not None and not acc._keep(extra, "a tool call's unknown fields", state.index, events):
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
    taint = None
    if unreadable is not None:
        taint = MalformedArguments(
            f"a fragment of this call could not be read ({unreadable}): the call may not be what "
            "the provider sent, so it is refused",
            raw=call.arguments,
        )
    elif clash is not None:
        taint = MalformedArguments(
            f"{clash}: a custom tool's input is held to its format and a function's arguments to "
            "its schema, and this call cannot be told to be either, so it is refused",
            raw=call.arguments,
        )
    elif flags & FURTHER:
        taint = MalformedArguments(
            "a further JSON value arrived for this call after its arguments were complete, with "
            "no new id and no name: the call holds the concatenated text and is refused, since the "
            "later value contradicts the first and neither can be trusted alone",
            raw=call.arguments,
        )
    if fid is not None or name is not None or ftype is not None or extra is not None or opening:
        owner.identify(call, Identity(fid, name, ftype, extra, bool(flags & NEW_ID), entry), events, opening)
    if taint is not None:
        owner.taint(call, taint)
    if replace_all:
        owner.resend(call, (text or "", entry, want), events)
    else:
        owner.fragment(call, (text or "", entry, want), events)
    if fid is not None and call.id == fid:
        table.by_id.setdefault(fid, call)
    if owner.notes:
        notes.extend(owner.take_notes())
    for note in notes:
        acc._record(note, call, events)
    return call


def open_fragment_call(
    acc: CallStore, state: ChoiceState, index: int, raw: Any, notes: list[Anomaly], events: list[Event]
) -> ToolCall | None:
    """Open the call a fragment starts, or None past ``Limits.max_calls_per_choice`` (counted)."""
    table = state.table
    limits = acc.limits
    if len(table.calls) > limits.max_calls_per_choice:
        # One refused call is kept as the sample; beyond it only a counter grows.
        table.refused += 1
        acc._record(
            Anomaly(
                AnomalyCode.LIMIT_EXCEEDED,
                f"more than Limits.max_calls_per_choice={limits.max_calls_per_choice} tool calls; "
                "further calls were counted, not kept",
                state.index,
            ),
            None,
            events,
        )
        return None
    t = acc._now()
    call = open_call(table, acc._owner, state.index, index, t)
    acc._live.append(call)
    if state.duplicated:
        acc._owner.taint(
            call,
            MalformedArguments(
                "its choice was claimed by two pieces of one chunk, so its text cannot be told apart"
            ),
        )
    if acc.metrics.first_tool_call_at is None:
        acc.metrics.first_tool_call_at = t
    if state.finish_reason is not None:
        notes.append(
            Anomaly(
                AnomalyCode.FRAGMENT_AFTER_FINISH,
                "a new tool call opened after the choice's finish_reason",
                raw=raw,
            )
        )
    events.append(ToolCallStarted(call))
    return call


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


def _read_legacy(acc: Accumulator, state: ChoiceState, fc: Any, events: list[Event], want: bool) -> None:
    """A legacy ``delta.function_call`` piece, read as the entry of tool call 0 (its id will be
    synthesized), through the same lines as any entry."""
    if read_object(fc, _FUNCTION) is None:
        acc._damaged(state, "function_call is not an object", fc, events)
        return
    entry = {"index": 0, "type": "function", "function": fc}
    call = read_fragment(acc, state, entry, events, want)
    note = Anomaly(
        AnomalyCode.LEGACY_FUNCTION_CALL, "legacy delta.function_call read as a tool call", state.index
    )
    acc._record(note, call, events)
