"""The second reader: Responses API stream events in, the same :class:`ToolCall` objects out.

The Responses API streams typed events rather than chunks: ``response.output_item.added`` opens an
item (a ``function_call``, a ``message``, a ``reasoning`` item ...),
``response.function_call_arguments.delta`` carries a piece of a call's argument text,
``response.function_call_arguments.done`` and ``response.output_item.done`` close the item, and
``response.completed`` (or ``.incomplete``, ``.failed``, an ``error`` event) ends the response.
This module reads those events into the core's own state: the calls are :class:`ToolCall` objects
in the accumulator's call table (choice 0), written by the same methods, sealed and checked by the
same :class:`~._seal.CallChecks`, bounded by the same :class:`Limits`, and every repair is an
:class:`Anomaly` recorded the same way. :class:`ResponseAccumulator` is an
:class:`~._accumulator.Accumulator` whose ``feed`` reads Responses events; everything else
(recording anomalies, the stream budget, refusing calls on a fault, ending) is the accumulator's.

The rules, this API's own ways to fail closed (rule 9 of docs/design.md):

* **Text belongs to an item by its id** (rule 1 here): a delta joins the call whose
  ``output_item.added`` announced its ``item_id``, never a call found by position. A delta without
  a readable ``item_id`` refuses every open call (it could be anyone's); one for an id nobody
  announced is kept by no call, and a call that later claims that id is refused.
* **The deltas are the text; every other statement of it must agree.** The ``arguments`` of
  ``response.function_call_arguments.done``, of the ``response.output_item.done`` item and of the
  final response's item must equal the deltas, and their ``name`` and ``call_id`` the call's:
  otherwise the call is ``invalid`` (``arguments_mismatch``). Only when no delta arrived at all is
  the whole text read from one of them (``arguments_without_deltas``).
* **Sealed at the end of a completed response.** A call is sealed (parsed, checked against the
  request's tools, ``tool_choice`` and ``parallel_tool_calls``) once ``response.completed`` arrives,
  and only if its ``response.output_item.done`` said ``status: "completed"`` (or no status at all,
  as vLLM's gpt-oss sends it: then the response's status decides, ``item_status_missing``). An item
  whose ``output_item.done`` never came or said another status, a response that ends
  ``incomplete`` or ``failed``, an ``error`` event, or a stream that ends or breaks first, leave it
  ``incomplete``.
* **The index is the item's ``output_index``**: ``tool_calls`` are in output order.

Tools and ``tool_choice`` come in this API's flat shape (``{"type": "function", "name": ...,
"parameters": ..., "strict": ...}``); :func:`chat_tools` and :func:`chat_tool_choice` give them in
the shape the checks read, in one place.

The final :class:`openai.types.responses.Response` is the one the server sent in its final event
(built once, at the end), with each ``function_call`` item's ``call_id`` as the call's (a
synthesized one when the server sent none); when that response carries no ``output``, it is built
from the ``response.output_item.done`` items.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ..errors import InBandError, IncompleteStreamError, InternalFault, LimitExceeded, MalformedArguments
from ._accumulator import Accumulator, _ordered
from ._anomaly import Anomaly, AnomalyCode
from ._call import ToolCall
from ._events import (
    ChoiceFinished,
    ContentDelta,
    Event,
    ReasoningDelta,
    RefusalDelta,
    ToolCallIncomplete,
    ToolCallInvalid,
)
from ._limits import Limits, retained
from ._read import ChoiceState, _open, append_text
from ._schema import _as_mapping
from ._serialisable import serialisable
from ._values import MAX_LABEL, Shape, clean_str, opt_int, opt_str, read_index, show
from ._values import read_object as _read_object

__all__ = ["ResponseAccumulator", "chat_tool_choice", "chat_tools", "response_class"]

_NO_EVENTS: Sequence[Event] = ()

_EVENT = frozenset(
    {
        "type",
        "sequence_number",
        "item",
        "item_id",
        "output_index",
        "content_index",
        "summary_index",
        "delta",
        "arguments",
        "response",
        "code",
        "message",
        "param",
        "text",
        "logprobs",
        "obfuscation",
        "part",
        "name",
    }
)
_EVENT_KEYS = Shape(_EVENT, ("type", "sequence_number"))
_ITEM_KEYS = Shape(frozenset({"type", "id", "call_id", "name", "arguments", "status"}), ("type", "id"))
_RESPONSE_KEYS = Shape(
    frozenset({"id", "status", "output", "usage", "model", "created_at", "error"}), ("id", "status")
)
_ANY = Shape(frozenset(), ("type", "id"))
_TERMINAL = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
_SNAPSHOT_EVENTS = frozenset({"response.created", "response.in_progress", "response.queued"})
_TEXT_EVENTS = {
    "response.output_text.delta": None,
    "response.refusal.delta": None,
    "response.reasoning_text.delta": "reasoning_text",
    "response.reasoning_summary_text.delta": "reasoning_summary",
}
_MAX_ORPHANS = 1024
"""Item ids remembered for deltas that named an item nobody announced (bounded: a hostile stream
could name a new one per event; past the bound every open call is refused instead)."""


def chat_tools(tools: Iterable[Any]) -> list[Any]:
    """``tools`` in the Chat Completions shape the checks read.

    A Responses function tool is flat (``{"type": "function", "name": ..., "parameters": ...,
    "strict": ...}``); it becomes ``{"type": "function", "function": {"name": ..., ...}}``, and a
    flat ``custom`` tool likewise. A tool already in that shape, a hosted tool (``web_search``,
    ``file_search``, ``mcp`` ...) and anything unreadable are kept as they are (no call can name a
    hosted tool; an unreadable entry is the contract reader's to refuse).
    """
    out: list[Any] = []
    for tool in tools:
        spec = _as_mapping(tool) if not isinstance(tool, str | bytes) else None
        if spec is not None:
            kind = spec.get("type", "function")
            if kind in ("function", "custom") and kind not in spec and "name" in spec:
                body = {k: v for k, v in spec.items() if k != "type"}
                tool = {"type": kind, kind: body}
        out.append(tool)
    return out


def chat_tool_choice(tool_choice: Any) -> Any:
    """A Responses ``tool_choice`` in the Chat Completions shape the checks read.

    ``"none"``, ``"auto"``, ``"required"`` are the same in both APIs. ``{"type": "function",
    "name": ...}`` (and ``custom``) becomes ``{"type": "function", "function": {"name": ...}}``;
    ``{"type": "allowed_tools", "mode": ..., "tools": [...]}`` becomes the nested
    ``allowed_tools`` object. A choice that forces a hosted tool (``{"type": "file_search"}``,
    ``{"type": "mcp", ...}`` ...) allows no function call: it becomes an ``allowed_tools`` list
    of none, so every function call under it is refused (rule 10).
    """
    if tool_choice is None or isinstance(tool_choice, str):
        return tool_choice
    spec = _as_mapping(tool_choice)
    if spec is None:
        return tool_choice  # unreadable: the contract reader refuses it
    kind = spec.get("type")
    if kind in ("function", "custom"):
        if kind in spec:
            return tool_choice
        return {"type": kind, kind: {"name": spec.get("name")}}
    if kind == "allowed_tools":
        if "allowed_tools" in spec:
            return tool_choice
        tools = spec.get("tools")
        listed = chat_tools(tools) if isinstance(tools, list | tuple) else tools
        return {"type": "allowed_tools", "allowed_tools": {"mode": spec.get("mode"), "tools": listed}}
    if isinstance(kind, str):
        return {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}}
    return tool_choice


def response_class() -> Any:
    """``openai.types.responses.Response``, or None on an ``openai`` release without the
    Responses API (before 1.66)."""
    try:
        from openai.types.responses import Response
    except ImportError:  # pragma: no cover - depends on the installed release
        return None
    return Response


class _Item:
    """One ``function_call`` item of the response: its call and what the stream said of it."""

    __slots__ = ("call", "closed", "deltas", "item_id", "output_index", "whole")

    def __init__(self, item_id: str | None, output_index: int, call: ToolCall | None) -> None:
        self.item_id = item_id
        self.output_index = output_index
        self.call = call
        self.deltas = False
        """At least one non-empty argument delta arrived for it."""
        self.whole = False
        """Its text was read whole from a statement of it (no delta arrived)."""
        self.closed = False
        """Its ``response.output_item.done`` said ``status: "completed"``."""


def read_object(obj: Any, shape: Shape) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """``(fields, unknown)`` of a JSON object (a dict or a model, read as the chunk reader reads
    one), or None when ``obj`` is not an object."""
    read = _read_object(obj, shape)
    return None if read is None else (read[0], read[1])


def _field(obj: Any, name: str) -> Any:
    """One field of an object (a dict or a model), or None."""
    read = read_object(obj, _ANY)
    return None if read is None else read[0].get(name)


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    return value


class ResponseAccumulator(Accumulator):
    """Merges Responses API stream events into checked tool calls and one final ``Response``.

    Takes what :class:`~toolstitch.Accumulator` takes: ``tools`` (the request's, in either API's
    shape; ``None``: not known, names unchecked; ``[]``: every call refused), ``tool_choice`` and
    ``parallel_tool_calls`` (a Responses value, read by :func:`chat_tool_choice`), ``limits``,
    ``empty_arguments``, ``started_at`` and ``clock``. :meth:`feed` takes one event (the SDK's
    ``ResponseStreamEvent`` objects, or dicts as decoded from SSE); :meth:`read_response` takes a
    whole ``Response`` that was not streamed. ``tool_calls`` are the calls in output order;
    :meth:`get_final_response` builds the SDK's ``Response``.
    """

    def __init__(
        self,
        tools: Iterable[Any] | None = None,
        *,
        limits: Limits | None = None,
        empty_arguments: Literal["invalid", "object"] = "invalid",
        started_at: float | None = None,
        clock: Callable[[], float] | None = None,
        tool_choice: Any = None,
        parallel_tool_calls: Any = None,
    ) -> None:
        super().__init__(
            chat_tools(tools) if tools is not None else None,
            limits=limits,
            empty_arguments=empty_arguments,
            started_at=started_at,
            clock=clock,
            tool_choice=chat_tool_choice(tool_choice),
            parallel_tool_calls=parallel_tool_calls,
        )
        self._items: dict[str, _Item] = {}
        """Function-call items by item id."""
        self._anonymous: list[_Item] = []
        """Function-call items announced without an item id (reachable by call id only)."""
        self._by_call: dict[int, _Item] = {}
        """Every function-call item, by ``id()`` of its call."""
        self._orphans: set[str] = set()
        self._orphans_lost = False
        self._outputs: dict[int, Any] = {}
        """Every ``response.output_item.done`` item, by output index (for a final response
        without ``output``)."""
        self._snapshot: Any = None
        """The latest response object of ``response.created`` / ``.in_progress`` / ``.queued``."""
        self._final: Any = None
        """The response object of the final event (``response.completed`` ...)."""
        self.status: str | None = None
        """How the response ended: ``"completed"``, ``"incomplete"``, ``"failed"``, ``"error"``, or
        None while no final event arrived."""
        self._last_number: int | None = None
        self._whole = False
        """Reading a response that was not streamed (:meth:`read_response`)."""

    @property
    def check_options(self) -> dict[str, Any]:
        """The accumulator's options (see :attr:`Accumulator.check_options`), and ``api:
        "responses"``: a recording says which reader its events are for."""
        return {**super().check_options, "api": "responses"}

    # -- feeding -----------------------------------------------------------------------------

    _unit = "event"

    def feed(self, chunk: Any, seq: int | None = None, *, events: bool = True) -> Sequence[Event]:
        """Take one Responses stream event (an SDK event object or a dict) and return what happened.

        ``seq`` works as for :meth:`Accumulator.feed` (a transport's own sequence number; the
        event's ``sequence_number`` is checked on its own). Never raises: a failure inside
        toolstitch refuses every call the event could have touched. (The accumulator's own
        ``feed``, with this class's reader: :meth:`_read`.)
        """
        return super().feed(chunk, seq, events=events)

    def _in_band_error(self) -> None:
        self.status = self.status or "error"

    def read_response(self, response: Any) -> Sequence[Event]:
        """Read a whole ``Response`` that was not streamed (an SDK object or a dict), as the final
        event of a stream that announced nothing: its ``function_call`` items are the calls,
        sealed and checked when its ``status`` is ``"completed"``, ``incomplete`` otherwise."""
        self._whole = True
        status = _field(response, "status")
        kind = {
            "completed": "response.completed",
            "incomplete": "response.incomplete",
            "failed": "response.failed",
        }.get(status if type(status) is str else "", "response.unfinished")
        return self.feed({"type": kind, "response": response})

    def _read(self, event: Any, out: list[Event], want: bool) -> None:
        read = read_object(event, _EVENT_KEYS)
        if read is None:
            self._damaged(None, f"an event must be an object, got {type(event).__name__}", event, out)
            return
        fields, unknown = read
        get = fields.get
        kind = get("type")
        if type(kind) is not str or not kind or len(kind) > MAX_LABEL:
            error = unknown.get("error") if unknown else None
            if error:
                raise InBandError(error)  # the SDK raises it itself; fed by hand, it ends the input
            # What it carried cannot be told: any open call may have lost a piece (rule 9).
            self._damaged(None, f"an event without a readable type ({show(kind)})", event, out)
            return
        number = get("sequence_number")
        if number is not None:
            self._sequence(number, event, out)
        if self.status is not None and kind != "error":
            self._record(
                Anomaly(
                    AnomalyCode.CHUNK_AFTER_END,
                    f"a {show(kind)} event arrived after the response ended ({self.status})",
                    raw=event,
                ),
                None,
                out,
            )
        if kind == "response.function_call_arguments.delta":
            self._delta(fields, event, out, want)
        elif kind == "response.output_item.added":
            self._added(fields, event, out, want)
        elif kind == "response.function_call_arguments.done":
            self._arguments_done(fields, event, out, want)
        elif kind == "response.output_item.done":
            self._item_done(fields, event, out, want)
        elif kind in _TERMINAL or kind == "response.unfinished":
            self._terminal(kind, get("response"), event, out, want)
        elif kind == "error":
            body = {k: fields[k] for k in ("code", "message", "param") if fields.get(k) is not None}
            raise InBandError(body or {"message": "an error event without a message"})
        elif kind in _SNAPSHOT_EVENTS:
            response = get("response")
            if response is not None and self._shallow(response, "the response snapshot", out):
                self._snapshot = response
                self._take_response_envelope(response, out)
        elif want and kind in _TEXT_EVENTS:
            delta = get("delta")
            if type(delta) is str and delta:
                field = _TEXT_EVENTS[kind]
                if field is not None:
                    out.append(ReasoningDelta(0, field, delta))
                elif kind == "response.refusal.delta":
                    out.append(RefusalDelta(0, delta))
                else:
                    out.append(ContentDelta(0, delta))
        # Every other event (hosted tools, audio, annotations, events of newer releases) concerns
        # no function call: the final response carries what it built.

    def _sequence(self, number: Any, raw: Any, out: list[Event]) -> None:
        value = opt_int(number)
        if value is None:
            self._record(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, f"sequence_number was {show(number)}", raw=raw),
                None,
                out,
            )
            return
        last = self._last_number
        if last is not None and value <= last:
            # Kept and read: the statements of each call's text (``.done``, ``output_item.done``)
            # catch a piece that was resent or reordered, and a server whose numbering is off
            # (restarting, constant) loses nothing by it.
            self._record(
                Anomaly(
                    AnomalyCode.SEQUENCE_NOT_INCREASING,
                    f"sequence_number {value} after {last}",
                    raw=raw,
                ),
                None,
                out,
            )
        self._last_number = value if last is None else max(last, value)

    # -- items -------------------------------------------------------------------------------

    def _state(self, out: list[Event]) -> ChoiceState | None:
        state = self._choices.get(0)
        if state is None:
            state = self._open_choice(0, out)
        return state

    def _output_index(self, value: Any, state: ChoiceState, raw: Any, notes: list[Anomaly]) -> int:
        index: int | None = None
        if type(value) is int and value >= 0:
            index = value
        elif value is not None:
            index, why = read_index(value)
            if why is not None:
                notes.append(Anomaly(AnomalyCode.NON_INTEGER_INDEX, f"output_index: {why}", raw=raw))
        if index is None:
            index = state.table.max_index + 1
            notes.append(
                Anomaly(AnomalyCode.MISSING_INDEX, f"an item without a usable output_index; read as {index}")
            )
        elif index in state.table.by_index:
            notes.append(
                Anomaly(AnomalyCode.INDEX_REUSED, f"two function_call items claim output_index {index}")
            )
        return index

    def _open_item(
        self,
        ifields: Mapping[str, Any],
        output_index: Any,
        raw: Any,
        out: list[Event],
        notes: list[Anomaly],
    ) -> _Item | None:
        """Open the call of a ``function_call`` item (identity written once); None past the limits."""
        state = self._state(out)
        if state is None:
            return None
        index = self._output_index(output_index, state, raw, notes)
        call = _open(self, state, index, raw, notes, out)
        iid, unreadable = (
            clean_str(ifields.get("id"), "id", notes, raw) if ifields.get("id") is not None else (None, None)
        )
        if call is None:
            return None
        item = _Item(iid, index, call)
        self._by_call[id(call)] = item
        self._touched = call
        call._type = "function"
        fid = ifields.get("call_id")
        name = ifields.get("name")
        why = unreadable
        if fid is not None:
            fid, bad = clean_str(fid, "call_id", notes, raw)
            why = why or bad
            if fid is not None:
                call._id = fid
                state.table.by_id.setdefault(fid, call)
        if name is not None:
            name, bad = clean_str(name, "name", notes, raw)
            why = why or bad
            call._name = name
        if call._slot >= self.limits.max_calls_per_choice:
            call._exceed_call_limit(self.limits.max_calls_per_choice, self._now())
        if why is not None:
            call._pending_error = MalformedArguments(
                f"the item could not be read ({why}): the call may not be what the server sent"
            )
        if iid is not None:
            if iid in self._orphans:
                call._pending_error = MalformedArguments(
                    "argument text arrived for this item before the item was announced: the call may "
                    "not hold everything that arrived for it"
                )
            self._items[iid] = item
        else:
            notes.append(
                Anomaly(
                    AnomalyCode.UNKNOWN_ITEM,
                    "a function_call item without an id: no delta can reach it, only its whole text",
                    raw=raw,
                )
            )
            self._anonymous.append(item)
        return item

    def _find(self, iid: str | None, call_id: str | None) -> _Item | None:
        """The item an item-level event names: by item id, else (an item announced without one) by
        its call id."""
        if iid is not None:
            found = self._items.get(iid)
            if found is not None:
                return found
        if call_id is not None:
            for item in self._anonymous:
                if item.call is not None and item.call._id == call_id:
                    return item
            if iid is None:
                for item in self._items.values():
                    if item.call is not None and item.call._id == call_id:
                        return item
        return None

    def _added(self, fields: Mapping[str, Any], raw: Any, out: list[Event], want: bool) -> None:
        read = read_object(fields.get("item"), _ITEM_KEYS)
        if read is None:
            self._record(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, "output_item.added without a readable item", raw=raw),
                None,
                out,
            )
            return
        ifields = read[0]
        if ifields.get("type") != "function_call":
            return
        notes: list[Anomaly] = []
        iid = ifields.get("id")
        if type(iid) is str and iid in self._items:
            known = self._items[iid]
            self._record(
                Anomaly(AnomalyCode.ITEM_REPEATED, f"item {show(iid)} was announced twice", raw=raw),
                known.call,
                out,
            )
            if known.call is not None:
                self._refuse([known.call], None, out, None, why="its item was announced twice")
            return
        item = self._open_item(ifields, fields.get("output_index"), raw, out, notes)
        call = item.call if item is not None else None
        if item is not None and call is not None:
            arguments = ifields.get("arguments")
            if type(arguments) is str:
                if arguments:
                    # OpenAI announces an item with "" and streams the text; a server that
                    # announces some of it has it read as the first piece, held to the same
                    # statements (``.done``, ``output_item.done``).
                    item.deltas = True
                    self._append(item, arguments, raw, out, notes, want)
            elif arguments is not None:
                notes.append(
                    Anomaly(AnomalyCode.ARGUMENTS_NOT_STRING, f"arguments was {show(arguments)}", raw=raw)
                )
                call._pending_error = MalformedArguments("the announced arguments were not text")
        for note in notes:
            self._record(note, call, out)

    def _delta(self, fields: Mapping[str, Any], raw: Any, out: list[Event], want: bool) -> None:
        iid = fields.get("item_id")
        if type(iid) is not str or not iid:
            # Which call's text is this? Never guessed from its position: every open call is refused.
            self._damaged(None, f"an argument delta without a readable item_id ({show(iid)})", raw, out)
            return
        item = self._items.get(iid)
        if item is None:
            self._orphan(iid, raw, out)
            return
        call = item.call
        if call is None:
            return
        self._touched = call
        notes: list[Anomaly] = []
        call._metrics.fragments += 1
        index = fields.get("output_index")
        if index is not None and index != item.output_index and call._status == "open":
            notes.append(
                Anomaly(
                    AnomalyCode.MALFORMED_CHUNK,
                    f"a delta of item {show(iid)} said output_index {show(index)}, the item "
                    f"{item.output_index}",
                    raw=raw,
                )
            )
            call._pending_error = call._pending_error or MalformedArguments(
                "a delta of this item named another output_index: which text is whose cannot be told"
            )
        delta = fields.get("delta")
        if type(delta) is not str:
            notes.append(Anomaly(AnomalyCode.ARGUMENTS_NOT_STRING, f"delta was {show(delta)}", raw=raw))
            if call._status == "open":
                call._pending_error = call._pending_error or MalformedArguments(
                    f"a delta of this call was {type(delta).__name__}, not text: the call may not be "
                    "what the server sent"
                )
        elif delta:
            if item.whole:
                item.whole = False  # the whole text was read before: a delta now contradicts it
                self._mismatch(call, "an argument delta arrived after its whole text", raw, out)
            elif item.closed and call._status == "open":
                self._mismatch(call, "an argument delta arrived after its output_item.done", raw, out)
            else:
                item.deltas = True
                self._append(item, delta, raw, out, notes, want)
        for note in notes:
            self._record(note, call, out)

    def _append(
        self, item: _Item, text: str, raw: Any, out: list[Event], notes: list[Anomaly], want: bool
    ) -> None:
        """Append argument text to the item's call, against the stream budget (as the chat reader)."""
        call = item.call
        assert call is not None
        error_before = call._error
        append_text(self, call, text, False, raw, notes, out, want)
        if call._error is not error_before and call._status == "invalid" and call._error is not None:
            out.append(ToolCallInvalid(call, call._error))

    def _orphan(self, iid: str, raw: Any, out: list[Event]) -> None:
        if len(self._orphans) < _MAX_ORPHANS:
            self._orphans.add(iid)
        elif not self._orphans_lost:
            self._orphans_lost = True
            self._damaged(None, "too many argument deltas for items nobody announced", raw, out)
        self._record(
            Anomaly(
                AnomalyCode.UNKNOWN_ITEM,
                f"an argument delta for item {show(iid)}, which no output_item.added announced; "
                "given to no call",
                raw=raw,
            ),
            None,
            out,
        )

    def _mismatch(self, call: ToolCall, what: str, raw: Any, out: list[Event]) -> None:
        """A statement of the call contradicts what streamed: refuse it (frozen from now on)."""
        self._record(Anomaly(AnomalyCode.ARGUMENTS_MISMATCH, what, raw=raw), call, out)
        if call._status in ("open", "ready"):
            if call._status == "open":
                call._metrics.sealed_at = self._now()
            error = MalformedArguments(
                f"{what}: the call is not certainly what the server meant, so it is refused",
                raw=call.arguments,
            )
            call._invalidate(error)
            out.append(ToolCallInvalid(call, error))

    def _settle(
        self, item: _Item, ifields: Mapping[str, Any], where: str, raw: Any, out: list[Event]
    ) -> None:
        """Hold a statement of the item (its arguments, name and call id in ``where``) to the call."""
        call = item.call
        if call is None:
            return
        self._touched = call
        name = ifields.get("name")
        if name is not None and call._name is None and call._status == "open":
            notes: list[Anomaly] = []
            call._name, _ = clean_str(name, "name", notes, raw)
            for note in notes:
                self._record(note, call, out)
        elif name is not None and name != call._name:
            self._mismatch(
                call, f"the name in {where} ({show(name)}) differs from {show(call._name)}", raw, out
            )
        fid = ifields.get("call_id")
        if fid is not None and call._id is None and call._status == "open" and type(fid) is str and fid:
            call._id = fid
        elif fid is not None and fid != call._id and not (fid == "" and call._id is None):
            self._mismatch(
                call, f"the call_id in {where} ({show(fid)}) differs from {show(call._id)}", raw, out
            )
        text = ifields.get("arguments")
        if text is None:
            return  # no statement of the text (absent, or null: the SDK's value for absent)
        if type(text) is not str:
            self._mismatch(call, f"the arguments in {where} were {show(text)}, not text", raw, out)
            return
        if _limited(call):
            return  # only a sample of the text was kept: nothing to compare
        if not item.deltas and call._chars == 0 and not item.whole:
            if text:
                if self._orphans or self._orphans_lost:
                    self._mismatch(
                        call,
                        "argument deltas arrived for an item nobody announced, and this call received "
                        "none: its text may be among them",
                        raw,
                        out,
                    )
                    return
                item.whole = True
                if not self._whole:
                    self._record(
                        Anomaly(
                            AnomalyCode.ARGUMENTS_WITHOUT_DELTAS,
                            f"no argument delta arrived; the whole text was read from {where}",
                        ),
                        call,
                        out,
                    )
                notes = []
                self._append(item, text, raw, out, notes, False)
                for note in notes:
                    self._record(note, call, out)
            return
        if call.arguments != text:
            self._mismatch(call, f"the arguments in {where} differ from the deltas", raw, out)

    def _arguments_done(self, fields: Mapping[str, Any], raw: Any, out: list[Event], want: bool) -> None:
        iid = fields.get("item_id")
        item = self._items.get(iid) if type(iid) is str else None
        if item is None:
            self._record(
                Anomaly(
                    AnomalyCode.UNKNOWN_ITEM,
                    f"function_call_arguments.done for item {show(iid)}, which no "
                    "output_item.added announced",
                    raw=raw,
                ),
                None,
                out,
            )
            return
        self._settle(item, {"arguments": fields.get("arguments")}, "function_call_arguments.done", raw, out)
        if fields.get("name") is not None:  # newer servers repeat the name here
            self._settle(item, {"name": fields.get("name")}, "function_call_arguments.done", raw, out)

    def _item_done(self, fields: Mapping[str, Any], raw: Any, out: list[Event], want: bool) -> None:
        item_value = fields.get("item")
        read = read_object(item_value, _ITEM_KEYS)
        if read is None:
            self._damaged(None, "output_item.done without a readable item", raw, out)
            return
        ifields = read[0]
        output_index = fields.get("output_index")
        if ifields.get("type") != "function_call":
            self._keep_output(output_index, item_value, out)
            return
        iid = ifields.get("id")
        call_id = ifields.get("call_id")
        item = self._find(iid if type(iid) is str else None, call_id if type(call_id) is str else None)
        notes: list[Anomaly] = []
        if item is None and self._claimed(call_id, "output_item.done", raw, out):
            return
        if item is None:
            notes.append(
                Anomaly(
                    AnomalyCode.UNKNOWN_ITEM,
                    f"output_item.done for function_call item {show(iid)}, which no output_item.added "
                    "announced; read whole",
                    raw=raw,
                )
            )
            item = self._open_item(ifields, output_index, raw, out, notes)
        if item is None or item.call is None:
            for note in notes:
                self._record(note, None, out)
            return
        call = item.call
        for note in notes:
            self._record(note, call, out)
        self._outputs.setdefault(item.output_index, item)
        self._settle(item, ifields, "output_item.done", raw, out)
        self._close(item, ifields.get("status"), "its response.output_item.done", raw, out)

    def _claimed(self, call_id: Any, where: str, raw: Any, out: list[Event]) -> bool:
        """An item of another (or no known) item id names the ``call_id`` of a call that streamed:
        two items claim one call, so which text is the call's cannot be told. That call is refused,
        and no second call is opened for the claim. True when that was the case."""
        if type(call_id) is not str or not call_id:
            return False
        claimed = [c for c in self._by_call_calls() if c._id == call_id]
        for call in claimed:
            self._mismatch(
                call, f"an item of another id in {where} claims its call_id {show(call_id)}", raw, out
            )
        return bool(claimed)

    def _by_call_calls(self) -> list[ToolCall]:
        return [item.call for item in self._by_call.values() if item.call is not None]

    def _close(self, item: _Item, status: Any, where: str, raw: Any, out: list[Event]) -> None:
        """The item's statement says it is done: ``completed`` closes it (it is sealed with the
        response); any other status leaves it ``incomplete`` now."""
        call = item.call
        assert call is not None
        if status == "completed":
            item.closed = True
            return
        if status is None:
            # No statement (vLLM's gpt-oss sends ``null``): the response's own status decides;
            # the call is sealed only with a response.completed.
            item.closed = True
            self._record(
                Anomaly(
                    AnomalyCode.ITEM_STATUS_MISSING,
                    f"{where} carried no status; the response's status decides",
                    raw=raw,
                ),
                call,
                out,
            )
            return
        self._record(
            Anomaly(
                AnomalyCode.ITEM_NOT_DONE,
                f"{where} said status {show(status)}, not 'completed'",
                raw=raw,
            ),
            call,
            out,
        )
        if call._status == "open":
            call._metrics.sealed_at = self._now()
            call._mark_incomplete(f"{where} said status {show(status)}, not 'completed'")
            out.append(ToolCallIncomplete(call))

    def _shallow(self, value: Any, what: str, out: list[Event]) -> bool:
        """May a response object be kept for the final response? Not when nested deeper than
        ``Limits.max_depth``. It is not charged to ``max_stream_bytes``: it is one object the SDK
        decoded (the next one replaces it), and the function calls' text in it is only compared."""
        if retained(value, self.limits.max_depth) >= 0:
            return True
        self._record(
            Anomaly(
                AnomalyCode.TOO_DEEP,
                f"{what} was nested deeper than Limits.max_depth={self.limits.max_depth}; dropped",
            ),
            None,
            out,
        )
        return False

    def _keep_output(self, output_index: Any, item: Any, out: list[Event]) -> None:
        index = opt_int(output_index)
        if (
            index is None
            or index in self._outputs
            or len(self._outputs) >= 4 * self.limits.max_calls_per_choice
        ):
            return
        if self._keep(item, "an output item", 0, out):
            self._outputs[index] = item

    # -- the end of the response -------------------------------------------------------------

    def _take_response_envelope(self, response: Any, out: list[Event]) -> None:
        read = read_object(response, _RESPONSE_KEYS)
        if read is None:
            return
        get = read[0].get
        if self._id is None:
            self._id = opt_str(get("id"))
        if self._model is None:
            self._model = opt_str(get("model"))
        if self._created is None:
            created = get("created_at")
            if type(created) is float and created >= 0:
                created = int(created)
            self._created = opt_int(created)
        usage = get("usage")
        if usage is not None:
            self._usage = None  # a snapshot's usage is replaced by the final one, not "repeated"
            self._take_usage(usage, out)

    def _terminal(self, kind: str, response: Any, raw: Any, out: list[Event], want: bool) -> None:
        if self.status is not None:
            return  # a second final event changes nothing (recorded as an event after the end)
        read = read_object(response, _RESPONSE_KEYS)
        if read is None:
            self._damaged(None, f"{kind} without a readable response", raw, out)
            self.status = "failed"
            self.end(InBandError({"message": f"{kind} carried no readable response"}))
            return
        get = read[0].get
        if self._shallow(response, "the final response", out):
            self._final = response
        self._take_response_envelope(response, out)
        status = _TERMINAL.get(kind)
        said = get("status")
        if status == "completed" and said not in ("completed", None):
            # The event says completed, the response says otherwise: the worse one is believed.
            self._record(
                Anomaly(
                    AnomalyCode.RESPONSE_NOT_COMPLETED,
                    f"response.completed carried a response whose status is {show(said)}",
                    raw=raw,
                ),
                None,
                out,
            )
            status = "incomplete"
        self.status = status or (said if type(said) is str and len(said) <= MAX_LABEL else "unfinished")
        output = get("output")
        listed = self._reconcile(output, raw, out)
        state = self._state(out)
        if state is None:
            return
        calls = _ordered(state.table.calls)
        if self.status == "completed":
            for call in calls:
                if call._status == "open" and id(call) not in listed and output:
                    self._mismatch(call, "the final response does not list this call", raw, out)
            closing = []
            for call in calls:
                if call._status != "open":
                    continue
                item = self._item_of(call)
                if item is not None and item.closed:
                    closing.append(call)
                else:
                    self._record(
                        Anomaly(
                            AnomalyCode.ITEM_NOT_DONE,
                            "the response completed, but this call's output_item.done never said 'completed'",
                        ),
                        call,
                        out,
                    )
                    call._metrics.sealed_at = self._now()
                    call._mark_incomplete("its response.output_item.done never arrived")
                    out.append(ToolCallIncomplete(call))
            state.finish_reason = "tool_calls" if calls else "stop"
            state.finish_reasons.append(state.finish_reason)
            self._seal_calls(state, closing, self._now(), out)
            if calls:
                self._ensure_ids(state, calls)
            self.finished.append(0)
            out.append(ChoiceFinished(0, "completed"))
            return
        details = get("incomplete_details")
        reason = _field(details, "reason") if details is not None else None
        why = f"the response ended {self.status}" + (f" ({show(reason)})" if reason is not None else "")
        self._record(Anomaly(AnomalyCode.RESPONSE_NOT_COMPLETED, why, raw=None), None, out)
        for call in calls:
            if call._status == "open":
                call._metrics.sealed_at = self._now()
                call._mark_incomplete(why)
                out.append(ToolCallIncomplete(call))
        if calls:
            self._ensure_ids(state, calls)
        if self.status == "failed":
            error = get("error")
            body = _dump(error) if error is not None else {"message": why}
            out.extend(self.end(InBandError(body)))

    def _item_of(self, call: ToolCall) -> _Item | None:
        return self._by_call.get(id(call))

    def _reconcile(self, output: Any, raw: Any, out: list[Event]) -> set[int]:
        """Hold each ``function_call`` item of the final response to its call (or read it whole when
        it never streamed). Returns the ids (``id()``) of the calls the output lists."""
        listed: set[int] = set()
        if output is None or (type(output) is list and not output):
            if (self._items or self._anonymous or self._outputs) and not self._whole:
                self._record(
                    Anomaly(
                        AnomalyCode.OUTPUT_MISSING,
                        "the final response carried no output; it is built from the streamed items",
                    ),
                    None,
                    out,
                )
            return listed
        if type(output) is not list:
            self._damaged(None, f"the final response's output was {show(output)}, not a list", raw, out)
            return listed
        for position, entry in enumerate(output):
            read = read_object(entry, _ITEM_KEYS)
            if read is None or read[0].get("type") != "function_call":
                continue
            ifields = read[0]
            iid = ifields.get("id")
            call_id = ifields.get("call_id")
            item = self._find(iid if type(iid) is str else None, call_id if type(call_id) is str else None)
            if item is None and self._claimed(call_id, "the final response", raw, out):
                continue
            if item is None or (item.call is not None and id(item.call) in listed):
                notes: list[Anomaly] = []
                if not self._whole:
                    notes.append(
                        Anomaly(
                            AnomalyCode.ITEM_NOT_STREAMED,
                            f"function_call item {show(iid)} appeared only in the final response",
                            raw=entry,
                        )
                    )
                item = self._open_item(ifields, position, entry, out, notes)
                call = item.call if item is not None else None
                for note in notes:
                    self._record(note, call, out)
                if item is None or call is None:
                    continue
                listed.add(id(call))
                self._settle(item, ifields, "the final response", raw, out)
                self._close(item, ifields.get("status"), "the final response's item", raw, out)
                continue
            if item.call is None:
                continue
            listed.add(id(item.call))
            self._settle(item, ifields, "the final response", raw, out)
            status = ifields.get("status")
            if status not in ("completed", None) and item.call._status == "open":
                self._close(item, status, "the final response's item", raw, out)
        return listed

    def refuse_open(self, reason: str, code: str = "stream_gap") -> Sequence[Event]:
        """Refuse every call still open: each becomes ``invalid`` with ``reason``, and one anomaly
        with ``code`` is recorded on the stream. Returns the events.

        For what reads the stream around this accumulator and learns that events are missing or
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
                call._invalidate(InternalFault(reason, raw=call.arguments))
        return out

    # -- ending ------------------------------------------------------------------------------

    def end(self, error: BaseException | None = None, *, closed: bool = False) -> Sequence[Event]:
        """The input is over (``error`` when it failed). Calls not sealed by ``response.completed``
        become ``incomplete``. Idempotent."""
        if self.ended:
            return _NO_EVENTS
        events: list[Event] = []
        try:
            open_calls = self._open_calls()
            if self.status is not None:
                # Opened after the response's final event (which sealed or refused every call it
                # knew): nothing of it was confirmed, so it never runs. (The accumulator's own end
                # would seal it on the strength of a clean end.)
                why = "the call arrived after the response's final event"
            elif error is not None:
                why = f"the stream failed ({type(error).__name__}) before the response completed"
            elif closed:
                why = "the stream was closed before the response completed"
            else:
                why = "the stream ended without response.completed"
            if self.status is None and not closed:
                self._record(Anomaly(AnomalyCode.RESPONSE_NOT_COMPLETED, why), None, events)
            t = self._clock()
            for call in open_calls:
                call._metrics.sealed_at = t
                call._mark_incomplete(why)
                events.append(ToolCallIncomplete(call))
        except Exception:  # fail closed: nothing still open may be sealed by the end
            for call in self._open_calls():
                call._mark_incomplete("toolstitch failed while ending the stream")
        events.extend(super().end(error, closed=closed))
        return events

    def get_final_completion(self) -> Any:
        """A Responses stream has no ``ChatCompletion``: use :meth:`get_final_response`."""
        raise TypeError("a Responses API stream builds a Response: call get_final_response()")

    def get_final_response(self) -> Any:
        """Build the SDK's ``Response`` (once the input is over; this ends it if not yet ended).

        Raises :class:`~toolstitch.errors.IncompleteStreamError` when no ``response.completed`` or
        ``response.incomplete`` arrived (the stream broke, an ``error`` event, ``response.failed``);
        it carries the partial response and the calls. A response that ended ``incomplete`` is
        returned (its ``status`` says so; none of its calls is ``ready``).
        """
        self.end()
        cls = response_class()
        data = self._response_data()
        try:
            data, problems = serialisable(data)
        except Exception as exc:
            problems = [f"{type(exc).__name__} while checking the response is serialisable"]
        for problem in problems:
            self._record(Anomaly(AnomalyCode.MALFORMED_CHUNK, f"in the response: {problem}"), None, [])
        if cls is None:
            raise RuntimeError("this openai release has no Responses API (openai.types.responses)")
        if self.error is not None or self.status not in ("completed", "incomplete"):
            if self.error is not None:
                why = f"the stream failed with {type(self.error).__name__}: {show(str(self.error), 500)}"
            elif self.status is None:
                why = "the stream ended without response.completed"
            else:
                why = f"the response ended {self.status}"
            raise IncompleteStreamError(why, partial=_build(cls, data), tool_calls=self.calls())
        try:
            return cls.model_validate(data)
        except Exception as exc:
            # Built as the SDK builds the responses it hands out (``construct_type``: lenient, no
            # validation), so a field a newer SDK requires and the server did not send is no loss.
            built = _build(cls, data)
            if built is not None:
                return built
            message = str(exc) if isinstance(exc, ValidationError) else f"{type(exc).__name__}: {exc}"
            self._record(
                Anomaly(
                    AnomalyCode.MALFORMED_CHUNK, f"the response does not validate: {show(message, 2000)}"
                ),
                None,
                [],
            )
            return cls.construct(**data)

    def _response_data(self) -> dict[str, Any]:
        base = self._final if self._final is not None else self._snapshot
        data: dict[str, Any] = {}
        try:
            dumped = _dump(base)
            if isinstance(dumped, dict):
                data = dict(dumped)
        except Exception as exc:
            self._record(_fault_note(exc, "reading the final response"), None, [])
        output = data.get("output")
        if not isinstance(output, list) or not output:
            output = [self._built_item(self._outputs[i]) for i in sorted(self._outputs)]
        else:
            output = [_dump(entry) for entry in output]
        data["output"] = [self._output_item(entry) for entry in output]
        data.setdefault("id", self._id or "")
        data.setdefault("object", "response")
        data.setdefault("created_at", self._created if self._created is not None else 0)
        data.setdefault("model", self._model or "")
        if self.status in ("completed", "incomplete", "failed"):
            data["status"] = self.status if data.get("status") != "failed" else "failed"
        data.setdefault("parallel_tool_calls", True)
        data.setdefault("tool_choice", "auto")
        data.setdefault("tools", [])
        return data

    @staticmethod
    def _built_item(kept: Any) -> Any:
        """An output item for a response built from the stream: a function call from its call (its
        text is the call's), any other item as its ``response.output_item.done`` sent it."""
        if not isinstance(kept, _Item):
            return _dump(kept)
        call = kept.call
        assert call is not None
        entry: dict[str, Any] = {"type": "function_call"}
        if kept.item_id is not None:
            entry["id"] = kept.item_id
        entry.update(call_id=call._id or "", name=call._name or "", arguments=call.arguments)
        entry["status"] = "completed" if kept.closed else "incomplete"
        return entry

    def _output_item(self, entry: Any) -> Any:
        """A ``function_call`` item of the output, with its call's id and text (a synthesized id,
        ``{}`` for ``""`` read as ``{}``); every other item as it is."""
        try:
            if not isinstance(entry, dict) or entry.get("type") != "function_call":
                return entry
            iid = entry.get("id")
            call_id = entry.get("call_id")
            item = self._find(iid if type(iid) is str else None, call_id if type(call_id) is str else None)
            call = item.call if item is not None else None
            if call is None:
                return entry
            entry = dict(entry)
            entry["call_id"] = call._id or ""
            arguments = call.arguments
            if arguments == "" and call._status == "ready":
                arguments = "{}"
            if not _limited(call):
                entry["arguments"] = arguments
            return entry
        except Exception:
            return entry


def _build(cls: Any, data: dict[str, Any]) -> Any:
    """``data`` as the SDK's ``Response``, built the way the SDK builds the ones it hands out (its
    ``construct_type``: nested models, no validation); None when even that fails."""
    try:
        from openai._models import construct_type

        return construct_type(type_=cls, value=data)
    except Exception:
        return None


def _fault_note(exc: BaseException, doing: str) -> Anomaly:
    return Anomaly(AnomalyCode.INTERNAL_ERROR, f"toolstitch failed while {doing} ({type(exc).__name__})")


def _limited(call: ToolCall) -> bool:
    """The call hit a byte bound: only a sample of its text was kept."""
    return isinstance(call._error, LimitExceeded)
