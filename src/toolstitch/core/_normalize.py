"""The normalize layer: every provider quirk is handled here, and only here.

A raw chunk (the SDK's ``ChatCompletionChunk``, or a plain ``dict`` as decoded from SSE) is read
into canonical pieces: the envelope (:class:`Envelope`), one :class:`ChoicePiece` per choice, and for
each tool-call entry a :class:`ToolFragment` whose call is resolved by :func:`resolve_call`.

Rules enforced here (numbers refer to ``DESIGN.md``):

* **Key by index** (1). A fragment joins the call its ``index`` names. When ``index`` is missing or
  null (Gemini, Mistral, Ollama) a fragment with a new id opens a call and one without an id
  continues the latest call. An index reused for a different call (a different non-empty id, a
  different name, or a new ``{`` after that call's arguments already form a complete JSON value)
  opens a new call; an exact resend of that value does not.
* **Written once** (Q07-Q10, Q13-Q15). ``id``, ``function.name`` and ``type`` are set from the first
  usable value and never appended; ``""``, ``null`` and ``"null"`` count as absent; an integer id
  becomes a string. A name that arrives in pieces before any argument text is joined; an id that
  changes while the arguments are still streaming is replaced (Poolside's canonical id comes second).
* **Arguments are text** (Q17-Q19). A JSON object replaces the text once, serialised; ``null`` adds
  nothing. Cumulative resends (each fragment repeats all the text so far) are detected without ever
  misreading a standard stream: the switch to "cumulative" happens only when appending the fragment
  could not possibly be valid JSON (see :func:`argument_text`).
* **Empty is not missing is not {}** (3). ``""``, ``null`` and a missing key add nothing.
* **Every tolerance is visible** (8). Each repair yields an :class:`~toolstitch.Anomaly` with a
  stable code; the accumulator attaches it to the call and the stream.

Nothing in this module keeps chunk objects or copies them: it reads fields and moves on (rule 7).
The only per-call state it keeps is in :class:`CallTable` (the maps from index and id to calls, and
the last fragment of a call while it may still turn out to be a cumulative resend).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..errors import InBandError, MalformedChunk
from ._anomaly import Anomaly, AnomalyCode

if TYPE_CHECKING:
    from ._call import ToolCall

__all__ = [
    "REASONING_FIELDS",
    "SKIP",
    "CallTable",
    "ChoicePiece",
    "Envelope",
    "InBandError",
    "ToolFragment",
    "apply_identity",
    "argument_text",
    "read_chunk",
    "resolve_call",
]

SKIP = -1
"""The index :func:`resolve_call` returns for a fragment that must not open a call."""

_TOOL_CALL_KEYS = frozenset({"index", "id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})
_DELTA_KEYS = frozenset({"role", "content", "refusal", "tool_calls", "function_call"})
_CHOICE_KEYS = frozenset({"index", "delta", "finish_reason", "logprobs"})
REASONING_FIELDS = frozenset({"reasoning_content", "reasoning", "reasoning_text", "thinking"})
"""Delta fields whose text is streamed in pieces and concatenated into the final message (Q29):
DeepSeek, xAI and Kimi use ``reasoning_content``; vLLM, Groq, Cerebras and OpenRouter ``reasoning``."""
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


def _fields(obj: Any) -> dict[str, Any] | None:
    """The known fields of a JSON object as a dict: the dict itself, or an SDK (pydantic) model's
    ``__dict__`` (where pydantic keeps them); None when ``obj`` is not an object.

    Reading fields from this dict, rather than with ``getattr`` per field, is what keeps the
    normalize layer cheap per chunk (rule 7).
    """
    if type(obj) is dict:
        return obj
    if isinstance(obj, BaseModel):
        return obj.__dict__
    return None


def _extras(obj: Any, known: frozenset[str]) -> dict[str, Any] | None:
    """Unknown non-null fields of a dict or SDK model, or None. Cheap: SDK models keep them apart.

    ``null`` values carry nothing and are dropped, so that a provider's ``"name": null`` beside a
    tool call (Fireworks) or ``"error": null`` on a chunk (Foundry Local) is not replayed in history.
    """
    if type(obj) is dict:
        if obj.keys() <= known:
            return None
        return {k: v for k, v in obj.items() if k not in known and v is not None} or None
    extra = obj.__pydantic_extra__
    if not extra:
        return None
    return {k: v for k, v in extra.items() if k not in known and v is not None} or None


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

    def __init__(self, chunk: Any, fields: dict[str, Any]) -> None:
        get = fields.get
        self.id = get("id")
        self.object = get("object")
        self.created = get("created")
        self.model = get("model")
        self.system_fingerprint = get("system_fingerprint")
        self.service_tier = get("service_tier")
        self.usage = get("usage")
        self.extra = _extras(chunk, _ENVELOPE_KEYS)


class ToolFragment:
    """One ``delta.tool_calls`` entry, cleaned: ``id``/``name`` None unless usable."""

    __slots__ = (
        "anomalies",
        "arguments",
        "extra",
        "id",
        "index",
        "name",
        "new_id",
        "raw",
        "replace",
        "table",
        "type",
    )

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
        self.new_id = False
        """Set by :func:`resolve_call` when ``id`` replaces the call's id (Q15)."""
        self.table: CallTable | None = None
        """Set by :func:`resolve_call`: the table of the fragment's choice."""


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
    if value is None:
        return None
    if value == "":
        anomalies.append(Anomaly(AnomalyCode.EMPTY_STRING_FIELD, f"{what} was an empty string", raw=raw))
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
    fields = _fields(entry)
    if fields is None:
        chunk_anomalies.append(
            Anomaly(AnomalyCode.MALFORMED_CHUNK, "tool call entry is not an object", raw=entry)
        )
        return None
    frag = ToolFragment()
    frag.raw = entry
    anomalies: list[Anomaly] = []
    index = fields.get("index")
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
    raw_id = fields.get("id")
    if raw_id is not None:
        frag.id = _clean_str(raw_id, "id", anomalies, entry)
    ftype = fields.get("type")
    if ftype is not None:
        if type(ftype) is str:
            frag.type = ftype
        else:
            anomalies.append(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, f"type was a {type(ftype).__name__}", raw=entry)
            )
    function = fields.get("function")
    if function is not None:
        ffields = _fields(function)
        if ffields is None:
            anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "function is not an object", raw=entry))
        else:
            name = ffields.get("name")
            if name is not None:
                frag.name = _clean_str(name, "name", anomalies, entry)
            arguments = ffields.get("arguments")
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
    fields = _fields(fc)
    if fields is None:
        return None
    frag = ToolFragment()
    frag.raw = fc
    anomalies: list[Anomaly] = []
    frag.anomalies = anomalies
    frag.index = 0
    frag.type = "function"
    name = fields.get("name")
    if name is not None:
        frag.name = _clean_str(name, "name", anomalies, fc)
    arguments = fields.get("arguments")
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
    fields = _fields(chunk)
    if fields is None:
        raise MalformedChunk(f"a chunk must be an object, got {type(chunk).__name__}")
    error = chunk.get("error") if type(chunk) is dict else (chunk.__pydantic_extra__ or {}).get("error")
    if error:
        # Like the SDK (``openai._streaming``): any truthy ``error`` is a failure, object or string.
        raise InBandError(error)
    envelope = Envelope(chunk, fields)
    raw_choices = fields.get("choices")
    if raw_choices is None:
        return envelope, []
    if type(raw_choices) is not list:
        anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "choices is not a list", raw=raw_choices))
        return envelope, []
    pieces: list[ChoicePiece] = []
    for raw in raw_choices:
        cfields = _fields(raw)
        if cfields is None:
            anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "choice is not an object", raw=raw))
            continue
        index = cfields.get("index")
        if type(index) is not int or index < 0:
            anomalies.append(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, f"choice index {index!r} read as 0", raw=raw)
            )
            index = 0
        piece = ChoicePiece(index)
        finish = cfields.get("finish_reason")
        if finish is not None:
            if type(finish) is not str:
                anomalies.append(
                    Anomaly(
                        AnomalyCode.MALFORMED_CHUNK,
                        f"finish_reason was a {type(finish).__name__}; read as not finished",
                        index,
                        raw=finish,
                    )
                )
            elif finish == "":
                anomalies.append(
                    Anomaly(
                        AnomalyCode.FINISH_REASON_EMPTY,
                        'finish_reason was ""; read as not finished',
                        index,
                    )
                )
            else:
                piece.finish_reason = finish
        piece.logprobs = cfields.get("logprobs")
        delta = cfields.get("delta")
        if delta is not None:
            dfields = _fields(delta)
            if dfields is None:
                anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, "delta is not an object", raw=raw))
            else:
                _read_delta(delta, dfields, piece, anomalies)
        pieces.append(piece)
    return envelope, pieces


def _text(value: Any, what: str, anomalies: list[Anomaly]) -> str | None:
    if value is None or type(value) is str:
        return value
    anomalies.append(
        Anomaly(AnomalyCode.MALFORMED_CHUNK, f"{what} was a {type(value).__name__}; skipped", raw=value)
    )
    return None


def _read_delta(delta: Any, fields: dict[str, Any], piece: ChoicePiece, anomalies: list[Anomaly]) -> None:
    get = fields.get
    piece.role = get("role")
    content = get("content")
    piece.content = (
        content if content is None or type(content) is str else _text(content, "content", anomalies)
    )
    refusal = get("refusal")
    piece.refusal = (
        refusal if refusal is None or type(refusal) is str else _text(refusal, "refusal", anomalies)
    )
    extra = _extras(delta, _DELTA_KEYS)
    if extra:
        # Keep what belongs to the message: reasoning text (concatenated) and structured values
        # (``reasoning_details`` lists, objects). Scalars beside them are per-chunk labels (Groq's
        # ``channel: "analysis"``, Mistral's ``index`` inside the delta, Together's ``token_id``):
        # concatenated or replayed in history they would be garbage, and OpenAI rejects unknown
        # message fields.
        piece.extra = {
            k: v
            for k, v in extra.items()
            if (k in REASONING_FIELDS and type(v) is str) or isinstance(v, (dict, list, BaseModel))
        } or None
    tool_calls = get("tool_calls")
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
    function_call = get("function_call")
    if function_call is not None and not tool_calls:
        frag = _read_legacy_function_call(function_call)
        if frag is not None:
            piece.tool_fragments = [frag]


class _Chain:
    """The last argument fragment of a call that may be a cumulative resender (Q17).

    Each fragment of a cumulative provider repeats all the text so far, so it starts with the
    previous fragment. Tracking stops at the first fragment that does not (every standard stream,
    usually at its second fragment), so the check costs nothing afterwards.
    """

    __slots__ = ("last", "latched")

    def __init__(self, last: str) -> None:
        self.last = last
        self.latched = False


class CallTable:
    """Per-choice bookkeeping that maps fragments to calls: by index, by id, and the latest call."""

    __slots__ = ("by_id", "by_index", "calls", "chains", "max_index")

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.by_index: dict[int, ToolCall] = {}
        self.by_id: dict[str, ToolCall] = {}
        self.max_index = -1
        self.chains: dict[int, _Chain] = {}
        """Per call slot, while the call may still turn out to resend its arguments cumulatively."""


def _starts_new_value(arguments: str | None) -> bool:
    return bool(arguments) and arguments.lstrip().startswith("{")  # type: ignore[union-attr]


def _is_resend(call: ToolCall, text: str | None) -> bool:
    """True when ``text`` is exactly the call's argument text so far (length compared first)."""
    return text is not None and len(text) == call.chars and call.arguments == text


def _mid_value(call: ToolCall) -> bool:
    """True while the call's arguments have started and their top-level value is still open."""
    scanner = call.scanner
    return call.status == "open" and scanner.started and not scanner.complete and scanner.error is None


def _carries_nothing(frag: ToolFragment) -> bool:
    return frag.id is None and frag.name is None and not frag.arguments and not frag.extra


def _note(
    anomalies: list[Anomaly], code: str, message: str, choice: int, index: int, frag: ToolFragment
) -> None:
    anomalies.append(Anomaly(code, message, choice, index, frag.raw))


def resolve_call(
    table: CallTable, frag: ToolFragment, choice: int, anomalies: list[Anomaly]
) -> tuple[ToolCall | None, int]:
    """Find the call a fragment belongs to.

    Returns ``(call, index)``: ``call`` is None when the fragment opens a new call, which the
    accumulator then creates at ``index``; ``(None, SKIP)`` when the fragment carries nothing and
    must not open one. Repairs append to ``anomalies``.
    """
    frag.table = table
    if frag.index is not None:
        return _resolve_indexed(table, frag, frag.index, choice, anomalies)
    return _resolve_unindexed(table, frag, choice, anomalies)


def _resolve_indexed(
    table: CallTable, frag: ToolFragment, index: int, choice: int, anomalies: list[Anomaly]
) -> tuple[ToolCall | None, int]:
    fid = frag.id
    call = table.by_index.get(index)
    if call is None:
        latest = table.calls[-1] if table.calls else None
        if fid is None and frag.name is None and frag.arguments and latest is not None and _mid_value(latest):
            # Q05 (Nebius, Cerebras): continuation pieces at a new index, without id or name.
            _note(
                anomalies,
                AnomalyCode.INDEX_CHANGED,
                f"a fragment without id or name arrived at new index {index} while call "
                f"{latest.index} was mid-value; read as its continuation",
                choice,
                latest.index,
                frag,
            )
            return latest, latest.index
        if _carries_nothing(frag):
            _note(
                anomalies,
                AnomalyCode.EMPTY_TOOL_CALL,
                f"an empty tool-call entry at new index {index} was ignored",
                choice,
                index,
                frag,
            )
            return None, SKIP
        if not table.calls and index > 0:
            _note(
                anomalies,
                AnomalyCode.INDEX_NOT_FROM_ZERO,
                f"the first tool call has index {index}",
                choice,
                index,
                frag,
            )
        elif table.calls and index > table.max_index + 1:
            _note(
                anomalies,
                AnomalyCode.INDEX_GAP,
                f"index jumped from {table.max_index} to {index}",
                choice,
                index,
                frag,
            )
        return None, index
    if fid is not None and fid != call.id:
        other = table.by_id.get(fid)
        if other is not None:
            if other.index == index:
                # Calls sharing an index (Q02), interleaved, told apart by their ids.
                return other, index
            # The id belongs to a call at another index: ids are not unique (Q39, TGI's "0").
            # The index wins (rule 1); the duplicate id is replaced when the message is built.
            return call, index
        if call.id is None:
            return call, index  # the id arrives after the call opened (Q11, Q12)
        if frag.name is None and _mid_value(call):
            # Q15 (Poolside): the id changes while the arguments are still streaming.
            _note(
                anomalies,
                AnomalyCode.ID_CHANGED,
                f"the id changed from {call.id!r} to {fid!r} mid-arguments; kept the later one",
                choice,
                index,
                frag,
            )
            frag.new_id = True
            table.by_id.setdefault(fid, call)
            return call, index
        _note(
            anomalies,
            AnomalyCode.INDEX_REUSED,
            f"a new id {fid!r} arrived at index {index}, which belongs to {call.id!r}",
            choice,
            index,
            frag,
        )
        return None, index
    if fid is None and call.scanner.complete:
        if frag.name is not None and call.name is not None and frag.name != call.name:
            _note(
                anomalies,
                AnomalyCode.INDEX_REUSED,
                f"a new name {frag.name!r} arrived at index {index} after {call.name!r} was complete",
                choice,
                index,
                frag,
            )
            return None, index
        if _starts_new_value(frag.arguments) and not _is_resend(call, frag.arguments):
            _note(
                anomalies,
                AnomalyCode.INDEX_REUSED,
                f"a new JSON value started at index {index} after that call's arguments were complete",
                choice,
                index,
                frag,
            )
            return None, index
    return call, index


def _resolve_unindexed(
    table: CallTable, frag: ToolFragment, choice: int, anomalies: list[Anomaly]
) -> tuple[ToolCall | None, int]:
    """No usable index (Q01, Q06, Q37): by id, then by position."""
    next_index = table.max_index + 1
    fid = frag.id
    if fid is not None:
        known = table.by_id.get(fid)
        if known is None:
            _note(
                anomalies,
                AnomalyCode.MISSING_INDEX,
                "tool call without index; opened by its new id",
                choice,
                next_index,
                frag,
            )
            return None, next_index
        if (
            known.scanner.complete
            and _starts_new_value(frag.arguments)
            and not _is_resend(known, frag.arguments)
        ):
            _note(
                anomalies,
                AnomalyCode.MISSING_INDEX,
                "tool call without index; its id's call was complete and a new JSON value "
                "started: opened a new call",
                choice,
                next_index,
                frag,
            )
            return None, next_index
        _note(
            anomalies,
            AnomalyCode.MISSING_INDEX,
            "tool call without index; continued the call with its id",
            choice,
            known.index,
            frag,
        )
        return known, known.index
    latest = table.calls[-1] if table.calls else None
    if latest is None:
        if _carries_nothing(frag):
            _note(
                anomalies,
                AnomalyCode.EMPTY_TOOL_CALL,
                "an empty tool-call entry without index was ignored",
                choice,
                next_index,
                frag,
            )
            return None, SKIP
        _note(
            anomalies,
            AnomalyCode.MISSING_INDEX,
            "tool call without index or id; opened a call",
            choice,
            next_index,
            frag,
        )
        return None, next_index
    name_differs = frag.name is not None and latest.name is not None and frag.name != latest.name
    complete = latest.scanner.complete
    opens_new = (
        name_differs
        or (complete and _starts_new_value(frag.arguments) and not _is_resend(latest, frag.arguments))
        or (complete and frag.name is not None and latest.name is not None and not frag.arguments)
    )
    if opens_new:
        _note(
            anomalies,
            AnomalyCode.MISSING_INDEX,
            "tool call without index or id; opened a new call",
            choice,
            next_index,
            frag,
        )
        return None, next_index
    _note(
        anomalies,
        AnomalyCode.MISSING_INDEX,
        "tool call without index or id; continued the latest call",
        choice,
        latest.index,
        frag,
    )
    return latest, latest.index


def apply_identity(call: ToolCall, frag: ToolFragment, anomalies: list[Anomaly]) -> None:
    """Write ``id``, ``name`` and ``type`` once (first usable value); note repeats and conflicts.

    A sealed call is frozen (rule 4): a late fragment may repeat its identity, never complete or
    change it (a name arriving after an invalid, nameless call was sealed is noted, not written).
    """
    if call.status != "open":
        _frozen_identity(call, frag, anomalies)
        return
    fid = frag.id
    if fid is not None:
        if call.id is None:
            call.id = fid
        elif fid == call.id:
            _note(
                anomalies,
                AnomalyCode.ID_REPEATED,
                "id repeated on a later fragment",
                call.choice,
                call.index,
                frag,
            )
        elif frag.new_id:
            call.id = fid
        else:
            _note(
                anomalies,
                AnomalyCode.ID_CONFLICT,
                f"a later fragment carried id {fid!r}; kept {call.id!r}",
                call.choice,
                call.index,
                frag,
            )
    name = frag.name
    if name is not None:
        current = call.name
        if current is None:
            call.name = name
        elif name == current:
            _note(
                anomalies,
                AnomalyCode.NAME_REPEATED,
                "name repeated on a later fragment",
                call.choice,
                call.index,
                frag,
            )
        elif call.status == "open" and call.chars == 0:
            # Before any argument text, a different name can only be more of the same name: a
            # resend with more text (replace) or the next piece (append), as in Continue's
            # report of Gemini sending "edit_ex" + "isting_file". The tool check still applies.
            call.name = name if name.startswith(current) else current + name
            _note(
                anomalies,
                AnomalyCode.NAME_FRAGMENTED,
                f"name arrived in pieces: {current!r} + {name!r} read as {call.name!r}",
                call.choice,
                call.index,
                frag,
            )
        else:
            _note(
                anomalies,
                AnomalyCode.NAME_CONFLICT,
                f"a later fragment carried name {name!r}; kept {current!r}",
                call.choice,
                call.index,
                frag,
            )
    ftype = frag.type
    if call.type is None:
        if ftype:
            if ftype == "null":
                _note(
                    anomalies,
                    AnomalyCode.NULL_STRING_FIELD,
                    'type was the string "null"',
                    call.choice,
                    call.index,
                    frag,
                )
            else:
                call.type = ftype
                if ftype != "function":
                    _note(
                        anomalies,
                        AnomalyCode.TYPE_UNEXPECTED,
                        f"type was {ftype!r}",
                        call.choice,
                        call.index,
                        frag,
                    )
        elif call.metrics.fragments == 0:
            _note(
                anomalies,
                AnomalyCode.TYPE_UNEXPECTED,
                "the call's first fragment had no type",
                call.choice,
                call.index,
                frag,
            )
    elif ftype == call.type:
        _note(
            anomalies,
            AnomalyCode.TYPE_REPEATED,
            "type repeated on a later fragment",
            call.choice,
            call.index,
            frag,
        )
    elif ftype == "":
        _note(
            anomalies,
            AnomalyCode.EMPTY_STRING_FIELD,
            "type was an empty string",
            call.choice,
            call.index,
            frag,
        )
    elif ftype == "null":
        _note(
            anomalies,
            AnomalyCode.NULL_STRING_FIELD,
            'type was the string "null"',
            call.choice,
            call.index,
            frag,
        )
    elif ftype is not None:
        _note(
            anomalies,
            AnomalyCode.TYPE_UNEXPECTED,
            f"a later fragment carried type {ftype!r}; kept {call.type!r}",
            call.choice,
            call.index,
            frag,
        )
    if frag.extra:
        call.extra.update(frag.extra)


def _frozen_identity(call: ToolCall, frag: ToolFragment, anomalies: list[Anomaly]) -> None:
    if frag.id is not None and frag.id != call.id:
        _note(
            anomalies,
            AnomalyCode.ID_CONFLICT,
            f"a fragment after the call was sealed carried id {frag.id!r}; kept {call.id!r}",
            call.choice,
            call.index,
            frag,
        )
    if frag.name is not None and frag.name != call.name:
        _note(
            anomalies,
            AnomalyCode.NAME_CONFLICT,
            f"a fragment after the call was sealed carried name {frag.name!r}; kept {call.name!r}",
            call.choice,
            call.index,
            frag,
        )


def _object_start_breaks(call: ToolCall) -> bool:
    """True when a ``{`` appended to the call's text so far could not be part of valid JSON.

    ``{`` may follow only inside a string or where a value is expected (after ``:``, ``[``, or a
    ``,`` inside an array). Anywhere else (after ``{``, a key, a value, a ``,`` in an object, the
    closed top-level value) the text is certainly broken if read as a plain continuation.
    """
    scanner = call.scanner
    if scanner.error is not None or scanner.complete:
        return True
    if scanner.in_string:
        return False
    tail = call.arguments.rstrip()
    if not tail:
        return False
    last = tail[-1]
    return not (last in ":[" or (last == "," and scanner.in_array))


def argument_text(call: ToolCall, frag: ToolFragment, anomalies: list[Anomaly]) -> tuple[str | None, bool]:
    """The text to add to ``call`` and whether it replaces the existing text.

    Cumulative resends (Q17: each fragment repeats all the text so far, then some) are detected
    by a chain: while every fragment starts with the previous one, the call *may* be cumulative.
    The switch happens only when reading the fragment as a plain continuation could not be valid
    JSON (:func:`_object_start_breaks`), so a standard stream is never misread, however its text
    happens to be cut (``{"`` then ``{": 1}`` is the key ``"{"``). Until then fragments are
    appended as usual; at the switch the call's text is replaced by the latest full text, and from
    then on only what each fragment adds is appended.

    A sealed call never changes: an exact resend of its text is dropped (noted), anything else is
    handed on, and the accumulator refuses it as a late fragment.
    """
    text = frag.arguments
    if not text:
        return None, False
    if call.status != "open":
        if _is_resend(call, text):
            _note(
                anomalies,
                AnomalyCode.ARGUMENTS_CUMULATIVE,
                "the complete arguments were resent after the call was sealed; dropped",
                call.choice,
                call.index,
                frag,
            )
            return None, False
        return text, False
    table = frag.table
    if frag.replace:
        if table is not None:
            table.chains.pop(call.slot, None)
        if _is_resend(call, text):
            return None, False
        return text, True
    if table is None:
        return text, False
    chains = table.chains
    chain = chains.get(call.slot)
    if chain is None:
        if call.chars == 0:
            chains[call.slot] = _Chain(text)
        return text, False
    last = chain.last
    if chain.latched:
        if len(text) >= len(last) and text.startswith(last):
            chain.last = text
            return text[len(last) :] or None, False
        if last.startswith(text):
            return None, False  # a shorter resend: nothing new
        del chains[call.slot]  # the provider stopped resending: plain pieces from here on
        return text, False
    if len(text) < len(last) or not text.startswith(last) or not text.lstrip().startswith("{"):
        del chains[call.slot]  # a standard stream: stop checking this call
        return text, False
    if not _object_start_breaks(call):
        chain.last = text  # still ambiguous: read as a plain piece for now
        return text, False
    chain.latched = True
    chain.last = text
    _note(
        anomalies,
        AnomalyCode.ARGUMENTS_CUMULATIVE,
        "fragment repeated the arguments so far; only the new text was kept",
        call.choice,
        call.index,
        frag,
    )
    if call.chars == len(last):
        return text[len(last) :] or None, False
    # Earlier resends were appended while still ambiguous: start over from the full text.
    return text, True
