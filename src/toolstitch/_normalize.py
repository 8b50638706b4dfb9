"""The normalize layer: every provider quirk is handled here, and only here.

A raw chunk (the SDK's ``ChatCompletionChunk``, or a plain ``dict`` as decoded from SSE) is read
into canonical pieces: the envelope (:class:`Envelope`), one :class:`ChoicePiece` per choice, and for
each tool-call entry a :class:`ToolFragment` whose call is resolved by :func:`resolve_call`.

Rules enforced here (numbers refer to ``DESIGN.md``):

* **Key by index** (1). A fragment joins the call its ``index`` names. When ``index`` is missing or
  null (Gemini, Mistral, Ollama) a fragment with a new id opens a call and one without an id
  continues the latest call. An index reused for a different call (a different non-empty id, or a new
  ``{`` after that call's arguments already form a complete JSON value) opens a new call.
* **Empty is not missing is not {}** (3). ``""``, ``null`` and a missing key add nothing.
* **Every tolerance is visible** (8). Each repair yields an :class:`~toolstitch.Anomaly` with a
  stable code; the accumulator attaches it to the call and the stream.

Nothing in this module keeps chunk objects or copies them: it reads fields and moves on (rule 7).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ._anomaly import Anomaly, AnomalyCode

if TYPE_CHECKING:
    from ._call import ToolCall

__all__ = [
    "ChoicePiece",
    "Envelope",
    "MalformedChunk",
    "ToolFragment",
    "read_chunk",
    "resolve_call",
]

_TOOL_CALL_KEYS = frozenset({"index", "id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})
_DELTA_KEYS = frozenset({"role", "content", "refusal", "tool_calls", "function_call"})
_CHOICE_KEYS = frozenset({"index", "delta", "finish_reason", "logprobs"})
_ENVELOPE_KEYS = frozenset(
    {
        "id",
        "object",
        "created",
        "model",
        "system_fingerprint",
        "service_tier",
        "usage",
        "choices",
        # Per-chunk noise that has no meaning for the finished completion.
        "obfuscation",
    }
)


class MalformedChunk(ValueError):
    """A chunk so broken that nothing in it can be used (e.g. not an object)."""


def _get(obj: Any, key: str) -> Any:
    """Read a known field from a dict or an SDK model (pydantic keeps a model's fields in ``__dict__``;
    reading it directly skips attribute lookup, which matters at one call per field per chunk)."""
    if type(obj) is dict:
        return obj.get(key)
    return obj.__dict__.get(key)


def _is_object(value: Any) -> bool:
    """A JSON object: a dict, or an SDK (pydantic) model built from one."""
    return type(value) is dict or isinstance(value, BaseModel)


def _extras(obj: Any, known: frozenset[str]) -> dict[str, Any] | None:
    """Unknown fields of a dict or SDK model, or None. Cheap: SDK models keep them apart already."""
    if type(obj) is dict:
        if obj.keys() <= known:
            return None
        return {k: v for k, v in obj.items() if k not in known}
    extra = obj.__pydantic_extra__
    if not extra:
        return None
    return {k: v for k, v in extra.items() if k not in known} or None


class Envelope:
    """Chunk-level fields, read once per chunk."""

    __slots__ = (
        "created",
        "extra",
        "id",
        "model",
        "object",
        "service_tier",
        "system_fingerprint",
        "usage",
    )

    def __init__(self, chunk: Any) -> None:
        self.id = _get(chunk, "id")
        self.object = _get(chunk, "object")
        self.created = _get(chunk, "created")
        self.model = _get(chunk, "model")
        self.system_fingerprint = _get(chunk, "system_fingerprint")
        self.service_tier = _get(chunk, "service_tier")
        self.usage = _get(chunk, "usage")
        self.extra = _extras(chunk, _ENVELOPE_KEYS)


class ToolFragment:
    """One ``delta.tool_calls`` entry, cleaned: ``id``/``name`` None unless usable."""

    __slots__ = ("anomalies", "arguments", "extra", "id", "index", "name", "raw", "replace", "type")

    def __init__(self) -> None:
        self.anomalies: list[Anomaly] | None = None
        """Repairs made while reading this entry; the accumulator attaches them to its call."""
        self.index: int | None = None
        self.id: str | None = None
        self.name: str | None = None
        self.type: Any = None
        self.arguments: str | None = None
        self.replace = False
        """True when ``arguments`` is the whole argument text (sent as an object), not a piece."""
        self.extra: dict[str, Any] | None = None
        self.raw: Any = None


class ChoicePiece:
    """One ``choices[]`` entry of a chunk, cleaned."""

    __slots__ = (
        "content",
        "extra",
        "finish_reason",
        "index",
        "logprobs",
        "refusal",
        "role",
        "tool_fragments",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.role: str | None = None
        self.content: str | None = None
        self.refusal: str | None = None
        self.tool_fragments: list[ToolFragment] | None = None
        self.finish_reason: str | None = None
        self.logprobs: Any = None
        self.extra: dict[str, Any] | None = None


def _clean_str(value: Any, what: str, anomalies: list[Anomaly], raw: Any) -> str | None:
    """A usable non-empty string, or None. ``"null"`` counts as absent; integers become strings."""
    if value is None or value == "":
        return None
    if type(value) is str:
        if value == "null":
            anomalies.append(Anomaly(AnomalyCode.NULL_STRING_FIELD, f'{what} was the string "null"', raw=raw))
            return None
        return value
    if what == "id" and type(value) is int:
        anomalies.append(Anomaly(AnomalyCode.ID_NOT_STRING, "id was an integer", raw=raw))
        return str(value)
    anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, f"{what} was a {type(value).__name__}", raw=raw))
    return None


def _read_tool_fragment(entry: Any, chunk_anomalies: list[Anomaly]) -> ToolFragment | None:
    if entry is None:
        return None
    if not _is_object(entry):
        chunk_anomalies.append(
            Anomaly(AnomalyCode.MALFORMED_CHUNK, "tool call entry is not an object", raw=entry)
        )
        return None
    frag = ToolFragment()
    frag.raw = entry
    anomalies: list[Anomaly] = []
    index = _get(entry, "index")
    if index is not None:
        if type(index) is int and index >= 0:
            frag.index = index
        elif type(index) is str and index.isdigit():
            frag.index = int(index)
            anomalies.append(Anomaly(AnomalyCode.NON_INTEGER_INDEX, "index was a string", raw=entry))
        elif type(index) is float and index.is_integer() and index >= 0:
            frag.index = int(index)
            anomalies.append(Anomaly(AnomalyCode.NON_INTEGER_INDEX, "index was a float", raw=entry))
        else:
            anomalies.append(Anomaly(AnomalyCode.NON_INTEGER_INDEX, f"unusable index {index!r}", raw=entry))
    raw_id = _get(entry, "id")
    if raw_id is not None:
        frag.id = _clean_str(raw_id, "id", anomalies, entry)
    frag.type = _get(entry, "type")
    function = _get(entry, "function")
    if function is not None:
        if not _is_object(function):
            anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "function is not an object", raw=entry))
        else:
            name = _get(function, "name")
            if name is not None:
                frag.name = _clean_str(name, "name", anomalies, entry)
            arguments = _get(function, "arguments")
            if type(arguments) is str:
                frag.arguments = arguments
            elif arguments is None:
                pass
            elif isinstance(arguments, (dict, list)):
                frag.arguments = json.dumps(arguments, ensure_ascii=False)
                frag.replace = True
                anomalies.append(
                    Anomaly(AnomalyCode.ARGUMENTS_OBJECT, "arguments arrived as a JSON value", raw=entry)
                )
            else:
                anomalies.append(
                    Anomaly(
                        AnomalyCode.ARGUMENTS_NOT_STRING,
                        f"arguments was a {type(arguments).__name__}; skipped",
                        raw=entry,
                    )
                )
            fextra = _extras(function, _FUNCTION_KEYS)
            if fextra:
                frag.extra = {"function": fextra}
    extra = _extras(entry, _TOOL_CALL_KEYS)
    if extra:
        frag.extra = {**extra, **frag.extra} if frag.extra else extra
    if anomalies:
        frag.anomalies = anomalies
    return frag


def _read_legacy_function_call(fc: Any) -> ToolFragment | None:
    """A legacy ``delta.function_call`` piece, read as tool call 0 (its id will be synthesized)."""
    if not _is_object(fc):
        return None
    frag = ToolFragment()
    frag.raw = fc
    anomalies: list[Anomaly] = []
    frag.anomalies = anomalies
    frag.index = 0
    frag.type = "function"
    name = _get(fc, "name")
    if name is not None:
        frag.name = _clean_str(name, "name", anomalies, fc)
    arguments = _get(fc, "arguments")
    if type(arguments) is str:
        frag.arguments = arguments
    anomalies.append(
        Anomaly(
            AnomalyCode.LEGACY_FUNCTION_CALL,
            "legacy delta.function_call read as a tool call",
            raw=fc,
        )
    )
    return frag


def read_chunk(chunk: Any, anomalies: list[Anomaly]) -> tuple[Envelope, list[ChoicePiece]]:
    """Read one raw chunk. Repairs append to ``anomalies``; only an unusable chunk raises."""
    if not _is_object(chunk):
        raise MalformedChunk(f"a chunk must be an object, got {type(chunk).__name__}")
    envelope = Envelope(chunk)
    raw_choices = _get(chunk, "choices")
    if raw_choices is None:
        return envelope, []
    if type(raw_choices) is not list:
        anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "choices is not a list", raw=raw_choices))
        return envelope, []
    pieces: list[ChoicePiece] = []
    for raw in raw_choices:
        if not _is_object(raw):
            anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "choice is not an object", raw=raw))
            continue
        index = _get(raw, "index")
        if type(index) is not int or index < 0:
            anomalies.append(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, f"choice index {index!r} read as 0", raw=raw)
            )
            index = 0
        piece = ChoicePiece(index)
        finish = _get(raw, "finish_reason")
        if finish is not None and finish != "":
            piece.finish_reason = finish if type(finish) is str else str(finish)
        piece.logprobs = _get(raw, "logprobs")
        delta = _get(raw, "delta")
        if delta is not None:
            if not _is_object(delta):
                anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "delta is not an object", raw=raw))
            else:
                _read_delta(delta, piece, anomalies)
        pieces.append(piece)
    return envelope, pieces


def _text(value: Any, what: str, anomalies: list[Anomaly]) -> str | None:
    if value is None or type(value) is str:
        return value
    anomalies.append(
        Anomaly(AnomalyCode.MALFORMED_CHUNK, f"{what} was a {type(value).__name__}; skipped", raw=value)
    )
    return None


def _read_delta(delta: Any, piece: ChoicePiece, anomalies: list[Anomaly]) -> None:
    piece.role = _get(delta, "role")
    piece.content = _text(_get(delta, "content"), "content", anomalies)
    piece.refusal = _text(_get(delta, "refusal"), "refusal", anomalies)
    piece.extra = _extras(delta, _DELTA_KEYS)
    tool_calls = _get(delta, "tool_calls")
    if tool_calls:
        if type(tool_calls) is not list:
            anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "tool_calls is not a list", raw=tool_calls))
        else:
            frags = []
            for entry in tool_calls:
                frag = _read_tool_fragment(entry, anomalies)
                if frag is not None:
                    frags.append(frag)
            piece.tool_fragments = frags
    function_call = _get(delta, "function_call")
    if function_call is not None and not tool_calls:
        frag = _read_legacy_function_call(function_call)
        if frag is not None:
            piece.tool_fragments = [frag]


class CallTable:
    """Per-choice bookkeeping that maps fragments to calls: by index, by id, and the latest call."""

    __slots__ = ("by_id", "by_index", "calls", "max_index")

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.by_index: dict[int, ToolCall] = {}
        self.by_id: dict[str, ToolCall] = {}
        self.max_index = -1


def _starts_new_value(arguments: str | None) -> bool:
    return bool(arguments) and arguments.lstrip().startswith("{")  # type: ignore[union-attr]


def resolve_call(
    table: CallTable, frag: ToolFragment, choice: int, anomalies: list[Anomaly]
) -> tuple[ToolCall | None, int]:
    """Find the call a fragment belongs to.

    Returns ``(call, index)``: ``call`` is None when the fragment opens a new call, which the
    accumulator then creates at ``index``. Repairs append to ``anomalies``.
    """
    index = frag.index
    fid = frag.id
    if index is not None:
        call = table.by_index.get(index)
        if call is None:
            if not table.calls and index > 0:
                anomalies.append(
                    Anomaly(
                        AnomalyCode.INDEX_NOT_FROM_ZERO,
                        f"the first tool call has index {index}",
                        choice,
                        index,
                        frag.raw,
                    )
                )
            elif table.calls and index > table.max_index + 1:
                anomalies.append(
                    Anomaly(
                        AnomalyCode.INDEX_GAP,
                        f"index jumped from {table.max_index} to {index}",
                        choice,
                        index,
                        frag.raw,
                    )
                )
            return None, index
        if fid is not None and call.id is not None and fid != call.id and fid not in table.by_id:
            anomalies.append(
                Anomaly(
                    AnomalyCode.INDEX_REUSED,
                    f"a new id {fid!r} arrived at index {index}, which belongs to {call.id!r}",
                    choice,
                    index,
                    frag.raw,
                )
            )
            return None, index
        if fid is None and call.scanner.complete and _starts_new_value(frag.arguments):
            anomalies.append(
                Anomaly(
                    AnomalyCode.INDEX_REUSED,
                    f"a new JSON value started at index {index} after that call's arguments were complete",
                    choice,
                    index,
                    frag.raw,
                )
            )
            return None, index
        if fid is not None and fid in table.by_id and table.by_id[fid] is not call:
            # A repeated id names another call than the index does: trust the id.
            return table.by_id[fid], table.by_id[fid].index
        return call, index

    # No usable index: by id, then by position.
    next_index = table.max_index + 1
    if fid is not None:
        known = table.by_id.get(fid)
        if known is not None:
            return known, known.index
        anomalies.append(
            Anomaly(
                AnomalyCode.MISSING_INDEX,
                "tool call without index; opened by its new id",
                choice,
                next_index,
                frag.raw,
            )
        )
        return None, next_index
    latest = table.calls[-1] if table.calls else None
    if latest is None:
        anomalies.append(
            Anomaly(
                AnomalyCode.MISSING_INDEX,
                "tool call without index or id; opened a call",
                choice,
                next_index,
                frag.raw,
            )
        )
        return None, next_index
    opens_new = (
        (frag.name is not None and latest.name is not None and frag.name != latest.name)
        or (latest.scanner.complete and _starts_new_value(frag.arguments))
        or (frag.name is not None and latest.name is not None and latest.scanner.complete)
    )
    if opens_new:
        anomalies.append(
            Anomaly(
                AnomalyCode.MISSING_INDEX,
                "tool call without index or id; opened a new call",
                choice,
                next_index,
                frag.raw,
            )
        )
        return None, next_index
    anomalies.append(
        Anomaly(
            AnomalyCode.MISSING_INDEX,
            "tool call without index; continued the latest call",
            choice,
            latest.index,
            frag.raw,
        )
    )
    return latest, latest.index


def apply_identity(call: ToolCall, frag: ToolFragment, anomalies: list[Anomaly]) -> None:
    """Write ``id``, ``name`` and ``type`` once (first usable value); note repeats and conflicts."""
    fid = frag.id
    if fid is not None:
        if call.id is None:
            call.id = fid
        elif fid == call.id:
            anomalies.append(
                Anomaly(
                    AnomalyCode.ID_REPEATED,
                    "id repeated on a later fragment",
                    call.choice,
                    call.index,
                    frag.raw,
                )
            )
        else:
            anomalies.append(
                Anomaly(
                    AnomalyCode.ID_CONFLICT,
                    f"a later fragment carried id {fid!r}; kept {call.id!r}",
                    call.choice,
                    call.index,
                    frag.raw,
                )
            )
    name = frag.name
    if name is not None:
        if call.name is None:
            call.name = name
        elif name == call.name:
            anomalies.append(
                Anomaly(
                    AnomalyCode.NAME_REPEATED,
                    "name repeated on a later fragment",
                    call.choice,
                    call.index,
                    frag.raw,
                )
            )
        else:
            anomalies.append(
                Anomaly(
                    AnomalyCode.NAME_CONFLICT,
                    f"a later fragment carried name {name!r}; kept {call.name!r}",
                    call.choice,
                    call.index,
                    frag.raw,
                )
            )
    if call.type is None:
        ftype = frag.type
        if ftype is not None and ftype != "":
            call.type = ftype
            if ftype != "function":
                anomalies.append(
                    Anomaly(
                        AnomalyCode.TYPE_UNEXPECTED,
                        f"type was {ftype!r}",
                        call.choice,
                        call.index,
                        frag.raw,
                    )
                )
        elif call.metrics.fragments == 0:
            anomalies.append(
                Anomaly(
                    AnomalyCode.TYPE_UNEXPECTED,
                    "the call's first fragment had no type",
                    call.choice,
                    call.index,
                    frag.raw,
                )
            )
    if frag.extra:
        call.extra.update(frag.extra)


def _append_breaks(call: ToolCall, text: str) -> bool:
    """True when appending ``text`` would leave the call's JSON malformed (probed on a copy)."""
    if call.scanner.complete:
        return True
    probe = call.scanner.copy()
    probe.feed(text)
    return probe.error is not None


def argument_text(call: ToolCall, frag: ToolFragment, anomalies: list[Anomaly]) -> tuple[str | None, bool]:
    """The text to add to ``call`` and whether it replaces the existing text.

    Detects cumulative resends (Q17): a fragment that repeats all the text so far plus more.
    """
    text = frag.arguments
    if not text:
        return None, False
    if frag.replace:
        return text, True
    # Only a fragment at least as long as everything so far can be a resend; checking just those
    # keeps the cost linear (the join below happens rarely, and only on short prefixes).
    # A standard continuation never makes the text malformed, so a fragment that starts with the
    # text so far is read as a resend only when appending it would break the JSON (or the value is
    # already complete): ``{"`` then ``{": 1}`` is the key ``"{"``, not a resend.
    chars = call.chars
    if call.status == "open" and chars >= 2 and len(text) >= chars:
        so_far = call.arguments
        if len(text) > chars and text.startswith(so_far) and _append_breaks(call, text):
            anomalies.append(
                Anomaly(
                    AnomalyCode.ARGUMENTS_CUMULATIVE,
                    "fragment repeated the arguments so far",
                    call.choice,
                    call.index,
                    frag.raw,
                )
            )
            return text[len(so_far) :], False
        if text == so_far and call.scanner.complete:
            anomalies.append(
                Anomaly(
                    AnomalyCode.ARGUMENTS_CUMULATIVE,
                    "fragment resent the complete arguments",
                    call.choice,
                    call.index,
                    frag.raw,
                )
            )
            return None, False
    return text, False
