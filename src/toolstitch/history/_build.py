"""Builders: the assistant turn and the tool messages to append to the history.

``assistant_message`` shapes the assistant turn for a dialect; ``tool_message``/``tool_messages``
answer its calls; ``call_error_text`` is the error result for a call that never ran. Everything
here keeps the ``arguments`` text exactly as received.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

import pydantic

from ..errors import CallNotReadyError, ChoiceNotFoundError, UnusableMessageError
from ._common import _MISSING, Message, _plain, _tool_dict
from ._dialects import Dialect, get_dialect
from ._refusals import call_refusal_text

if TYPE_CHECKING:
    # What the builders return, for type checkers: the SDK's own param types, so their messages go
    # into a ``list[ChatCompletionMessageParam]`` as the SDK's own would. At run time they are
    # plain dicts (``Message``); a dialect may add its server's keys, which a TypedDict allows.
    from openai.types.chat import ChatCompletionAssistantMessageParam as AssistantMessage
    from openai.types.chat import ChatCompletionToolMessageParam as ToolMessage

#: Fields of the SDK's ``ChatCompletionMessage``; anything else on a message came from a provider.
_SDK_MESSAGE_FIELDS = frozenset(
    {"role", "content", "refusal", "annotations", "audio", "function_call", "tool_calls", "name"}
)
_SDK_CALL_FIELDS = frozenset({"id", "type", "function", "custom", "index"})


# ------------------------------------------------------------------------------ builders


class ToolCallLike(Protocol):
    """What :func:`tool_message` reads from a :class:`~toolstitch.ToolCall`."""

    @property
    def id(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> BaseException | None: ...


def _resolve_message(source: Any, choice: int) -> Any:
    """The assistant message inside a stream, a completion, or a message (model or dict).

    A choice is picked by its ``index``, never by its position: a completion whose only choice has
    index 1 has no choice 0, and answering with choice 1's message would put another choice's
    calls in the history. A choice without a usable ``index`` counts at its position.
    """
    final = getattr(source, "get_final_completion", None)
    if callable(final):
        source = final()
    choices = source.get("choices") if isinstance(source, Mapping) else getattr(source, "choices", None)
    if choices is None:
        return source
    if not isinstance(choices, list | tuple):
        raise UnusableMessageError(f"choices is a {type(choices).__name__}, not a list")
    by_index: dict[int, Any] = {}
    for position, ch in enumerate(choices):
        index = ch.get("index") if isinstance(ch, Mapping) else getattr(ch, "index", None)
        key = index if isinstance(index, int) and not isinstance(index, bool) else position
        by_index.setdefault(key, ch)
    if choice not in by_index:
        raise ChoiceNotFoundError(choice, sorted(by_index))
    picked = by_index[choice]
    message = picked.get("message") if isinstance(picked, Mapping) else getattr(picked, "message", None)
    if message is None:
        raise UnusableMessageError(f"choice {choice} has no message")
    return message


def _provider_fields(data: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in known and v is not None}


def _shape_call(call: Mapping[str, Any], d: Dialect) -> dict[str, Any]:
    call_id = call.get("id")
    if isinstance(call_id, str) and call_id:
        call_id = d.normalize_id(call_id)
    kind = call.get("type") or ("custom" if "custom" in call else "function")
    out: dict[str, Any] = {"id": call_id, "type": kind}
    if kind == "custom":
        custom = _mapping(call.get("custom"))
        out["custom"] = {"name": custom.get("name"), "input": custom.get("input")}
    else:
        fn = _mapping(call.get("function"))
        function = _name_and_arguments(fn)
        if d.keep_provider_fields:
            function.update(_provider_fields(fn, frozenset({"name", "arguments"})))
        out["function"] = function
    if d.keep_provider_fields:
        out.update(_provider_fields(call, _SDK_CALL_FIELDS))
    return out


def _name_and_arguments(function: Mapping[str, Any]) -> dict[str, Any]:
    """A ``function`` (of a tool call, or a legacy ``function_call``) as sent back: its name and
    its ``arguments`` text exactly as received."""
    return {"name": function.get("name"), "arguments": function.get("arguments")}


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else ``{}``: a hostile ``function`` (a string, a number)
    reads as missing, and the validator reports the call, rather than the builder raising."""
    return value if isinstance(value, Mapping) else {}


def _call_order(position_call: tuple[int, Any]) -> int:
    """A call's ``index`` when it carries one (some providers keep it in the final message),
    else its position: the list order of a ``ChatCompletion`` is already index order."""
    position, call = position_call
    index = call.get("index") if isinstance(call, Mapping) else None
    return index if isinstance(index, int) and not isinstance(index, bool) else position


def assistant_message(source: Any, *, choice: int = 0, dialect: str | Dialect = "openai") -> AssistantMessage:
    """The assistant turn to append to the history, as a ``ChatCompletionAssistantMessageParam``.

    ``source`` is a ``ChatCompletion``, a ``ChatCompletionMessage``, a stream (anything with
    ``get_final_completion()``), or the same as plain dicts; ``choice`` picks the choice by its
    ``index`` when there are several.

    * ``tool_calls`` in index order, each with ``id``, ``type`` and the function ``name`` and raw
      ``arguments`` text exactly as received (never parsed and re-serialised);
    * ``content`` is the text, or, with tool calls and no text, the dialect's empty content
      (``None``; ``""`` for vLLM, llama.cpp and Ollama); without tool calls it is never ``None``;
    * ``refusal`` is kept; ids are rewritten where the dialect requires (Mistral's 9 characters,
      Anthropic's pattern, OpenAI's 40), deterministically, so :func:`tool_message` agrees;
    * provider fields (``reasoning_content``, ``reasoning``, Gemini's ``extra_content``) are kept,
      except for Mistral, whose schema rejects them. They are copied without recursion, so a
      provider field nested hundreds of levels deep is kept, not a crash.

    Raises :class:`~toolstitch.errors.ChoiceNotFoundError` when the completion has no choice with
    that ``index`` (a ``ValueError``), :class:`~toolstitch.errors.UnusableMessageError` for a
    message of another role, and ``TypeError`` for something that is no message at all.
    """
    d = get_dialect(dialect)
    data = _plain(_resolve_message(source, choice))
    if not isinstance(data, Mapping):
        raise TypeError(f"expected a completion, a stream or a message, got {type(source).__name__}")
    if data.get("role", "assistant") != "assistant":
        raise UnusableMessageError(f"expected an assistant message, got role {data.get('role')!r}")
    raw_calls = data.get("tool_calls")
    raw_calls = raw_calls if isinstance(raw_calls, list) else []
    ordered = sorted(enumerate(raw_calls), key=_call_order)
    calls = [_shape_call(c, d) for _, c in ordered if isinstance(c, Mapping)]
    content = data.get("content")
    out: Message = {"role": "assistant"}
    if calls:
        out["content"] = d.empty_content if content is None or content == "" else content
    else:
        out["content"] = "" if content is None else content
    for key in ("refusal", "name"):
        if data.get(key) is not None and d.strict_keys is None:
            out[key] = data[key]
    audio = data.get("audio")
    if isinstance(audio, Mapping) and audio.get("id") and d.strict_keys is None:
        out["audio"] = {"id": audio["id"]}
    function_call = data.get("function_call")
    if isinstance(function_call, Mapping) and d.strict_keys is None:
        out["function_call"] = _name_and_arguments(function_call)
    if calls:
        out["tool_calls"] = calls
    if d.keep_provider_fields:
        out.update(_provider_fields(data, _SDK_MESSAGE_FIELDS))
    return cast("AssistantMessage", out)


def _call_facts(call: Any) -> tuple[Any, str | None, str | None, BaseException | None]:
    """``(id, name, status, error)`` of a ToolCall, an SDK tool call, or a dict. SDK objects and
    dicts come from a finished completion, so they have no status (``None``)."""
    if isinstance(call, pydantic.BaseModel | Mapping):
        data = _plain(call)
        body = _mapping(data.get("function") or data.get("custom"))
        name = body.get("name")
        return data.get("id"), name if isinstance(name, str) else None, None, None
    status = getattr(call, "status", None)
    error = getattr(call, "error", None)
    return (
        getattr(call, "id", None),
        getattr(call, "name", None),
        status if isinstance(status, str) else None,
        error if isinstance(error, BaseException) else None,
    )


def call_error_text(call: ToolCallLike | Any) -> str:
    """What to tell the model about a call that was not executed (``invalid`` or ``incomplete``).

    Use it as the error result: ``tool_message(call, error=call_error_text(call))``. The text names
    the call, says why it was refused and what to do instead, fitting the refusal: a tool that does
    not exist (and the ones that do), a call the request's ``tool_choice`` or
    ``parallel_tool_calls=False`` did not allow, arguments the schema refused (each problem), text
    that is not one JSON object, a call cut off. The words are ``ts.run``'s own
    (``history/_refusals.py``), so a call is answered the same way in your loop and in ``ts.run``.
    """
    call_id, name, status, error = _call_facts(call)
    if status in (None, "ready") and error is None:
        raise ValueError(f"tool call {call_id!r} is ready; it has no error to report")
    return call_refusal_text(name, status, error, getattr(call, "type", None) == "custom")


def _error_text(error: str | BaseException, call: Any) -> str:
    if isinstance(error, str):
        return error
    if error is _call_facts(call)[3]:
        return call_error_text(call)
    return f"Error: {type(error).__name__}: {error}" if str(error) else f"Error: {type(error).__name__}"


def _json_default(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(
        f"tool result of type {type(value).__name__} is not JSON-serialisable; pass a str or a JSON value"
    )


def _result_text(result: Any) -> str:
    """A tool result as tool-message content: a ``str`` as is; anything else as compact JSON.

    The JSON is deterministic and small: ``separators=(",", ":")`` (no padding tokens),
    ``ensure_ascii=False`` (text stays readable and short), keys in the caller's order (order can
    carry meaning; sorting would change what the model reads), and no ``NaN``/``Infinity``, which
    are not JSON. Pydantic models and dataclasses are dumped first.
    """
    if isinstance(result, str):
        return result
    try:
        return json.dumps(
            result, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_json_default
        )
    except RecursionError:  # json's encoder recurses: a result nested past the stack is refused
        raise ValueError(
            "tool result is nested too deeply to send as JSON; return a flatter value or a str"
        ) from None


def tool_message(
    call: ToolCallLike | Any,
    result: Any = _MISSING,
    *,
    error: str | BaseException | None = None,
    dialect: str | Dialect = "openai",
) -> ToolMessage:
    """The tool message answering ``call``, as a ``ChatCompletionToolMessageParam``.

    ``call`` is a :class:`~toolstitch.ToolCall`, an SDK tool call, or a tool-call dict.
    ``result`` is a ``str`` (sent as is) or any JSON value (sent as compact JSON, see
    :func:`_result_text`). An exception as ``result``, or ``error=``, makes an error result: a
    ``str`` is sent as is, an exception as ``"Error: <type>: <text>"``, and the call's own
    ``call.error`` as :func:`call_error_text`.

    A call that is not ``ready`` never ran, so it has no result: without an error result this
    raises :class:`CallNotReadyError`. With one, the model learns what was wrong::

        msgs.append(tool_message(call, error=call_error_text(call)))
    """
    d = get_dialect(dialect)
    facts = _call_facts(call)
    content = _answer_text(call, facts, result, error, _TOOL_MESSAGE_WORDS)
    return cast("ToolMessage", _tool_dict(d.normalize_id(facts[0]), content, facts[1], d))


class _AnswerWords(NamedTuple):
    """How a builder of answers names itself, a call, the call's id field and the answer, in the
    errors of :func:`_answer_text`: each API's caller reads its own words."""

    builder: str
    noun: str
    id_key: str
    answer: str


_TOOL_MESSAGE_WORDS = _AnswerWords("tool_message", "tool call", "id", "tool message")


def _answer_text(
    call: Any,
    facts: tuple[Any, str | None, str | None, BaseException | None],
    result: object,
    error: str | BaseException | None,
    words: _AnswerWords,
) -> str:
    """The text answering ``call`` (``facts``: its id, name, status and error): ``result`` as
    :func:`_result_text` sends it, or the error result as :func:`_error_text` does.

    One check for the answers of both APIs (``tool_message``, the Responses API's
    ``function_call_output``): a result or an error, never both; an exception as the result is an
    error result; a call without an id cannot be answered; and a call that is not ``ready`` never
    ran, so it has no result.
    """
    builder, noun, id_key, answer = words
    call_id, name, status, _ = facts
    if result is not _MISSING and error is not None:
        raise TypeError(f"{builder}() takes a result or error=, not both")
    if isinstance(result, BaseException):
        error, result = result, _MISSING
    if result is _MISSING and error is None:
        raise TypeError(f"{builder}() needs a result, or error= for a call that failed")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"{noun} {name!r} has no {id_key}, so no {answer} can answer it")
    if error is None and status not in (None, "ready"):
        raise CallNotReadyError(
            f"{noun} {call_id!r} ({name!r}) is {status!r}, so it was not executed and has no "
            f"result; answer it with {builder}(call, error=call_error_text(call))",
            call=call,
            status=str(status),
        )
    return _error_text(error, call) if error is not None else _result_text(result)


def result_message(result: Any, dialect: str | Dialect = "openai") -> ToolMessage:
    """The tool message for an executed result (a ``ToolResult`` of ``Toolbox.execute``, or anything
    with ``.call``, ``.ok`` and ``.content``), read from those fields as calls are read, so that
    history never calls back into the tools layer. ``content`` is the value's text when ``ok``,
    else the error the model is told.

    Built from the call's id and name only: the call's stream status does not matter here, since
    the gate (not the stream's check against the published schema) decided whether it ran.
    """
    call_id, name, _, _ = _call_facts(result.call)
    answered = {"id": call_id, "type": "function", "function": {"name": name}}
    if result.ok is True:
        return tool_message(answered, result.content, dialect=dialect)
    return tool_message(answered, error=result.content, dialect=dialect)


def _is_result(item: Any) -> bool:
    return all(hasattr(item, field) for field in ("call", "ok", "content"))


def tool_messages(
    items: Iterable[tuple[ToolCallLike | Any, Any] | Any], *, dialect: str | Dialect = "openai"
) -> list[ToolMessage]:
    """One tool message per item: a ``(call, result)`` pair, or a result of ``Toolbox.execute``
    (anything with ``.call``, ``.ok`` and ``.content``: see :func:`result_message`; an object with
    ``.call`` and its own ``.to_message(dialect)`` still works). An exception as a result (as
    ``asyncio.gather(..., return_exceptions=True)`` gives) is an error result.

    The messages come in the calls' index order when every call carries one (toolstitch
    ``ToolCall``), because servers whose templates pair results by position need that (H05); else
    in the given order.
    """
    entries = [(_call_of(item), item) for item in items]
    if entries and all(isinstance(getattr(c, "index", None), int) for c, _ in entries):
        entries.sort(key=lambda e: tuple(getattr(e[0], k, 0) for k in ("choice", "index", "slot")))
    out: list[ToolMessage] = []
    for call, item in entries:
        if isinstance(item, tuple):
            out.append(tool_message(call, item[1], dialect=dialect))
        elif _is_result(item):
            out.append(result_message(item, dialect))
        else:
            out.append(item.to_message(dialect))
    return out


def _call_of(item: Any) -> Any:
    """The call an item answers: the first of a pair, or the ``.call`` of an executed result."""
    if isinstance(item, tuple):
        if len(item) != 2:
            raise TypeError("tool_messages() takes (call, result) pairs or executed results")
        return item[0]
    if _is_result(item) or (callable(getattr(item, "to_message", None)) and hasattr(item, "call")):
        return item.call
    raise TypeError(
        f"tool_messages() takes (call, result) pairs or executed results, got {type(item).__name__}"
    )
