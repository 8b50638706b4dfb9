"""Reading one raw chunk into canonical pieces: pure, and where every provider quirk of shape lives.

A raw chunk (the SDK's ``ChatCompletionChunk``, or a plain ``dict`` as decoded from SSE) is read
into the envelope (:class:`Envelope`), one :class:`ChoicePiece` per choice, and one
:class:`ToolFragment` per ``delta.tool_calls`` entry. Which call a fragment belongs to is decided
later, by the router (``_route.py``); this module knows nothing of calls and changes nothing.

Rules enforced here (numbers refer to ``DESIGN.md``):

* **Written once, cleaned** (Q07-Q10, Q13, Q37). ``""``, ``null`` and ``"null"`` count as absent; an
  integer id becomes a string. An ``index`` is a non-negative integer; a plain ASCII decimal string
  of at most 9 digits (``"0"``) or an integral float is read as one (noted); anything else (``-1``,
  ``"²"``, ``"①"``, a 5,000-digit string, a bool) is unusable and read as missing (noted).
* **Arguments are text** (Q18, Q19). A JSON object is serialised once (noted); a value that is not
  JSON (a set, NaN, a non-string key, nesting beyond ``Limits.max_depth``) makes the fragment's
  call ``invalid`` (``frag.error``); ``null`` adds nothing.
* **Empty is not missing is not {}** (3). ``""``, ``null`` and a missing key add nothing.
* **Every tolerance is visible** (8). Each repair appends an :class:`Anomaly`; the accumulator
  attaches it to the call and the stream.
* **Fail closed** (9). A part of a chunk that cannot be read at all (an exception while reading a
  choice's delta or one tool-call entry) is recorded, and its choice is marked ``damaged``: the
  accumulator refuses that choice's open calls, since a fragment of theirs may be lost. The rest of
  the chunk (other choices, the ``finish_reason``) is still read.

Nothing here keeps chunk objects or copies them: it reads fields and moves on (rule 7).
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel

from ..errors import InBandError, MalformedChunk
from ._anomaly import Anomaly, AnomalyCode

__all__ = [
    "REASONING_FIELDS",
    "ChoicePiece",
    "Envelope",
    "InBandError",
    "ToolFragment",
    "read_chunk",
    "show",
]

_TOOL_CALL_KEYS = frozenset({"index", "id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})
_DELTA_KEYS = frozenset({"role", "content", "refusal", "tool_calls", "function_call"})
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
_MAX_INDEX = 2**31
"""Indexes at or above this are unusable: no real stream has that many calls or choices."""
_MAX_INDEX_DIGITS = 9
MAX_IDENTITY = 1024
"""Characters of an id or function name beyond which it is unusable (OpenAI allows 64 for a name)."""
_MAX_LABEL = 64
"""Characters of a ``type``, ``role`` or ``finish_reason`` beyond which it is read as absent."""


def show(value: Any, limit: int = 60) -> str:
    """A short, safe description of a hostile value for a message (never raises, never huge)."""
    try:
        if type(value) is int and not -(10**limit) < value < 10**limit:
            return f"<an integer of {value.bit_length()} bits>"
        if type(value) is str and len(value) > limit:
            return repr(value[:limit]) + f"… ({len(value)} characters)"
        text = repr(value)
    except Exception:
        return f"<a {type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "…"


def read_index(value: Any) -> tuple[int | None, str | None]:
    """``(index, note)``: a usable index (None when unusable), and what was repaired or refused."""
    kind = type(value)
    if kind is int:
        if 0 <= value < _MAX_INDEX:
            return value, None
        return None, f"unusable index {show(value)}"
    if kind is str:
        if 0 < len(value) <= _MAX_INDEX_DIGITS and value.isascii() and value.isdigit():
            return int(value), "index was a string"
        return None, f"unusable index {show(value)}"
    if kind is float and math.isfinite(value) and value.is_integer() and 0 <= value < _MAX_INDEX:
        return int(value), "index was a float"
    return None, f"unusable index {show(value)}"


def _fields(obj: Any) -> dict[str, Any] | None:
    """The known fields of a JSON object as a dict: the dict itself, or an SDK (pydantic) model's
    ``__dict__`` (where pydantic keeps them); None when ``obj`` is not an object.

    Reading fields from this dict, rather than with ``getattr`` per field, is what keeps reading
    cheap per chunk (rule 7).
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


def _opt_str(value: Any) -> str | None:
    return value if type(value) is str and value else None


def _opt_int(value: Any) -> int | None:
    return value if type(value) is int and 0 <= value < 2**63 else None


class Envelope:
    """Chunk-level fields, read once per chunk. A field of the wrong type reads as absent."""

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
        self.id = _opt_str(get("id"))
        self.object = _opt_str(get("object"))
        self.created = _opt_int(get("created"))
        self.model = _opt_str(get("model"))
        self.system_fingerprint = _opt_str(get("system_fingerprint"))
        self.service_tier = _opt_str(get("service_tier"))
        usage = get("usage")
        self.usage = usage if usage is None or isinstance(usage, (dict, BaseModel)) else None
        self.extra = _extras(chunk, _ENVELOPE_KEYS)


class ToolFragment:
    """One ``delta.tool_calls`` entry, cleaned: ``id``/``name`` None unless usable."""

    __slots__ = (
        "anomalies",
        "arguments",
        "call",
        "error",
        "extra",
        "further",
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
        self.error: str | None = None
        """Why the fragment's arguments cannot be used (a value that is not JSON): refuses its call."""
        self.extra: dict[str, Any] | None = None
        self.raw: Any = None
        self.new_id = False
        """Set by the router when ``id`` replaces the call's id (Q15)."""
        self.further = False
        """Set by the router: a further JSON value for a call whose value was complete (Mistral)."""
        self.table: Any = None
        """Set by the router: the call table of the fragment's choice."""
        self.call: Any = None
        """Set by the accumulator: the call this fragment touched (refused if the chunk fails)."""


class ChoicePiece:
    """One ``choices[]`` entry of a chunk, cleaned."""

    __slots__ = (
        "content",
        "damaged",
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
        self.damaged = False
        """A part of this choice could not be read: its open calls may have lost a fragment."""


def _clean_str(value: Any, what: str, anomalies: list[Anomaly], raw: Any) -> str | None:
    """A usable non-empty string, or None. ``"null"`` counts as absent; integers become strings."""
    if value is None:
        return None
    if type(value) is str:
        if value == "":
            anomalies.append(Anomaly(AnomalyCode.EMPTY_STRING_FIELD, f"{what} was an empty string", raw=raw))
            return None
        if value == "null":
            anomalies.append(Anomaly(AnomalyCode.NULL_STRING_FIELD, f'{what} was the string "null"', raw=raw))
            return None
        if len(value) > MAX_IDENTITY:
            # No real id or function name is this long; keeping it would let identity fields grow
            # memory past every limit. Unusable: a nameless call is refused, an id is synthesized.
            anomalies.append(
                Anomaly(
                    AnomalyCode.MALFORMED_CHUNK, f"{what} of {len(value)} characters is unusable", raw=raw
                )
            )
            return None
        return value
    if what == "id" and type(value) is int and -(10**40) < value < 10**40:
        anomalies.append(Anomaly(AnomalyCode.ID_NOT_STRING, "id was an integer", raw=raw))
        return str(value)
    anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, f"{what} was a {type(value).__name__}", raw=raw))
    return None


def json_text(value: Any, max_depth: int) -> tuple[str | None, str | None]:
    """``(text, None)`` for a JSON value sent as an object, or ``(None, why)`` when it is not JSON.

    Only what JSON can hold is accepted (objects with string keys, arrays, strings, finite numbers,
    booleans, null), nested at most ``max_depth`` deep: ``json.dumps`` alone would turn a non-string
    key or NaN into text that says something else, or fail deep inside.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return None, f"arguments hold {item!r}, which JSON cannot express"
            continue
        if depth > max_depth:
            return None, f"arguments are nested deeper than {max_depth} levels"
        if kind is dict:
            for key, inner in item.items():
                if type(key) is not str:
                    return None, f"arguments hold a key of type {type(key).__name__}, not a string"
                stack.append((inner, depth + 1))
        elif kind is list:
            stack.extend((inner, depth + 1) for inner in item)
        else:
            return None, f"arguments hold a {kind.__name__}, which is not a JSON value"
    return json.dumps(value, ensure_ascii=False, allow_nan=False), None


def _read_tool_fragment(entry: Any, chunk_anomalies: list[Anomaly], max_depth: int) -> ToolFragment | None:
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
        frag.index, note = read_index(index)
        if note is not None:
            anomalies.append(Anomaly(AnomalyCode.NON_INTEGER_INDEX, note, raw=entry))
    raw_id = fields.get("id")
    if raw_id is not None:
        frag.id = _clean_str(raw_id, "id", anomalies, entry)
    ftype = fields.get("type")
    if ftype is not None:
        if type(ftype) is str and len(ftype) <= _MAX_LABEL:
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
                frag.arguments, frag.error = json_text(arguments, max_depth)
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


def read_chunk(
    chunk: Any, anomalies: list[Anomaly], max_depth: int = 64
) -> tuple[Envelope, list[ChoicePiece]]:
    """Read one raw chunk. Repairs append to ``anomalies``; only an unusable chunk raises.

    Raises :class:`MalformedChunk` (not an object) or :class:`InBandError` (an ``error`` field).
    """
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
        if type(index) is not int or not 0 <= index < _MAX_INDEX:
            anomalies.append(
                Anomaly(AnomalyCode.MALFORMED_CHUNK, f"choice index {show(index)} read as 0", raw=raw)
            )
            index = 0
        piece = ChoicePiece(index)
        finish = cfields.get("finish_reason")
        if finish is not None:
            if type(finish) is not str or len(finish) > _MAX_LABEL:
                anomalies.append(
                    Anomaly(
                        AnomalyCode.MALFORMED_CHUNK,
                        f"finish_reason was {show(finish)}; read as not finished",
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
                try:
                    _read_delta(delta, dfields, piece, anomalies, max_depth)
                except Exception as exc:  # fail closed: the choice may have lost a fragment
                    piece.damaged = True
                    anomalies.append(
                        Anomaly(
                            AnomalyCode.INTERNAL_ERROR,
                            f"a delta could not be read ({type(exc).__name__}: {show(str(exc), 200)}); "
                            "the open calls of its choice were refused",
                            index,
                            raw=raw,
                        )
                    )
        pieces.append(piece)
    return envelope, pieces


def _text(value: Any, what: str, anomalies: list[Anomaly]) -> str | None:
    if value is None or type(value) is str:
        return value
    anomalies.append(
        Anomaly(AnomalyCode.MALFORMED_CHUNK, f"{what} was a {type(value).__name__}; skipped", raw=value)
    )
    return None


def _read_delta(
    delta: Any, fields: dict[str, Any], piece: ChoicePiece, anomalies: list[Anomaly], max_depth: int
) -> None:
    get = fields.get
    role = get("role")
    if role is None or (type(role) is str and len(role) <= _MAX_LABEL):
        piece.role = role
    else:
        anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, f"role was {show(role)}; skipped"))
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
                try:
                    frag = _read_tool_fragment(entry, anomalies, max_depth)
                except Exception as exc:  # one unreadable entry: its call may have lost text
                    piece.damaged = True
                    anomalies.append(
                        Anomaly(
                            AnomalyCode.INTERNAL_ERROR,
                            f"a tool-call entry could not be read ({type(exc).__name__}); "
                            "the open calls of its choice were refused",
                            piece.index,
                            raw=entry,
                        )
                    )
                    continue
                if frag is not None:
                    frags.append(frag)
            piece.tool_fragments = frags
    function_call = get("function_call")
    if function_call is not None and not tool_calls:
        frag = _read_legacy_function_call(function_call)
        if frag is not None:
            piece.tool_fragments = [frag]
