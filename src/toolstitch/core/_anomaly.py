"""What a provider did that the OpenAI reference stream does not do.

Rule 8 of docs/design.md: every tolerance is visible. Each repair made while reading or routing a
chunk (and each surprise noticed by the accumulator) becomes one :class:`Anomaly` with a stable
``code``, recorded on the call it concerns and on the stream, so users can see what their provider
does instead of discovering it in a 400 three turns later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["NOTES", "Anomaly", "AnomalyCode", "note", "show"]


class AnomalyCode:
    """The stable anomaly codes. Values are plain strings so they serialise and compare trivially."""

    MALFORMED_CHUNK = "malformed_chunk"
    """A chunk (or part of it) had the wrong shape; the unusable part was skipped."""
    CHUNK_AFTER_END = "chunk_after_end"
    """A chunk was fed after the accumulator was ended; it was ignored."""
    REPLAYED_CHUNK = "replayed_chunk"
    """A chunk with an already-seen sequence number (a transport replay) was dropped."""
    IN_BAND_ERROR = "in_band_error"
    """A chunk carried an ``error`` field (an in-band error event); the stream was ended with it."""
    INTERNAL_ERROR = "internal_error"
    """toolstitch failed on part of a chunk; the calls that chunk touched were refused
    (``InternalFault``), the rest of the chunk was still read, and the user's stream kept flowing."""

    MISSING_INDEX = "missing_index"
    """A tool-call fragment had no (or a null) ``index``; its call was found by id or position."""
    NON_INTEGER_INDEX = "non_integer_index"
    """A tool-call ``index`` was not a non-negative integer (``"0"``, ``-1``, ``1.0``)."""
    INDEX_NOT_FROM_ZERO = "index_not_from_zero"
    """The first tool-call index of a choice was not 0 (Anthropic's compatible endpoint starts at 1)."""
    INDEX_GAP = "index_gap"
    """A new tool-call index skipped one or more numbers."""
    INDEX_REUSED = "index_reused"
    """A new call arrived at an index that already belongs to another call."""
    INDEX_CHANGED = "index_changed"
    """A fragment with no id and no name arrived at a new index while the latest call's arguments
    were mid-value; it was read as that call's continuation (Nebius, Cerebras)."""
    EMPTY_TOOL_CALL = "empty_tool_call"
    """A tool-call entry carrying nothing (no id, name, arguments or extra fields) would have opened
    a call; it was ignored, so no nameless, argument-less call reaches the history."""
    ID_REPEATED = "id_repeated"
    """The call's id was sent again on a later fragment (ignored, never appended)."""
    ID_CONFLICT = "id_conflict"
    """A later fragment carried a different id for the same call; the first id was kept."""
    ID_CHANGED = "id_changed"
    """A call's id changed while its arguments were still streaming; the later id was kept
    (Poolside sends its canonical id from the second chunk on)."""
    ID_NOT_STRING = "id_not_string"
    """The call id was not a string (an integer); it was converted."""
    ID_SYNTHESIZED = "id_synthesized"
    """The provider never sent a usable id; a stable, unique one was made so the history stays valid."""
    NAME_REPEATED = "name_repeated"
    """The function name was sent again on a later fragment (ignored, never appended)."""
    NAME_CONFLICT = "name_conflict"
    """A later fragment carried a different name for the same call; the first name was kept."""
    NAME_FRAGMENTED = "name_fragmented"
    """The function name arrived in pieces (or resent with more text) before any argument text;
    the pieces were joined."""
    EMPTY_STRING_FIELD = "empty_string_field"
    """``id``, ``function.name`` or ``type`` was an empty string; it was read as absent."""
    TYPE_REPEATED = "type_repeated"
    """``type`` was sent again on a later fragment (ignored, never appended)."""
    NULL_STRING_FIELD = "null_string_field"
    """A field carried the string ``"null"``; it was read as absent."""
    TYPE_UNEXPECTED = "type_unexpected"
    """``type`` was missing, empty or not ``"function"`` on a call's first fragment."""
    ARGUMENTS_OBJECT = "arguments_object"
    """``arguments`` arrived as a JSON object instead of a string; it was serialised once."""
    ARGUMENTS_NOT_STRING = "arguments_not_string"
    """``arguments`` arrived as something other than a string or object; it was skipped."""
    ARGUMENTS_CUMULATIVE = "arguments_cumulative"
    """A fragment repeated all argument text so far plus more; only the new part was appended."""
    EMPTY_ARGUMENTS_AS_OBJECT = "empty_arguments_as_object"
    """An explicit policy read ``""`` arguments as ``{}``."""
    FINISH_REASON_STOP_WITH_TOOL_CALLS = "finish_reason_stop_with_tool_calls"
    """A choice carrying tool calls finished with another reason than ``tool_calls`` (``stop``)."""
    FINISH_REASON_LENGTH = "finish_reason_length"
    """A choice carrying tool calls was cut by the token limit: none of its calls may run."""
    FINISH_REASON_REPEATED = "finish_reason_repeated"
    """A choice received a second ``finish_reason``."""
    FINISH_REASON_EMPTY = "finish_reason_empty"
    """``finish_reason`` was an empty string (SGLang sends it on every chunk); read as not finished."""
    FRAGMENT_AFTER_FINISH = "fragment_after_finish"
    """Content or a tool-call fragment arrived after the choice's ``finish_reason``."""
    FINISH_REASON_MISSING = "finish_reason_missing"
    """A choice with tool calls never got a finish_reason while another choice did; it was sealed."""
    ROLE_REPEATED = "role_repeated"
    """``role`` was sent again on a later delta."""
    EMPTY_CHOICES = "empty_choices"
    """A chunk had an empty ``choices`` list and no usage (Azure's prompt-filter preamble, keep-alives)."""
    USAGE_REPEATED = "usage_repeated"
    """Usage arrived on more than one chunk; the last one was kept."""
    CALL_ID_REUSED = "call_id_reused"
    """Two calls of one message carried the same id; the later one got a synthesized id."""
    LEGACY_FUNCTION_CALL = "legacy_function_call"
    """A legacy ``delta.function_call`` fragment was read as tool call 0."""
    TOOL_CALL_IN_CONTENT = "tool_call_in_content"
    """A tool call written as text inside ``content`` was recovered (opt-in)."""
    FURTHER_VALUE = "further_json_value"
    """At an index whose arguments already formed a complete JSON value, another value arrived with
    no new id and no name (hosted Mistral). It stays one call, holding the concatenated text, and is
    refused: the later value contradicts the first, and neither can be trusted alone."""
    EMPTY_ARGUMENTS_NO_PARAMETERS = "empty_arguments_no_parameters"
    """``""`` arguments for a tool whose schema declares no properties were read as ``{}``."""
    CONTRACT_VIOLATION = "contract_violation"
    """A call broke the request's ``tool_choice`` or ``parallel_tool_calls``; it was refused."""
    LIMIT_EXCEEDED = "limit_exceeded"
    """A :class:`~toolstitch.Limits` bound was reached; what lay beyond it was counted, not kept."""
    TOO_DEEP = "too_deep"
    """An unknown provider field was nested deeper than ``Limits.max_depth``; it was dropped."""

    # The Responses API (``core/_responses.py``): items and events instead of chunks and choices.
    UNKNOWN_ITEM = "unknown_item"
    """A Responses event named an item id that no ``response.output_item.added`` announced (or named
    none): its text was not given to any call; a call that later claims that id is refused."""
    ITEM_REPEATED = "item_repeated"
    """``response.output_item.added`` announced an item id already open; the call was refused."""
    ITEM_NOT_DONE = "item_not_done"
    """A ``function_call`` item's ``response.output_item.done`` never arrived, or arrived with a
    status other than ``completed``: its call was left ``incomplete``."""
    ARGUMENTS_MISMATCH = "arguments_mismatch"
    """The arguments (or name, or call id) in ``.done``, ``response.output_item.done`` or the final
    response differ from what the deltas said: the call was refused."""
    ARGUMENTS_WITHOUT_DELTAS = "arguments_without_deltas"
    """No argument delta arrived for an item; its whole text was read from the ``.done`` event, the
    ``response.output_item.done`` item or the final response."""
    RESPONSE_NOT_COMPLETED = "response_not_completed"
    """The response ended ``incomplete`` or ``failed``, with an ``error`` event, or without any
    final event: no call of it can run."""
    SEQUENCE_NOT_INCREASING = "sequence_not_increasing"
    """A Responses event's ``sequence_number`` was not above the previous one's (kept and read)."""
    OUTPUT_MISSING = "output_missing"
    """The final response carried no ``output``; it was built from the ``response.output_item.done``
    items."""
    ITEM_STATUS_MISSING = "item_status_missing"
    """A ``function_call`` item's ``response.output_item.done`` carried no ``status`` (``null``:
    vLLM's gpt-oss); the response's own ``status`` decides (sealed only if it completed)."""
    ITEM_NOT_STREAMED = "item_not_streamed"
    """A ``function_call`` item appeared only in the final response (never streamed); it was read
    from there, held to the same checks."""
    GRAMMAR_UNCHECKED = "grammar_unchecked"
    """A custom tool call's input was not checked against the tool's grammar: the grammar does not
    compile (a regex with lookaround or backreferences, as Rust refuses them), a ``lark`` grammar
    without llguidance installed, or a bound of the engine or of a check's time was reached. The
    call was refused, unless its format is marked with ``ts.trust_grammar`` (then it is let
    through, with this anomaly)."""

    # A call refused at its seal records one anomaly whose code is its error's ``code``
    # (``toolstitch.errors``): the refusal is on the record with the rest of what the stream did.
    MALFORMED_ARGUMENTS = "malformed_arguments"
    """A call was refused: its text is not valid JSON, or a fragment of it could not be read."""
    ARGUMENTS_NOT_AN_OBJECT = "arguments_not_an_object"
    """A call was refused: its arguments are JSON, but not an object."""
    EMPTY_ARGUMENTS = "empty_arguments"
    """A call was refused: no argument text arrived (``""``), for a tool that takes arguments."""
    MISSING_NAME = "missing_name"
    """A call was refused: it was sealed without a usable name."""
    UNKNOWN_TOOL = "unknown_tool"
    """A call was refused: the request did not offer its tool (or offered it as the other kind)."""
    SCHEMA_VIOLATION = "schema_violation"
    """A call was refused: its arguments do not fit the tool's schema, or its input the tool's format."""


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One observed deviation from the reference stream, and what toolstitch did about it.

    ``raw`` is the offending fragment as it arrived (a dict or value), kept for diagnosis.
    ``call_index`` is the tool call's ``index`` (``None`` when the anomaly concerns the chunk or choice).
    """

    code: str
    message: str
    choice: int | None = None
    call_index: int | None = None
    raw: Any = None


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


NOTES: dict[str, tuple[str, str]] = {
    "index_changed": (
        AnomalyCode.INDEX_CHANGED,
        "a fragment without id or name arrived at new index {new} while call {index} was mid-value; "
        "read as its continuation",
    ),
    "empty_indexed": (
        AnomalyCode.EMPTY_TOOL_CALL,
        "an empty tool-call entry at new index {index} was ignored",
    ),
    "not_from_zero": (AnomalyCode.INDEX_NOT_FROM_ZERO, "the first tool call has index {index}"),
    "gap": (AnomalyCode.INDEX_GAP, "index jumped from {before} to {index}"),
    "reused_id": (
        AnomalyCode.INDEX_REUSED,
        "a new id {new} arrived at index {index}, which belongs to {old}",
    ),
    "reused_name": (
        AnomalyCode.INDEX_REUSED,
        "a new name {new} arrived at index {index} after {old} was complete",
    ),
    "reused_value": (
        AnomalyCode.INDEX_REUSED,
        "a new call (name {new}) with a new JSON value started at index {index} after that call's "
        "arguments were complete",
    ),
    "further_value": (
        AnomalyCode.FURTHER_VALUE,
        "a further JSON value without id or name arrived at index {index} after that call's arguments "
        "were complete; kept as one call holding both, which is refused",
    ),
    "new_by_id": (AnomalyCode.MISSING_INDEX, "tool call without index; opened by its new id"),
    "new_after_complete": (
        AnomalyCode.MISSING_INDEX,
        "tool call without index; its id's call was complete and a new JSON value started: opened a new call",
    ),
    "by_id": (AnomalyCode.MISSING_INDEX, "tool call without index; continued the call with its id"),
    "empty_unindexed": (AnomalyCode.EMPTY_TOOL_CALL, "an empty tool-call entry without index was ignored"),
    "opened": (AnomalyCode.MISSING_INDEX, "tool call without index or id; opened a call"),
    "opened_new": (AnomalyCode.MISSING_INDEX, "tool call without index or id; opened a new call"),
    "continued": (AnomalyCode.MISSING_INDEX, "tool call without index or id; continued the latest call"),
    "cumulative": (
        AnomalyCode.ARGUMENTS_CUMULATIVE,
        "fragment repeated the arguments so far; only the new text was kept",
    ),
    # The owner's (``_owner.py``): what a fragment said of a call that could not be written.
    "id_repeated": (AnomalyCode.ID_REPEATED, "id repeated on a later fragment"),
    "id_conflict": (AnomalyCode.ID_CONFLICT, "a later fragment carried id {new}; kept {old}"),
    "id_changed": (
        AnomalyCode.ID_CHANGED,
        "the id changed from {old} to {new} mid-arguments; kept the later one",
    ),
    "name_repeated": (AnomalyCode.NAME_REPEATED, "name repeated on a later fragment"),
    "name_fragmented": (
        AnomalyCode.NAME_FRAGMENTED,
        "name arrived in pieces: {old} + {new} read as {joined}",
    ),
    "name_conflict": (AnomalyCode.NAME_CONFLICT, "a later fragment carried name {new}; kept {old}"),
    "type_null": (AnomalyCode.NULL_STRING_FIELD, 'type was the string "null"'),
    "type_unexpected": (AnomalyCode.TYPE_UNEXPECTED, "type was {new}"),
    "type_missing": (AnomalyCode.TYPE_UNEXPECTED, "the call's first fragment had no type"),
    "type_repeated": (AnomalyCode.TYPE_REPEATED, "type repeated on a later fragment"),
    "type_empty": (AnomalyCode.EMPTY_STRING_FIELD, "type was an empty string"),
    "type_conflict": (AnomalyCode.TYPE_UNEXPECTED, "a later fragment carried type {new}; kept {old}"),
    "sealed_id": (
        AnomalyCode.ID_CONFLICT,
        "a fragment after the call was sealed carried id {new}; kept {old}",
    ),
    "sealed_name": (
        AnomalyCode.NAME_CONFLICT,
        "a fragment after the call was sealed carried name {new}; kept {old}",
    ),
    "sealed_resend": (
        AnomalyCode.ARGUMENTS_CUMULATIVE,
        "the complete arguments were resent after the call was sealed; dropped",
    ),
    "after_statement": (
        AnomalyCode.ARGUMENTS_MISMATCH,
        "argument text arrived after the call's whole text was stated",
    ),
    "late_text": (
        AnomalyCode.FRAGMENT_AFTER_FINISH,
        "argument text arrived for a sealed call; the call was refused",
    ),
}
"""Every repair or surprise noted about a call while a fragment is routed (``_route.py``) or
written (``_owner.py``): key -> (code, message template), so that each message is written once."""


def note(notes: list[Anomaly], what: str, choice: int, index: int, raw: Any, /, **values: Any) -> None:
    """Note ``what`` (a key of :data:`NOTES`) for the call at (choice, index). Values are shown with
    :func:`show` (bounded, never raising), so a hostile id or name cannot make a message huge or
    fail."""
    code, template = NOTES[what]
    message = template.format(**{k: show(v) for k, v in values.items()}) if values else template
    notes.append(Anomaly(code, message, choice, index, raw))
