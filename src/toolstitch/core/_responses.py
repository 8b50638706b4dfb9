"""The second reader: Responses API stream events in, the same :class:`ToolCall` objects out.

The Responses API streams typed events rather than chunks: ``response.output_item.added`` opens an
item (a ``function_call``, a ``message``, a ``reasoning`` item ...),
``response.function_call_arguments.delta`` carries a piece of a call's argument text,
``response.function_call_arguments.done`` and ``response.output_item.done`` close the item, and
``response.completed`` (or ``.incomplete``, ``.failed``, an ``error`` event) ends the response.
This module only translates those events into the owner's events (``_owner.py``: fragment,
identity, statement, finish, fault, end); the calls are :class:`ToolCall` objects in the store's
call table (choice 0), sealed and checked by the same :class:`~._seal.CallChecks`, bounded by the
same :class:`Limits`, and every repair is an :class:`Anomaly` recorded the same way.
:class:`ResponseAccumulator` is a sibling of the chat :class:`~._accumulator.Accumulator`: both
stand on ``_store.CallStore``, and neither inherits the other's API.

The rules, this API's own ways to fail closed (rule 9 of docs/design.md):

* **Text belongs to an item by its id** (rule 1 here): a delta joins the call whose
  ``output_item.added`` announced its ``item_id``, never a call found by position. A delta without
  a readable ``item_id`` refuses every open call (it could be anyone's); one for an id nobody
  announced is kept by no call, and a call that later claims that id is refused.
* **The deltas are the text; every other statement of it must agree, and freezes it.** The
  ``arguments`` of ``response.function_call_arguments.done``, of the ``response.output_item.done``
  item and of the final response's item must equal the deltas, and their ``name`` and ``call_id``
  the call's: otherwise the call is ``invalid`` (``arguments_mismatch``). Once a statement came,
  any further delta refuses the call, whitespace included. Only when no delta arrived at all is
  the whole text read from one of them (``arguments_without_deltas``).
* **One item, one call.** A final output that lists an item twice, or two items that claim one
  ``call_id``, refuses the calls concerned; no copy becomes a second call.
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

The final :class:`openai.types.responses.Response` is the one the server sent in its final event,
exactly as the SDK decoded it: toolstitch never rebuilds it. Where it disagrees with the stream
(an empty ``output`` after a streamed call, other arguments), the calls concerned are refused and
the disagreement is an anomaly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from operator import itemgetter
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ..errors import InBandError, IncompleteStreamError, MalformedArguments, TransitionRefused
from ._anomaly import Anomaly, AnomalyCode
from ._call import ToolCall
from ._events import (
    ChoiceFinished,
    ContentDelta,
    Event,
    ReasoningDelta,
    RefusalDelta,
    ToolCallIncomplete,
    arguments_delta,
)
from ._limits import Limits, retained
from ._owner import Identity, Statement
from ._schema import _as_mapping
from ._store import CallStore, ChoiceState, ordered
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
        "input",
    }
)
_EVENT_KEYS = Shape(_EVENT, ("type", "sequence_number"))
_ITEM_KEYS = Shape(
    frozenset({"type", "id", "call_id", "name", "arguments", "input", "status"}), ("type", "id")
)
_CALL_ITEMS = {"function_call": "arguments", "custom_tool_call": "input"}
"""The item types that are calls, and the field that holds each one's text: a function's
``arguments`` (JSON), a custom tool's ``input`` (free text, checked against the tool's format)."""
_CALL_TYPES = {"function_call": "function", "custom_tool_call": "custom"}


def _call_kind(kind: Any) -> str | None:
    """``kind`` (an item's ``type``) when it names a call item, else None: a list or an object
    there, from a hostile server, names none (and could not be looked up in ``_CALL_ITEMS``)."""
    return kind if isinstance(kind, str) and kind in _CALL_ITEMS else None


"""The ``ToolCall.type`` of each kind of call item."""
_DELTA_EVENTS = {
    "response.function_call_arguments.delta": "function_call",
    "response.custom_tool_call_input.delta": "custom_tool_call",
}
_DONE_EVENTS = {
    "response.function_call_arguments.done": "function_call",
    "response.custom_tool_call_input.done": "custom_tool_call",
}
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
_DELTA_FIELDS = itemgetter("item_id", "output_index", "delta")
_MAX_SEQUENCE = 2**63
"""``sequence_number`` is read as :func:`~._values.opt_int` reads an integer: below this."""
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
    """One call item of the response (``function_call`` or ``custom_tool_call``): its call and
    what the stream said of it."""

    __slots__ = ("call", "closed", "hot", "item_id", "kind", "output_index")

    def __init__(self, item_id: str | None, output_index: int, call: ToolCall | None, kind: str) -> None:
        self.item_id = item_id
        self.output_index = output_index
        self.call = call
        self.kind = kind
        """``"function_call"`` or ``"custom_tool_call"``: which events and which text field are its."""
        self.hot = "response.function_call_arguments.delta" if kind == "function_call" else None
        """The delta event whose plain continuations take the owner's hot entry: a function's (a
        custom tool's input goes through :meth:`ResponseAccumulator._take_text`)."""
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


class ResponseAccumulator(CallStore):
    """Merges Responses API stream events into checked tool calls and one final ``Response``.

    Takes what :class:`~toolstitch.Accumulator` takes: ``tools`` (the request's, in either API's
    shape; ``None``: not known, names unchecked; ``[]``: every call refused), ``tool_choice`` and
    ``parallel_tool_calls`` (a Responses value, read by :func:`chat_tool_choice`), ``limits``,
    ``empty_arguments``, ``started_at`` and ``clock``. :meth:`feed` takes one event (the SDK's
    ``ResponseStreamEvent`` objects, or dicts as decoded from SSE); :meth:`read_response` takes a
    whole ``Response`` that was not streamed. ``tool_calls`` are the calls in output order;
    :meth:`get_final_response` returns the SDK's ``Response`` the server sent.
    """

    _WATCHES_RESENDS = False
    _REPLACES_UNSENDABLE_IDS = False  # the item keeps its call_id: the output answers that one

    _unit = "event"

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
        tool_list = chat_tools(tools) if tools is not None else None
        super().__init__(
            tool_list,
            limits,
            empty_arguments,
            chat_tool_choice(tool_choice),
            parallel_tool_calls,
            started_at,
            clock,
        )
        self._items: dict[str, _Item] = {}
        """Function-call items by item id."""
        self._anonymous: list[_Item] = []
        """Function-call items announced without an item id (reachable by call id only)."""
        self._by_call: dict[int, _Item] = {}
        """Every function-call item, by ``id()`` of its call."""
        self._orphans: set[str] = set()
        self._orphans_lost = False
        self._snapshot: Any = None
        """The latest response object of ``response.created`` / ``.in_progress`` / ``.queued``."""
        self._final: Any = None
        """The response object of the final event (``response.completed`` ...), as decoded."""
        self.status: str | None = None
        """How the response ended: ``"completed"``, ``"incomplete"``, ``"failed"``, ``"error"``, or
        None while no final event arrived."""
        self._last_number = -1
        """The greatest ``sequence_number`` read so far (-1: none yet; a usable one is 0 or more)."""
        self._whole = False
        """Reading a response that was not streamed (:meth:`read_response`)."""

    @property
    def check_options(self) -> dict[str, Any]:
        """How this accumulator checks calls, as plain data (as :attr:`Accumulator.check_options`),
        and ``api: "responses"``: a recording says which reader its events are for."""
        options: dict[str, Any] = {
            "limits": asdict(self.limits),
            "empty_arguments": self._empty_arguments,
            "recover_text_tool_calls": False,
        }
        if self._offers_none:
            options["tools_offered"] = "none"
        options["api"] = "responses"
        return options

    @property
    def usage(self) -> Any:
        """The usage of the final response (or of the latest snapshot)."""
        return self._usage

    @property
    def response_id(self) -> str | None:
        """The response's id, once an event carrying the response arrived (``response.created``)."""
        return self._id

    # -- feeding -----------------------------------------------------------------------------

    feed = CallStore.feed
    # The store's guarded ``feed`` itself, not an override that forwards to it: one Python call
    # (and a ``super()``) fewer per event, about a quarter of what reading a delta costs. It takes
    # one Responses stream event (an SDK event object or a dict); see ``CallStore.feed``.

    def _in_band_error(self) -> None:
        self.status = self.status or "error"

    def _late_input(self, chunk: Any, out: list[Event]) -> None:
        """A final event after the end (an ``error`` event ended the input): it would finish the
        response again, so the guard hears of it when a call is not ready (bounded)."""
        read = read_object(chunk, _EVENT_KEYS)
        kind = read[0].get("type") if read is not None else None
        terminal = isinstance(kind, str) and kind in _TERMINAL
        if terminal and len(self.finished) < 64 and any(c.status != "ready" for c in self.calls()):
            self.finished.append(0)

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

    def _read(self, event: Any, out: list[Event], events: bool) -> None:
        # The hot path (an argument delta, ~97% of a tool-calling stream's events) reads the
        # event's fields once, finds its handler by its type in one dict lookup (``_HANDLERS``),
        # takes an increasing sequence number in one comparison, and hands a plain continuation of
        # an open call to the owner's hot entry without a further call of its own; every other
        # case goes where it went before (``_sequence``, ``_delta`` ...).
        read = _read_object(event, _EVENT_KEYS)
        if read is None:
            self._damaged(None, f"an event must be an object, got {type(event).__name__}", event, out)
            return
        fields, unknown, (kind, number) = read
        handler = _HANDLERS.get(kind) if type(kind) is str else None
        if handler is None and (type(kind) is not str or not kind or len(kind) > MAX_LABEL):
            error = unknown.get("error") if unknown else None
            if error:
                raise InBandError(error)  # the SDK raises it itself; fed by hand, it ends the input
            # What it carried cannot be told: any open call may have lost a piece (rule 9).
            self._damaged(None, f"an event without a readable type ({show(kind)})", event, out)
            return
        if number is not None:
            if type(number) is int and self._last_number < number < _MAX_SEQUENCE:
                self._last_number = number  # increasing, as it should be: nothing to say
            else:
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
        if handler is None:
            return
        if handler is _ARGUMENT_DELTA:
            try:
                iid, index, delta = _DELTA_FIELDS(fields)
            except KeyError:  # a dict fed by hand may leave some out (the SDK's models never do)
                iid = None
            item = self._items.get(iid) if type(iid) is str else None
            if item is not None and kind == item.hot and type(delta) is str and delta:
                call = item.call
                if call is not None and (index is None or index == item.output_index):
                    owner = self._owner
                    owner.fragment(call, (delta, event, events), out)  # the owner's hot transition
                    if owner.notes:
                        for note in owner.take_notes():
                            self._record(note, call, out)
                    return
        handler(self, kind, fields, event, out, events)
        # Every other event (hosted tools, audio, annotations, events of newer releases) concerns
        # no function call: the final response carries what it built.

    def _on_terminal(
        self, kind: str, fields: Mapping[str, Any], raw: Any, out: list[Event], events: bool
    ) -> None:
        self._terminal(kind, fields.get("response"), raw, out)

    def _on_error(
        self, kind: str, fields: Mapping[str, Any], raw: Any, out: list[Event], events: bool
    ) -> None:
        body = {k: fields[k] for k in ("code", "message", "param") if fields.get(k) is not None}
        raise InBandError(body or {"message": "an error event without a message"})

    def _on_snapshot(
        self, kind: str, fields: Mapping[str, Any], raw: Any, out: list[Event], events: bool
    ) -> None:
        response = fields.get("response")
        if response is not None and self._shallow(response, "the response snapshot", out):
            self._snapshot = response
            self._take_response_envelope(response, out)

    def _on_text(
        self, kind: str, fields: Mapping[str, Any], raw: Any, out: list[Event], events: bool
    ) -> None:
        if not events:
            return  # nobody reads the events: the text is the final response's
        delta = fields.get("delta")
        if type(delta) is str and delta:
            field = _TEXT_EVENTS[kind]
            if field is not None:
                out.append(ReasoningDelta(0, field, delta))
            elif kind == "response.refusal.delta":
                out.append(RefusalDelta(0, delta))
            else:
                out.append(ContentDelta(0, delta))

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
        if value <= last:
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
        self._last_number = max(last, value)

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
        call = self._open_call(state, index, raw, notes, out)
        iid, unreadable = (
            clean_str(ifields.get("id"), "id", notes, raw) if ifields.get("id") is not None else (None, None)
        )
        if call is None:
            return None
        kind = _call_kind(ifields.get("type")) or "function_call"
        item = _Item(iid, index, call, kind)
        self._by_call[id(call)] = item
        self._touched = call
        fid = ifields.get("call_id")
        name = ifields.get("name")
        why = unreadable
        if fid is not None:
            fid, bad = clean_str(fid, "call_id", notes, raw)
            why = why or bad
        if name is not None:
            name, bad = clean_str(name, "name", notes, raw)
            why = why or bad
        taint = None
        if why is not None:
            taint = MalformedArguments(
                f"the item could not be read ({why}): the call may not be what the server sent"
            )
        elif iid is not None and iid in self._orphans:
            taint = MalformedArguments(
                "argument text arrived for this item before the item was announced: the call may "
                "not hold everything that arrived for it"
            )
        owner = self._owner
        owner.identify(call, Identity(fid, name, _CALL_TYPES[kind], None, False, raw), out, opening=True)
        owner.fragment(call, ("", raw, False), out)  # counted: the announcement is the call's first piece
        if taint is not None:
            owner.taint(call, taint)
        if owner.notes:
            notes.extend(owner.take_notes())
        if fid is not None and call.id == fid:
            state.table.by_id.setdefault(fid, call)
        if iid is not None:
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
                if item.call is not None and item.call.id == call_id:
                    return item
            if iid is None:
                for item in self._items.values():
                    if item.call is not None and item.call.id == call_id:
                        return item
        return None

    def _added(self, kind: str, fields: Mapping[str, Any], raw: Any, out: list[Event], events: bool) -> None:
        read = read_object(fields.get("item"), _ITEM_KEYS)
        if read is None:
            self._record(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, "output_item.added without a readable item", raw=raw),
                None,
                out,
            )
            return
        ifields = read[0]
        item_kind = _call_kind(ifields.get("type"))
        if item_kind is None:
            return
        text_key = _CALL_ITEMS[item_kind]
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
            arguments = ifields.get(text_key)
            if type(arguments) is str:
                if arguments:
                    # OpenAI announces an item with "" and streams the text; a server that
                    # announces some of it has it read as the first piece, held to the same
                    # statements (``.done``, ``output_item.done``).
                    self._take_text(item, arguments, raw, notes, out, events)
            elif arguments is not None:
                notes.append(
                    Anomaly(AnomalyCode.ARGUMENTS_NOT_STRING, f"{text_key} was {show(arguments)}", raw=raw)
                )
                self._owner.taint(call, MalformedArguments(f"the announced {text_key} was not text"))
        for note in notes:
            self._record(note, call, out)

    def _take_text(
        self,
        item: _Item,
        text: str | None,
        raw: Any,
        notes: list[Anomaly],
        out: list[Event],
        events: bool,
        taint: MalformedArguments | None = None,
    ) -> None:
        """A piece of an item's text, for the owner. A custom tool's input is text, not JSON: its
        pieces are told as ``ArgumentsDelta`` here, and the JSON scanner is never asked about them
        (no ``ArgumentsComplete`` or ``ArgumentsMalformed`` for text that is not meant as JSON)."""
        call = item.call
        assert call is not None
        owner = self._owner
        if taint is not None:
            owner.taint(call, taint)
        if item.kind == "function_call":
            owner.fragment(call, (text or "", raw, events), out)
        else:
            before = call.chars
            owner.fragment(call, (text or "", raw, False), out)
            if events and text and call.status == "open" and call.chars == before + len(text):
                out.append(arguments_delta(call, text))
        if owner.notes:
            notes.extend(owner.take_notes())

    def _delta(self, kind: str, fields: Mapping[str, Any], raw: Any, out: list[Event], events: bool) -> None:
        """An argument delta: the general path (``_read`` takes a plain continuation itself)."""
        try:
            iid, index, delta = _DELTA_FIELDS(fields)
        except KeyError:  # a dict fed by hand may leave some out (the SDK's own models never do)
            iid, index, delta = fields.get("item_id"), fields.get("output_index"), fields.get("delta")
        item = self._items.get(iid) if type(iid) is str else None
        if item is None:
            if type(iid) is not str or not iid:
                # Which call's text is this? Never guessed from its position: every open call is
                # refused.
                self._damaged(None, f"an argument delta without a readable item_id ({show(iid)})", raw, out)
            else:
                self._orphan(iid, raw, out)
            return
        call = item.call
        if call is None:
            return
        notes: list[Anomaly] = []
        taint = None
        said = _DELTA_EVENTS[kind]
        if said != item.kind:
            # A function's argument delta for a custom tool's item, or the reverse: which text is
            # whose cannot be told, so the call is refused at seal.
            notes.append(
                Anomaly(
                    AnomalyCode.MALFORMED_CHUNK,
                    f"a {said} delta named item {show(iid)}, a {item.kind} item",
                    raw=raw,
                )
            )
            taint = MalformedArguments(
                f"a {said} delta named this {item.kind} item: the call may not be what the server sent"
            )
        if index is not None and index != item.output_index and call.status == "open":
            notes.append(
                Anomaly(
                    AnomalyCode.MALFORMED_CHUNK,
                    f"a delta of item {show(iid)} said output_index {show(index)}, the item "
                    f"{item.output_index}",
                    raw=raw,
                )
            )
            taint = taint or MalformedArguments(
                "a delta of this item named another output_index: which text is whose cannot be told"
            )
        if type(delta) is not str:
            notes.append(Anomaly(AnomalyCode.ARGUMENTS_NOT_STRING, f"delta was {show(delta)}", raw=raw))
            taint = taint or MalformedArguments(
                f"a delta of this call was {type(delta).__name__}, not text: the call may not be "
                "what the server sent"
            )
            delta = None
        # A delta after the call's text was stated (``.done``, ``output_item.done``) or sealed is
        # refused by the owner's table, whitespace included.
        self._take_text(item, delta or None, raw, notes, out, events, taint)
        for note in notes:
            self._record(note, call, out)

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

    def _disagree(self, call: ToolCall, what: str, raw: Any, out: list[Event]) -> None:
        """The response contradicts what streamed for ``call``: refused (the owner's fault event)."""
        self._record(Anomaly(AnomalyCode.ARGUMENTS_MISMATCH, what, raw=raw), call, out)
        self._owner.refuse(
            call,
            TransitionRefused(
                f"{what}: the call is not certainly what the server meant, so it is refused",
                raw=call.arguments[: self.limits.sample_chars],
            ),
            out,
        )

    def _settle(
        self, item: _Item, ifields: Mapping[str, Any], where: str, raw: Any, out: list[Event]
    ) -> None:
        """A statement of the item (its arguments, name and call id) for the owner to hold to the call."""
        call = item.call
        if call is None:
            return
        self._touched = call
        notes: list[Anomaly] = []
        name = ifields.get("name")
        if name is not None and type(name) is not str:
            self._disagree(call, f"the name in {where} was {show(name)}, not text", raw, out)
            return
        fid = ifields.get("call_id")
        if fid is not None and type(fid) is not str:
            self._disagree(call, f"the call_id in {where} was {show(fid)}, not text", raw, out)
            return
        key = _CALL_ITEMS[item.kind]
        said = ifields.get("type")
        if said is not None and said != item.kind:
            self._disagree(call, f"{where} calls a {item.kind} item a {show(said)}", raw, out)
            return
        text = ifields.get(key)
        if text is not None and type(text) is not str:
            self._disagree(call, f"the {key} in {where} were {show(text)}, not text", raw, out)
            return
        adopt = not (self._orphans or self._orphans_lost)
        if text and call.chars == 0 and call.metrics.bytes == 0 and not call.stated:
            if not adopt:
                self._disagree(
                    call,
                    "argument deltas arrived for an item nobody announced, and this call received "
                    "none: its text may be among them",
                    raw,
                    out,
                )
                return
            if not self._whole:
                notes.append(
                    Anomaly(
                        AnomalyCode.ARGUMENTS_WITHOUT_DELTAS,
                        f"no argument delta arrived; the whole text was read from {where}",
                    )
                )
        owner = self._owner
        owner.state(call, Statement(text, name, fid, where, adopt, raw), out)
        if owner.notes:
            notes.extend(owner.take_notes())
        if fid and call.id == fid:
            state = self._choices.get(0)
            if state is not None:
                state.table.by_id.setdefault(fid, call)
        for note in notes:
            self._record(note, call, out)

    def _arguments_done(
        self, kind: str, fields: Mapping[str, Any], raw: Any, out: list[Event], events: bool
    ) -> None:
        iid = fields.get("item_id")
        item = self._items.get(iid) if type(iid) is str else None
        where = kind.removeprefix("response.")
        if item is None:
            self._record(
                Anomaly(
                    AnomalyCode.UNKNOWN_ITEM,
                    f"{where} for item {show(iid)}, which no output_item.added announced",
                    raw=raw,
                ),
                None,
                out,
            )
            return
        # Newer servers repeat the name here. The event's own kind is the item type it speaks of.
        item_type = _DONE_EVENTS[kind]
        key = _CALL_ITEMS[item_type]
        statement = {"type": item_type, key: fields.get(key), "name": fields.get("name")}
        self._settle(item, statement, where, raw, out)

    def _item_done(
        self, kind: str, fields: Mapping[str, Any], raw: Any, out: list[Event], events: bool
    ) -> None:
        item_value = fields.get("item")
        read = read_object(item_value, _ITEM_KEYS)
        if read is None:
            self._damaged(None, "output_item.done without a readable item", raw, out)
            return
        ifields = read[0]
        output_index = fields.get("output_index")
        item_type = _call_kind(ifields.get("type"))
        if item_type is None:
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
                    f"output_item.done for {item_type} item {show(iid)}, which no output_item.added "
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
        self._settle(item, ifields, "output_item.done", raw, out)
        self._close(item, ifields.get("status"), "its response.output_item.done", raw, out)

    def _claimed(self, call_id: Any, where: str, raw: Any, out: list[Event]) -> bool:
        """An item of another (or no known) item id names the ``call_id`` of a call that streamed:
        two items claim one call, so which text is the call's cannot be told. That call is refused,
        and no second call is opened for the claim. True when that was the case."""
        if type(call_id) is not str or not call_id:
            return False
        claimed = [
            item.call for item in self._by_call.values() if item.call is not None and item.call.id == call_id
        ]
        for call in claimed:
            self._disagree(
                call, f"an item of another id in {where} claims its call_id {show(call_id)}", raw, out
            )
        return bool(claimed)

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
                AnomalyCode.ITEM_NOT_DONE, f"{where} said status {show(status)}, not 'completed'", raw=raw
            ),
            call,
            out,
        )
        if self._owner.end(call, f"{where} said status {show(status)}, not 'completed'", self._now()):
            out.append(ToolCallIncomplete(call))

    def _shallow(self, value: Any, what: str, out: list[Event]) -> bool:
        """May a response object be kept for the final response? Not when nested deeper than
        ``Limits.max_depth``. It is not charged to ``max_stream_bytes``: it is the one object the
        SDK decoded and hands out itself (the next one replaces it); toolstitch only compares
        the function calls' text in it."""
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

    def _terminal(self, kind: str, response: Any, raw: Any, out: list[Event]) -> None:
        state = self._state(out)
        if self.status is not None:
            # A second final event changes nothing (recorded as an event after the end), but it
            # finishes the response again: the guard hears of it if its calls changed since.
            if state is not None:
                self._decide(state, False)
            return
        read = read_object(response, _RESPONSE_KEYS)
        if read is None:
            self._damaged(None, f"{kind} without a readable response", raw, out)
            self.status = "failed"
            if state is not None:
                self._decide(state, True)
            self.end(InBandError({"message": f"{kind} carried no readable response"}))
            return
        get = read[0].get
        if self._shallow(response, "the final response", out):
            self._final = response
        self._take_response_envelope(response, out)
        status = _TERMINAL.get(kind)
        said = get("status")
        if status == "completed" and said != "completed":
            # The event says completed, the response says otherwise (or nothing readable): the
            # worse one is believed.
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
        self._reconcile(get("output"), raw, out, self.status == "completed")
        if state is None:
            return
        calls = ordered(state.table.calls)
        owner = self._owner
        if self.status == "completed":
            closing = []
            for call in calls:
                if call.status != "open":
                    continue
                item = self._by_call.get(id(call))
                if item is not None and item.closed:
                    closing.append(call)
                    continue
                self._record(
                    Anomaly(
                        AnomalyCode.ITEM_NOT_DONE,
                        "the response completed, but this call's output_item.done never said 'completed'",
                    ),
                    call,
                    out,
                )
                if owner.end(call, "its response.output_item.done never arrived", self._now()):
                    out.append(ToolCallIncomplete(call))
            state.finish_reason = "tool_calls" if calls else "stop"
            state.finish_reasons.append(state.finish_reason)
            self._seal_calls(state, closing, self._now(), out)
            if calls:
                self._ensure_ids(state, calls)
            self._decide(state, True)
            out.append(ChoiceFinished(0, "completed"))
            return
        details = get("incomplete_details")
        reason = _field(details, "reason") if details is not None else None
        why = f"the response ended {self.status}" + (f" ({show(reason)})" if reason is not None else "")
        self._record(Anomaly(AnomalyCode.RESPONSE_NOT_COMPLETED, why, raw=None), None, out)
        for call in calls:
            if owner.end(call, why, self._now()):
                out.append(ToolCallIncomplete(call))
        if calls:
            self._ensure_ids(state, calls)
        self._decide(state, True)
        if self.status == "failed":
            error = get("error")
            body = _dump(error) if error is not None else {"message": why}
            out.extend(self.end(InBandError(body)))

    def _reconcile(self, output: Any, raw: Any, out: list[Event], completed: bool) -> None:
        """Hold the final response's ``function_call`` items to the calls: each is a statement of
        its call (or, never streamed, the call read whole). An item listed twice, two items
        claiming one ``call_id``, or a streamed call the output leaves out, refuse the calls
        concerned (the response is the server's, so the disagreement cannot be repaired)."""
        streamed = [item.call for item in self._by_call.values() if item.call is not None]
        if output is None or (type(output) is list and not output):
            if streamed and not self._whole and completed:
                self._record(
                    Anomaly(
                        AnomalyCode.OUTPUT_MISSING,
                        "the final response carried no output, though function calls streamed",
                    ),
                    None,
                    out,
                )
                for call in streamed:
                    self._disagree(call, "the final response does not list this call", raw, out)
            return
        if type(output) is not list:
            self._damaged(None, f"the final response's output was {show(output)}, not a list", raw, out)
            return
        listed: dict[int, int] = {}
        by_call_id: dict[str, list[ToolCall]] = {}
        for position, entry in enumerate(output):
            read = read_object(entry, _ITEM_KEYS)
            if read is None or _call_kind(read[0].get("type")) is None:
                continue
            ifields = read[0]
            iid = ifields.get("id")
            call_id = ifields.get("call_id")
            item = self._find(iid if type(iid) is str else None, call_id if type(call_id) is str else None)
            if item is None and self._claimed(call_id, "the final response", raw, out):
                continue
            if item is None:
                notes: list[Anomaly] = []
                if not self._whole:
                    notes.append(
                        Anomaly(
                            AnomalyCode.ITEM_NOT_STREAMED,
                            f"{ifields.get('type')} item {show(iid)} appeared only in the final response",
                            raw=entry,
                        )
                    )
                item = self._open_item(ifields, position, entry, out, notes)
                whole = item.call if item is not None else None
                for note in notes:
                    self._record(note, whole, out)
                if item is None or whole is None:
                    continue
                self._settle(item, ifields, "the final response", raw, out)
                self._close(item, ifields.get("status"), "the final response's item", raw, out)
            elif item.call is None:
                continue
            else:
                if id(item.call) in listed:
                    self._disagree(item.call, "the final response lists this call's item twice", raw, out)
                    continue
                self._settle(item, ifields, "the final response", raw, out)
                status = ifields.get("status")
                if status not in ("completed", None) and item.call.status == "open":
                    self._close(item, status, "the final response's item", raw, out)
            listed_call = item.call
            assert listed_call is not None
            listed[id(listed_call)] = position
            if listed_call.id:
                by_call_id.setdefault(listed_call.id, []).append(listed_call)
        for call_id, calls in by_call_id.items():
            if len(calls) > 1:
                for call in calls:
                    self._disagree(
                        call, f"two items of the final response claim call_id {show(call_id)}", raw, out
                    )
        if not self._whole and completed:
            for call in streamed:
                if id(call) not in listed:
                    self._disagree(call, "the final response does not list this call", raw, out)

    # -- ending ------------------------------------------------------------------------------

    def _end(self, error: BaseException | None, closed: bool, t: float, out: list[Event]) -> None:
        """Calls not sealed by ``response.completed`` become ``incomplete``."""
        if self.status is not None:
            # Opened after the response's final event (which sealed or refused every call it
            # knew): nothing of it was confirmed, so it never runs.
            why = "the call arrived after the response's final event"
        elif error is not None:
            why = f"the stream failed ({type(error).__name__}) before the response completed"
        elif closed:
            why = "the stream was closed before the response completed"
        else:
            why = "the stream ended without response.completed"
        if self.status is None and not closed:
            self._record(Anomaly(AnomalyCode.RESPONSE_NOT_COMPLETED, why), None, out)
        for call in self._open_calls():
            if self._owner.end(call, why, t):
                out.append(ToolCallIncomplete(call))

    def get_final_response(self) -> Any:
        """The SDK's ``Response`` the server sent in its final event, exactly as the SDK decoded it
        (once the input is over; this ends it if not yet ended). Never rebuilt: where it disagrees
        with the stream, the calls concerned were refused, and ``anomalies`` say why.

        Raises :class:`~toolstitch.errors.IncompleteStreamError` when no ``response.completed`` or
        ``response.incomplete`` arrived (the stream broke, an ``error`` event, ``response.failed``);
        it carries the latest response the server sent (a snapshot) and the calls. A response that
        ended ``incomplete`` is returned (its ``status`` says so; none of its calls is ``ready``).
        """
        self.end()
        cls = response_class()
        if cls is None:
            raise RuntimeError("this openai release has no Responses API (openai.types.responses)")
        final = self._final
        if self.error is not None or self.status not in ("completed", "incomplete") or final is None:
            if self.error is not None:
                why = f"the stream failed with {type(self.error).__name__}: {show(str(self.error), 500)}"
            elif self.status is None:
                why = "the stream ended without response.completed"
            elif final is None:
                why = "the final response could not be kept (nested too deep)"
            else:
                why = f"the response ended {self.status}"
            partial = final if final is not None else self._snapshot
            raise IncompleteStreamError(why, partial=_as_response(cls, partial), tool_calls=self.calls())
        return _as_response(cls, final)


_Handler = Callable[[ResponseAccumulator, str, Mapping[str, Any], Any, list[Event], bool], None]
_HANDLERS: dict[str, _Handler] = {
    **dict.fromkeys(_DELTA_EVENTS, ResponseAccumulator._delta),
    "response.output_item.added": ResponseAccumulator._added,
    **dict.fromkeys(_DONE_EVENTS, ResponseAccumulator._arguments_done),
    "response.output_item.done": ResponseAccumulator._item_done,
    **dict.fromkeys((*_TERMINAL, "response.unfinished"), ResponseAccumulator._on_terminal),
    "error": ResponseAccumulator._on_error,
    **dict.fromkeys(_SNAPSHOT_EVENTS, ResponseAccumulator._on_snapshot),
    **dict.fromkeys(_TEXT_EVENTS, ResponseAccumulator._on_text),
}
"""Each event type this reader acts on, and the method that reads it (one lookup per event)."""
_ARGUMENT_DELTA = ResponseAccumulator._delta


def _as_response(cls: Any, value: Any) -> Any:
    """``value`` as the SDK's ``Response``: the object itself when the SDK decoded it (the server's,
    unchanged), else a dict fed by hand built the way the SDK builds the ones it hands out (its
    ``construct_type``: nested models, no validation); None for nothing."""
    if value is None or isinstance(value, cls):
        return value
    data = _dump(value)
    try:
        return cls.model_validate(data)
    except (ValidationError, TypeError, ValueError):
        pass
    try:
        from openai._models import construct_type

        return construct_type(type_=cls, value=data)
    except Exception:
        return None
