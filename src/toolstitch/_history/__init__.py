"""History turns the next request accepts: builders, an offline validator, and explicit repair.

After a tool call, the next request must carry the assistant message with its ``tool_calls`` and
one ``tool`` message per call. A history that breaks the server's rules earns a 400 on every later
request, because the broken turn stays in the saved history. The rules enforced here (ids from
``research/history-rules.md``; the table with their dialects is in :mod:`toolstitch._dialects`):

* H01-H04  a ``tool`` message answers a call declared by the assistant message directly before its
  run of tool messages; every declared call is answered before the next non-tool message.
* H05      results come in declared order (an error where templates pair results by position).
* H06/H07  ``tool_call_id`` present and unique.
* H08-H13  assistant content, non-empty ``tool_calls``, string ``arguments``, ``type``/``id``/
  ``function`` present, id length, function-name pattern.
* H18-H20  tool content is text; legacy ``function`` messages; message ``name`` pattern.
* dialect rules: Azure's ``content`` key (H23), Anthropic's id pattern and empty content (H29, H32),
  Mistral's 9-character ids, role order and strict schema (H35-H39, H70), Gemini's names and
  thought signatures (H45-H47), DeepSeek's ``reasoning_content`` (H62), local servers' JSON
  arguments and non-null content (H73, H82, H84). Request-level rules (H14-H17, H30, H31, H34) are
  checked by :func:`validate_request`.

Three promises hold everywhere in this module: the ``arguments`` text is never re-serialised or
changed; the input is never mutated; every repair is reported.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import pydantic

from .._dialects import RULES, Dialect, Severity, get_dialect
from .._errors import ToolstitchError

__all__ = [
    "NOT_EXECUTED",
    "CallNotReadyError",
    "HistoryError",
    "HistoryProblem",
    "RepairChange",
    "RepairReport",
    "assistant_message",
    "call_error_text",
    "ensure_valid_history",
    "repair_history",
    "tool_message",
    "tool_messages",
    "validate_history",
    "validate_request",
]

Message = dict[str, Any]
Action = Literal["dropped", "moved", "reordered", "inserted", "rewrote_id", "fixed"]

#: The content of the tool message :func:`repair_history` inserts for a call that has no result.
NOT_EXECUTED = "Error: not executed. No result was recorded for this tool call; do not assume it ran."

_MISSING: Any = object()
_ROLES_WITH_NAME = frozenset({"system", "developer", "user", "assistant"})
_NAME = re.compile(r"[a-zA-Z0-9_-]+")
_GEMINI_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.\-]{0,63}")
#: Fields of the SDK's ``ChatCompletionMessage``; anything else on a message came from a provider.
_SDK_MESSAGE_FIELDS = frozenset(
    {"role", "content", "refusal", "annotations", "audio", "function_call", "tool_calls", "name"}
)
_SDK_CALL_FIELDS = frozenset({"id", "type", "function", "custom", "index"})


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class HistoryProblem:
    """One rule a history breaks.

    ``index`` is the message's position in the list (``None`` for a request-level problem such as
    ``tools``); ``rule`` the rule id (``"H03"``); ``severity`` ``"error"`` (the server would reject
    the request, or silently answer the wrong call) or ``"warning"`` (accepted today but fragile);
    ``message`` says what is wrong and quotes ``server_error``, the text the server answers with,
    when one is known; ``param`` is the offending field in the server's notation.
    """

    index: int | None
    rule: str
    severity: Severity
    message: str
    server_error: str | None = None
    param: str | None = None

    def __str__(self) -> str:
        where = "-" if self.index is None else str(self.index)
        return f"#{where} {self.rule} {self.severity}: {self.message}"


class HistoryError(ToolstitchError):
    """The history would be rejected; ``problems`` lists every problem found (warnings too)."""

    def __init__(self, problems: Sequence[HistoryProblem]) -> None:
        self.problems = list(problems)
        errors = sum(p.severity == "error" for p in self.problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"invalid history: {errors} error(s)\n{lines}")


class CallNotReadyError(ToolstitchError):
    """A tool message was asked for a call that must not have been executed.

    A call that is ``invalid``, ``incomplete`` or still ``open`` never ran, so it has no result.
    Answer it with an explicit error instead: ``tool_message(call, error=call_error_text(call))``.
    """

    def __init__(self, message: str, *, call: Any, status: str) -> None:
        super().__init__(message)
        self.call = call
        self.status = status


@dataclass(frozen=True)
class RepairChange:
    """One change :func:`repair_history` made. ``index`` is the message's position in the input
    (``None`` for an inserted message), ``new_index`` in the output (``None`` when dropped)."""

    action: Action
    rule: str
    index: int | None
    new_index: int | None
    detail: str

    def __str__(self) -> str:
        old = "new" if self.index is None else f"#{self.index}"
        new = "dropped" if self.new_index is None else f"#{self.new_index}"
        return f"{old} -> {new} {self.rule} {self.action}: {self.detail}"


@dataclass(frozen=True)
class RepairReport:
    """Every change made, and the problems left that repair cannot fix without inventing facts
    (bad function names or arguments, Mistral's role order, ...)."""

    changes: tuple[RepairChange, ...] = ()
    remaining: tuple[HistoryProblem, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def ok(self) -> bool:
        """True when the repaired history has no errors left (warnings may remain)."""
        return not any(p.severity == "error" for p in self.remaining)

    def __str__(self) -> str:
        lines = [str(c) for c in self.changes] or ["no changes"]
        lines += [f"remaining: {p}" for p in self.remaining]
        return "\n".join(lines)


# ------------------------------------------------------------------------- reading input


def _plain(value: Any) -> Any:
    """Plain JSON-like data from dicts, lists and SDK models, dumped the way the SDK sends them."""
    if isinstance(value, pydantic.BaseModel):
        exclude = getattr(value, "__api_exclude__", None)
        return value.model_dump(mode="json", exclude_unset=True, exclude=exclude, warnings=False)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def _json_type(value: Any) -> str:
    """A value's type in the words OpenAI's validator uses ("an object", "null", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return "a string" if isinstance(value, str) else f"a {type(value).__name__}"


def _tool_calls(message: Mapping[str, Any]) -> list[Any]:
    """The message's tool calls when it is an assistant message with a non-empty list, else []."""
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    return calls if isinstance(calls, list) else []


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
    """The assistant message inside a stream, a completion, or a message (model or dict)."""
    final = getattr(source, "get_final_completion", None)
    if callable(final):
        source = final()
    choices = source.get("choices") if isinstance(source, Mapping) else getattr(source, "choices", None)
    if choices is None:
        return source
    by_index: dict[int, Any] = {}
    for position, ch in enumerate(choices):
        index = ch.get("index") if isinstance(ch, Mapping) else getattr(ch, "index", None)
        by_index.setdefault(index if isinstance(index, int) else position, ch)
    if choice not in by_index:
        raise ValueError(f"the completion has no choice {choice} (choices: {sorted(by_index)})")
    picked = by_index[choice]
    return picked.get("message") if isinstance(picked, Mapping) else picked.message


def _provider_fields(data: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in known and v is not None}


def _shape_call(call: Mapping[str, Any], d: Dialect) -> dict[str, Any]:
    call_id = call.get("id")
    if isinstance(call_id, str) and call_id:
        call_id = d.normalize_id(call_id)
    kind = call.get("type") or ("custom" if "custom" in call else "function")
    out: dict[str, Any] = {"id": call_id, "type": kind}
    if kind == "custom":
        custom = call.get("custom") or {}
        out["custom"] = {"name": custom.get("name"), "input": custom.get("input")}
    else:
        fn = call.get("function") or {}
        function = {"name": fn.get("name"), "arguments": fn.get("arguments")}
        if d.keep_provider_fields:
            function.update(_provider_fields(fn, frozenset({"name", "arguments"})))
        out["function"] = function
    if d.keep_provider_fields:
        out.update(_provider_fields(call, _SDK_CALL_FIELDS))
    return out


def _call_order(position_call: tuple[int, Any]) -> int:
    """A call's ``index`` when it carries one (some providers keep it in the final message),
    else its position: the list order of a ``ChatCompletion`` is already index order."""
    position, call = position_call
    index = call.get("index") if isinstance(call, Mapping) else None
    return index if isinstance(index, int) and not isinstance(index, bool) else position


def assistant_message(source: Any, *, choice: int = 0, dialect: str | Dialect = "openai") -> Message:
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
      except for Mistral, whose schema rejects them.
    """
    d = get_dialect(dialect)
    data = _plain(_resolve_message(source, choice))
    if not isinstance(data, Mapping):
        raise TypeError(f"expected a completion, a stream or a message, got {type(source).__name__}")
    if data.get("role", "assistant") != "assistant":
        raise ValueError(f"expected an assistant message, got role {data.get('role')!r}")
    raw_calls = data.get("tool_calls") or []
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
        out["function_call"] = {
            "name": function_call.get("name"),
            "arguments": function_call.get("arguments"),
        }
    if calls:
        out["tool_calls"] = calls
    if d.keep_provider_fields:
        out.update(_provider_fields(data, _SDK_MESSAGE_FIELDS))
    return out


def _call_facts(call: Any) -> tuple[Any, str | None, str | None, BaseException | None]:
    """``(id, name, status, error)`` of a ToolCall, an SDK tool call, or a dict. SDK objects and
    dicts come from a finished completion, so they have no status (``None``)."""
    if isinstance(call, pydantic.BaseModel | Mapping):
        data = _plain(call)
        body = data.get("function") or data.get("custom") or {}
        return data.get("id"), body.get("name"), None, None
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
    the call and says why it was refused, so the model can send a corrected call.
    """
    call_id, name, status, error = _call_facts(call)
    if status in (None, "ready") and error is None:
        raise ValueError(f"tool call {call_id!r} is ready; it has no error to report")
    what = f"the call to {name!r}" if name else "this tool call"
    reason = getattr(error, "message", None) or (str(error) if error is not None else "")
    if status == "invalid":
        return (
            f"Error: {what} was not executed because its arguments were rejected: {reason}. "
            "Send the call again with arguments that are one valid JSON object."
        )
    detail = f" ({reason})" if reason else ""
    return (
        f"Error: {what} was not executed because the response ended before the call was "
        f"complete{detail}. Send the call again if it is still needed."
    )


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
    return json.dumps(
        result, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_json_default
    )


def _tool_dict(call_id: str, content: str, name: str | None, d: Dialect) -> Message:
    out: Message = {"role": "tool", "tool_call_id": call_id, "content": content}
    if d.tool_message_name and name:
        out["name"] = name
    return out


def tool_message(
    call: ToolCallLike | Any,
    result: Any = _MISSING,
    *,
    error: str | BaseException | None = None,
    dialect: str | Dialect = "openai",
) -> Message:
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
    call_id, name, status, _ = _call_facts(call)
    if result is not _MISSING and error is not None:
        raise TypeError("tool_message() takes a result or error=, not both")
    if isinstance(result, BaseException):
        result, error = _MISSING, result
    if result is _MISSING and error is None:
        raise TypeError("tool_message() needs a result, or error= for a call that failed")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"tool call {name!r} has no id, so no tool message can answer it")
    if error is None and status not in (None, "ready"):
        raise CallNotReadyError(
            f"tool call {call_id!r} ({name!r}) is {status!r}, so it was not executed and has no "
            "result; answer it with tool_message(call, error=call_error_text(call))",
            call=call,
            status=str(status),
        )
    content = _error_text(error, call) if error is not None else _result_text(result)
    return _tool_dict(d.normalize_id(call_id), content, name, d)


def tool_messages(
    items: Iterable[tuple[ToolCallLike | Any, Any] | Any], *, dialect: str | Dialect = "openai"
) -> list[Message]:
    """One tool message per item: a ``(call, result)`` pair, or a result of ``Toolbox.execute``
    (anything with ``.call`` and ``.to_message(dialect)``). An exception as a result (as
    ``asyncio.gather(..., return_exceptions=True)`` gives) is an error result.

    The messages come in the calls' index order when every call carries one (toolstitch
    ``ToolCall``), because servers whose templates pair results by position need that (H05); else
    in the given order.
    """
    entries = [(_call_of(item), item) for item in items]
    if entries and all(isinstance(getattr(c, "index", None), int) for c, _ in entries):
        entries.sort(key=lambda e: tuple(getattr(e[0], k, 0) for k in ("choice", "index", "slot")))
    out: list[Message] = []
    for call, item in entries:
        if isinstance(item, tuple):
            out.append(tool_message(call, item[1], dialect=dialect))
        else:
            out.append(item.to_message(dialect))
    return out


def _call_of(item: Any) -> Any:
    """The call an item answers: the first of a pair, or the ``.call`` of an executed result."""
    if isinstance(item, tuple):
        if len(item) != 2:
            raise TypeError("tool_messages() takes (call, result) pairs or executed results")
        return item[0]
    if callable(getattr(item, "to_message", None)) and hasattr(item, "call"):
        return item.call
    raise TypeError(
        f"tool_messages() takes (call, result) pairs or executed results, got {type(item).__name__}"
    )


# ----------------------------------------------------------------------------- validator


@dataclass
class _Block:
    """An assistant message with tool_calls and the results its contiguous tool run gives."""

    index: int
    declared: list[str]
    answered: dict[str, int] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)


class _Checker:
    """Runs every rule of one dialect over one history, collecting problems in order."""

    def __init__(self, d: Dialect) -> None:
        self.d = d
        self.problems: list[HistoryProblem] = []

    def add(
        self,
        index: int | None,
        rule_id: str,
        what: str,
        *,
        variant: str = "",
        param: str | None = None,
        escalate: bool = False,
        **fields: Any,
    ) -> None:
        rule = RULES[rule_id]
        severity = rule.severity(self.d.name)
        if severity is None:
            return
        if escalate:
            severity = "error"
        text = rule.server_text(self.d.name, variant, **{"index": index, "param": param, **fields})
        if text is None:
            message = what
        elif severity == "error":
            message = f'{what}. {self.d.label} rejects it: "{text}"'
        else:
            message = f'{what}. Servers that enforce this answer: "{text}"'
        self.problems.append(HistoryProblem(index, rule_id, severity, message, text, param))

    # -- one message at a time --------------------------------------------------------------

    def message(self, i: int, m: Any, last: int) -> None:
        if not isinstance(m, Mapping):
            self.add(i, "H00", f"entry is {_json_type(m)}, not a message object")
            return
        role = m.get("role")
        if not isinstance(role, str) or role not in self.d.roles:
            known = ", ".join(sorted(self.d.roles))
            self.add(i, "H00", f"role {role!r} is not one of {known}", param=f"messages[{i}].role")
            return
        name = m.get("name")
        if role in _ROLES_WITH_NAME and name is not None and not _is_name(name):
            what = f"name {name!r} has characters outside a-z A-Z 0-9 _ -"
            self.add(i, "H20", what, param=f"messages[{i}].name")
        if role == "function" and not isinstance(name, str):
            self.add(i, "H19", "a function message has no name", param=f"messages[{i}].name")
        if m.get("function_call") is not None and role != "assistant":
            self.add(i, "H19", f"a {role} message carries function_call", variant="function_call")
        if isinstance(m.get("content"), Mapping):
            self.add(i, "H18", "content is an object", got="an object")
        self.strict_keys(i, role, m, "")
        if role == "assistant":
            self.assistant(i, m, last)
        elif role == "tool":
            self.tool(i, m)
        elif role in ("user", "system", "developer") and m.get("content") == "":
            self.add(i, "H32", f"{role} content is an empty string")

    def strict_keys(self, i: int, kind: str, data: Mapping[str, Any], where: str) -> None:
        allowed = (self.d.strict_keys or {}).get(kind)
        if allowed is None:
            return
        role = "assistant" if kind in ("tool_call", "function") else kind
        for key in data:
            if key not in allowed:
                self.add(
                    i,
                    "H70",
                    f"field {where}{key!r} is not accepted by {self.d.label}",
                    role=role,
                    key=f"{where}{key}",
                )

    def assistant(self, i: int, m: Mapping[str, Any], last: int) -> None:
        calls = m.get("tool_calls")
        has_calls = False
        if calls is not None:
            if not isinstance(calls, list):
                self.add(i, "H09", f"tool_calls is {_json_type(calls)}", variant="not_list")
            elif not calls:
                self.add(i, "H09", "tool_calls is an empty list; omit the key instead")
            else:
                has_calls = True
                self.calls(i, calls)
        content = m.get("content", _MISSING)
        if has_calls:
            if content is _MISSING:
                self.add(i, "H23", "an assistant message with tool_calls has no content key")
            elif content is None:
                what = "assistant content is null; this server needs '' instead"
                self.add(i, "H82", what)
                self.add(i, "H84", what)
            elif content == "":
                what = "assistant content is '' next to tool_calls; use null"
                self.add(i, "H32", what, variant="tool_calls")
        elif m.get("function_call") is None:
            if content is _MISSING or content is None:
                what = "an assistant message without tool_calls has no content"
                self.add(i, "H08", what, param=f"messages[{i}].content")
                self.add(i, "H39", what)
            elif content == "":
                self.add(i, "H39", "an assistant message has neither content nor tool_calls")
                if i != last:
                    self.add(i, "H32", "assistant content is an empty string")
        if isinstance(content, list):
            self.parts(i, "assistant", content, frozenset({"text", "refusal"}))

    def calls(self, i: int, calls: list[Any]) -> None:
        seen: set[str] = set()
        for k, call in enumerate(calls):
            p = f"messages[{i}].tool_calls[{k}]"
            if not isinstance(call, Mapping):
                self.add(i, "H11", f"tool call {k} is {_json_type(call)}", variant="bad_type")
                continue
            self.strict_keys(i, "tool_call", call, f"tool_calls[{k}].")
            kind = call.get("type")
            if kind is None:
                self.add(i, "H11", f"tool call {k} has no type", param=f"{p}.type")
            elif kind not in ("function", "custom"):
                self.add(i, "H11", f"tool call {k} has type {kind!r}", variant="bad_type")
            self.call_id(i, k, call.get("id"), seen)
            if kind == "custom":
                body, name_key, text_key = call.get("custom"), "name", "input"
            else:
                body, name_key, text_key = call.get("function"), "name", "arguments"
            part = "custom" if kind == "custom" else "function"
            if not isinstance(body, Mapping):
                self.add(i, "H11", f"tool call {k} has no {part}", param=f"{p}.{part}")
                continue
            if part == "function":
                self.strict_keys(i, "function", body, f"tool_calls[{k}].function.")
            name = body.get(name_key)
            if not isinstance(name, str) or not name:
                self.add(i, "H11", f"tool call {k} has no name", param=f"{p}.{part}.name")
            else:
                self.function_name(i, name, f"{p}.{part}.name")
            text = body.get(text_key, _MISSING)
            if text is _MISSING:
                self.add(i, "H11", f"tool call {k} has no {text_key}", param=f"{p}.{part}.{text_key}")
            elif not isinstance(text, str):
                got = _json_type(text)
                what = f"tool call {k}'s {text_key} is {got}, not a JSON string"
                self.add(i, "H10", what, param=f"{p}.{part}.{text_key}", position=k, got=got)
            elif part == "function" and text.strip() and not _is_json_object(text):
                self.add(i, "H73", f"tool call {k}'s arguments are not a JSON object: {text[:60]!r}")

    def call_id(self, i: int, k: int, call_id: Any, seen: set[str]) -> None:
        p = f"messages[{i}].tool_calls[{k}].id"
        if not isinstance(call_id, str) or not call_id:
            self.add(i, "H11", f"tool call {k} has no id", param=p, variant="id")
            return
        if call_id in seen:
            what = f"id {call_id!r} appears twice in one tool_calls list"
            self.add(i, "H06", what, variant="in_calls", id=call_id, position=k)
        seen.add(call_id)
        d = self.d
        if d.id_style == "openai" and len(call_id) > 40:
            over = len(call_id) > 64
            what = f"id {call_id[:24]!r}... is {len(call_id)} characters long"
            variant = "over_max" if over else ""
            self.add(i, "H12", what, param=p, length=len(call_id), variant=variant, escalate=over)
        elif d.id_style == "anthropic" and not d.id_ok(call_id):
            self.add(i, "H29", f"id {call_id!r} has characters outside a-z A-Z 0-9 _ -", position=k)
        elif d.id_style == "mistral" and not d.id_ok(call_id):
            self.add(i, "H35", f"id {call_id!r} is not 9 letters or digits", id=call_id)

    def function_name(self, i: int | None, name: str, param: str) -> None:
        if self.d.name == "gemini-compat":
            if not _GEMINI_NAME.fullmatch(name):
                self.add(i, "H47", f"function name {name!r} is not a valid Gemini name")
        elif len(name) > 64:
            what = f"function name {name[:20]!r}... is {len(name)} characters long"
            self.add(i, "H13", what, variant="too_long", param=param, length=len(name), name=name)
        elif not _NAME.fullmatch(name):
            what = f"function name {name!r} has characters outside a-z A-Z 0-9 _ -"
            self.add(i, "H13", what, param=param, name=name)

    def tool(self, i: int, m: Mapping[str, Any]) -> None:
        call_id = m.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            self.add(i, "H07", "a tool message has no tool_call_id", param=f"messages[{i}].tool_call_id")
        content = m.get("content", _MISSING)
        if content is _MISSING:
            self.add(i, "H18", "a tool message has no content", variant="missing")
        elif content is None:
            self.add(i, "H18", "tool content is null; send a string", got="null")
        elif isinstance(content, list):
            self.parts(i, "tool", content, frozenset({"text"}))
        elif not isinstance(content, str | Mapping):
            self.add(i, "H18", f"tool content is {_json_type(content)}", got=_json_type(content))

    def parts(self, i: int, role: str, parts: list[Any], allowed: frozenset[str]) -> None:
        for k, part in enumerate(parts):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind is None:
                self.add(i, "H18", f"content part {k} has no type", variant="untyped", position=k)
            elif kind == "image_url":
                what = f"a {role} message contains an image; send images in a user message"
                self.add(i, "H18", what, variant="image", role=role)
            elif kind not in allowed:
                what = f"content part {k} of a {role} message is {kind!r}"
                self.add(i, "H18", what, variant="part")

    # -- across messages --------------------------------------------------------------------

    def structure(self, msgs: list[Any]) -> None:
        """H01-H06: pair every tool message with the assistant call it answers."""
        block: _Block | None = None
        unanswered: dict[str, tuple[int, int, str]] = {}  # id -> (assistant, interloper, ids)
        reported: set[tuple[int, int]] = set()
        first_result: dict[str, int] = {}
        run_after: str | None = None  # role of the message before the current tool run
        prev_role: str | None = None
        for i, m in enumerate(msgs):
            role = m.get("role") if isinstance(m, Mapping) else None
            if role != "tool":
                if block is not None:
                    self.close(block, i, msgs, unanswered)
                calls = _tool_calls(m) if isinstance(m, Mapping) else []
                ids = [c.get("id") for c in calls if isinstance(c, Mapping)]
                block = _Block(i, [x for x in ids if isinstance(x, str) and x]) if calls else None
                prev_role = role
                continue
            if prev_role != "tool":
                run_after = prev_role
            prev_role = "tool"
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                continue
            if call_id in first_result:
                what = f"a second result for {call_id!r} (the first is #{first_result[call_id]})"
                self.add(i, "H06", what, id=call_id, first=first_result[call_id])
            else:
                first_result[call_id] = i
            if block is None:
                if call_id in unanswered:
                    self.interloper(i, call_id, unanswered, reported, msgs)
                variant = "after_call" if run_after in ("assistant", "tool") else ""
                what = f"tool message for {call_id!r} does not follow an assistant's tool_calls"
                self.add(
                    i,
                    "H01",
                    what,
                    variant=variant,
                    param=f"messages[{i}].role",
                    id=call_id,
                    prev_role=run_after,
                )
            elif call_id not in block.declared:
                if call_id in unanswered:
                    self.interloper(i, call_id, unanswered, reported, msgs)
                what = f"tool message answers {call_id!r}, which #{block.index} did not declare"
                self.add(i, "H02", what, id=call_id, param=f"messages[{i}].tool_call_id")
            elif call_id not in block.answered:
                block.answered[call_id] = i
                block.order.append(call_id)
        if block is not None:
            self.close(block, None, msgs, unanswered)

    def close(
        self,
        block: _Block,
        interloper: int | None,
        msgs: list[Any],
        unanswered: dict[str, tuple[int, int, str]],
    ) -> None:
        declared = list(dict.fromkeys(block.declared))
        missing = [x for x in declared if x not in block.answered]
        if missing:
            ids = ", ".join(missing)
            where = "the end of the list" if interloper is None else f"#{interloper}"
            what = f"no tool message answers {ids} before {where}"
            param = f"messages[{block.index}].role"
            self.add(block.index, "H03", what, ids=ids, at=block.index, param=param)
            if interloper is not None:
                for x in missing:
                    unanswered.setdefault(x, (block.index, interloper, ids))
        expected = [x for x in declared if x in block.answered]
        if block.order != expected:
            k = next(n for n, (a, b) in enumerate(zip(block.order, expected, strict=True)) if a != b)
            what = (
                f"results come in a different order from the calls: {block.order[k]!r} is "
                f"answered before {expected[k]!r}"
            )
            if self.d.pairs_by_position:
                what += f"; {self.d.label} pairs results with calls by position"
            self.add(block.answered[block.order[k]], "H05", what)

    def interloper(
        self,
        i: int,
        call_id: str,
        unanswered: dict[str, tuple[int, int, str]],
        reported: set[tuple[int, int]],
        msgs: list[Any],
    ) -> None:
        assistant, between, ids = unanswered[call_id]
        if (assistant, between) in reported:
            return
        reported.add((assistant, between))
        role = msgs[between].get("role") if isinstance(msgs[between], Mapping) else None
        what = (
            f"this {role} message sits between the tool_calls of #{assistant} and the result "
            f"for {call_id!r} at #{i}; results must directly follow their assistant message"
        )
        self.add(between, "H04", what, ids=ids, at=assistant, param=f"messages[{assistant}].role")

    def dialect_rules(self, msgs: list[Any]) -> None:
        """Rules that look at the whole list: role order, last role, echoed provider fields."""
        d = self.d
        views = [m if isinstance(m, Mapping) else {} for m in msgs]
        roles = [v.get("role") for v in views]
        for i, role in enumerate(roles):
            prev = roles[i - 1] if i else None
            if role == "user" and prev == "tool":
                self.add(i, "H37", "a user message directly follows a tool message")
            if _tool_calls(views[i]) and prev not in ("user", "tool"):
                what = f"a tool-call turn follows a {prev or 'missing'} message"
                self.add(i, "H45", what)
        if roles and roles[-1] not in ("user", "tool") and not views[-1].get("prefix"):
            what = f"the last message is a {roles[-1]} message, not a user or tool message"
            self.add(len(roles) - 1, "H38", what, role=roles[-1])
        if d.name == "gemini-compat" and any(_signed(v) for v in views):
            for i, v in enumerate(views):
                if _tool_calls(v) and not _signed(v):
                    what = "tool calls carry no thought signature (extra_content) while others do"
                    self.add(i, "H46", what)
        if d.name == "deepseek" and any(v.get("reasoning_content") is not None for v in views):
            for i, v in enumerate(views):
                if _tool_calls(v) and v.get("reasoning_content") is None:
                    what = "thinking mode: this tool-call turn lost its reasoning_content"
                    self.add(i, "H62", what)


def _signed(message: Mapping[str, Any]) -> bool:
    """True when one of the message's tool calls carries Gemini's ``extra_content``."""
    return any(isinstance(c, Mapping) and c.get("extra_content") for c in _tool_calls(message))


def _check(messages: Sequence[Any], d: Dialect) -> _Checker:
    checker = _Checker(d)
    msgs = [_plain(m) for m in messages]
    if not msgs:
        checker.add(None, "H00", "the messages list is empty", variant="empty", param="messages")
    for i, m in enumerate(msgs):
        checker.message(i, m, len(msgs) - 1)
    checker.structure(msgs)
    checker.dialect_rules(msgs)
    return checker


def _sorted(problems: list[HistoryProblem]) -> list[HistoryProblem]:
    return sorted(problems, key=lambda p: -1 if p.index is None else p.index)


def validate_history(messages: Sequence[Any], dialect: str | Dialect = "openai") -> list[HistoryProblem]:
    """Every problem the server of ``dialect`` would reject (errors) or that is fragile
    (warnings), ordered by message index; ``[]`` when the history is valid.

    ``messages`` holds dicts or the SDK's message models, as passed to ``create(messages=...)``.
    """
    return _sorted(_check(messages, get_dialect(dialect)).problems)


def validate_request(body: Mapping[str, Any], dialect: str | Dialect = "openai") -> list[HistoryProblem]:
    """:func:`validate_history` of ``body["messages"]`` plus the request-level rules on ``tools``,
    ``tool_choice``, ``parallel_tool_calls`` and ``n`` (H13-H17, H30, H31, H34).

    ``body`` is the keyword arguments of ``chat.completions.create`` (or a saved request body).
    Request-level problems have ``index=None``.
    """
    d = get_dialect(dialect)
    messages = body.get("messages")
    if isinstance(messages, list | tuple):
        checker = _check(messages, d)
    else:
        checker = _Checker(d)
        checker.add(None, "H00", f"messages is {_json_type(messages)}, not a list", param="messages")
    tools = body.get("tools")
    has_tools = isinstance(tools, list) and bool(tools)
    if isinstance(tools, list):
        _check_tools(checker, tools)
    for key in ("tool_choice", "parallel_tool_calls"):
        if body.get(key) is not None and not has_tools:
            what = f"{key} is set but the request has no tools"
            checker.add(None, "H17", what, variant=key, param=key, key=key)
    if isinstance(messages, list | tuple) and not has_tools:
        views = [_plain(m) for m in messages]
        if any(isinstance(m, Mapping) and (_tool_calls(m) or m.get("role") == "tool") for m in views):
            checker.add(None, "H31", "the history has tool calls but the request has no tools")
    if body.get("n") not in (None, 1):
        checker.add(None, "H34", f"n is {body.get('n')!r}; this server only produces one choice")
    return _sorted(checker.problems)


def _check_tools(checker: _Checker, tools: list[Any]) -> None:
    if not tools:
        checker.add(None, "H16", "tools is an empty list; omit the key instead", param="tools")
    if len(tools) > 128:
        checker.add(None, "H15", f"{len(tools)} tools", param="tools", length=len(tools))
    names: set[str] = set()
    for k, tool in enumerate(tools):
        data = _plain(tool)
        if not isinstance(data, Mapping):
            continue
        part = "custom" if data.get("type") == "custom" else "function"
        body = data.get(part)
        if not isinstance(body, Mapping):
            checker.add(None, "H11", f"tool {k} has no {part}", param=f"tools[{k}].{part}")
            continue
        name = body.get("name")
        if isinstance(name, str) and name:
            checker.function_name(None, name, f"tools[{k}].{part}.name")
            if name in names:
                checker.add(None, "H30", f"two tools are named {name!r}")
            names.add(name)
        description = body.get("description")
        if isinstance(description, str) and len(description) > 1024:
            param = f"tools[{k}].{part}.description"
            what = f"tool {name!r} has a {len(description)}-character description"
            checker.add(None, "H14", what, param=param, length=len(description))


def ensure_valid_history(messages: Sequence[Any], dialect: str | Dialect = "openai") -> None:
    """Raise :class:`HistoryError`, listing every problem, when the history has any error."""
    problems = validate_history(messages, dialect)
    if any(p.severity == "error" for p in problems):
        raise HistoryError(problems)


# --------------------------------------------------------------------------------- repair


@dataclass
class _Item:
    """A message being repaired: its copy, where it came from, and what happened to it."""

    msg: Any
    src: int | None
    out: int | None = None
    dropped: bool = False


@dataclass
class _Slot:
    """One declared call and the tool message assigned to answer it."""

    owner: _Item
    call: dict[str, Any]
    result: _Item | None = None


class _Repair:
    def __init__(self, messages: Sequence[Any], d: Dialect) -> None:
        self.d = d
        self.items = [_Item(copy.deepcopy(_plain(m)), i) for i, m in enumerate(messages)]
        self.log: list[tuple[Action, str, _Item, str]] = []
        self.slots: dict[int, list[_Slot]] = {}  # id(owner item) -> its slots

    def note(self, action: Action, rule: str, item: _Item, detail: str) -> None:
        self.log.append((action, rule, item, detail))

    def run(self) -> tuple[list[Message], RepairReport]:
        for item in self.items:
            if isinstance(item.msg, dict):
                self.fix_message(item)
        self.echo_reasoning()
        self.assign()
        self.rewrite_ids()
        out = self.rebuild()
        changes = tuple(
            RepairChange(action, rule, item.src, item.out, detail) for action, rule, item, detail in self.log
        )
        return out, RepairReport(changes, tuple(validate_history(out, self.d)))

    # -- one message ------------------------------------------------------------------------

    def fix_message(self, item: _Item) -> None:
        m: dict[str, Any] = item.msg
        role = m.get("role")
        d = self.d
        if d.strict_keys is not None and isinstance(role, str):
            self.drop_keys(item, m, d.strict_keys.get(role), "")
        if role != "assistant":
            return
        calls = m.get("tool_calls")
        if isinstance(calls, list) and not calls:
            del m["tool_calls"]
            self.note("fixed", "H09", item, "removed an empty tool_calls list")
        for k, call in enumerate(_tool_calls(m)):
            if not isinstance(call, dict):
                continue
            if d.strict_keys is not None:
                self.drop_keys(item, call, d.strict_keys.get("tool_call"), f"tool_calls[{k}].")
                if isinstance(call.get("function"), dict):
                    where = f"tool_calls[{k}].function."
                    self.drop_keys(item, call["function"], d.strict_keys.get("function"), where)
            if "type" not in call and isinstance(call.get("function"), dict):
                call["type"] = "function"
                self.note("fixed", "H11", item, f'added "type": "function" to tool call {k}')
        content = m.get("content", _MISSING)
        if _tool_calls(m):
            if content is _MISSING:
                m["content"] = d.empty_content
                self.note("fixed", "H23", item, f"added content {d.empty_content!r}")
            elif content is None and d.empty_content == "":
                m["content"] = ""
                self.note("fixed", "H82" if d.name != "ollama" else "H84", item, "content null -> ''")
            elif content == "" and d.name == "anthropic-compat":
                m["content"] = None
                self.note("fixed", "H32", item, "content '' -> null next to tool_calls")
        elif m.get("function_call") is None:
            empty = content is _MISSING or content is None
            empty_text = content == "" and (
                d.name == "mistral" or (d.name == "anthropic-compat" and item is not self.items[-1])
            )
            if (empty or empty_text) and not m.get("refusal"):
                item.dropped = True
                self.note(
                    "dropped",
                    "H39" if d.name == "mistral" else "H08",
                    item,
                    "an assistant message with neither content nor tool calls",
                )
            elif empty:
                m["content"] = ""
                self.note("fixed", "H08", item, "content null -> '' (the message has a refusal)")

    def drop_keys(
        self, item: _Item, data: dict[str, Any], allowed: frozenset[str] | None, where: str
    ) -> None:
        if allowed is None:
            return
        extra = [key for key in data if key not in allowed]
        for key in extra:
            del data[key]
        if extra:
            names = ", ".join(f"{where}{key}" for key in extra)
            self.note("fixed", "H70", item, f"removed fields {self.d.label} rejects: {names}")

    def echo_reasoning(self) -> None:
        """DeepSeek thinking mode: every tool-call turn must carry ``reasoning_content`` (H62).
        A turn that lost it gets ``""``, which DeepSeek accepts for a turn without reasoning."""
        live = [i for i in self.items if isinstance(i.msg, dict) and not i.dropped]
        if self.d.name != "deepseek" or not any(i.msg.get("reasoning_content") is not None for i in live):
            return
        for item in live:
            if _tool_calls(item.msg) and item.msg.get("reasoning_content") is None:
                item.msg["reasoning_content"] = ""
                self.note("fixed", "H62", item, "added reasoning_content ''")

    # -- pairing ----------------------------------------------------------------------------

    def assign(self) -> None:
        """Give each tool message the declared call it answers, or mark it dropped."""
        open_slots: dict[str, list[_Slot]] = {}
        current: _Item | None = None  # the assistant whose contiguous tool run we are in
        for item in self.items:
            m = item.msg
            if item.dropped:
                continue
            if not (isinstance(m, dict) and m.get("role") == "tool"):
                calls = [c for c in _tool_calls(m) if isinstance(c, dict)] if isinstance(m, dict) else []
                current = item if calls else None
                slots = self.slots[id(item)] = [_Slot(item, c) for c in calls]
                for slot in slots:
                    call_id = slot.call.get("id")
                    if isinstance(call_id, str) and call_id:
                        open_slots.setdefault(call_id, []).append(slot)
                continue
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                self.drop(item, "H07", "a tool message without tool_call_id")
                continue
            waiting = [s for s in open_slots.get(call_id, []) if s.result is None]
            here = [s for s in waiting if s.owner is current]
            if here:
                here[0].result = item
            elif waiting:
                waiting[-1].result = item
                owner = waiting[-1].owner.src
                self.note("moved", "H04", item, f"result for {call_id!r} moved after #{owner}")
            elif open_slots.get(call_id):
                self.drop(item, "H06", f"a second result for {call_id!r}")
            else:
                self.drop(item, "H01", f"a result for {call_id!r}, which no earlier call declared")

    def drop(self, item: _Item, rule: str, detail: str) -> None:
        item.dropped = True
        self.note("dropped", rule, item, detail)

    def rewrite_ids(self) -> None:
        """Ids the dialect rejects, missing ids and repeated ids get new ones, on both sides."""
        used: set[str] = set()
        d = self.d
        for item in self.items:
            for k, slot in enumerate(self.slots.get(id(item), [])):
                old = slot.call.get("id")
                new = d.normalize_id(old) if isinstance(old, str) and old else None
                rule = {"mistral": "H35", "anthropic": "H29"}.get(d.id_style, "H12")
                if new is None:
                    rule = "H11"
                elif new in used:
                    rule = "H06"
                if new is None or new in used:
                    new = d.fresh_id(f"{item.src}:{k}:{old}", used)
                used.add(new)
                if new == old:
                    continue
                slot.call["id"] = new
                if slot.result is not None:
                    slot.result.msg["tool_call_id"] = new
                self.note("rewrote_id", rule, item, f"tool call id {old!r} -> {new!r}")

    def rebuild(self) -> list[Message]:
        out: list[Any] = []
        for item in self.items:
            m = item.msg
            if item.dropped or (isinstance(m, dict) and m.get("role") == "tool"):
                continue
            item.out = len(out)
            out.append(m)
            slots = self.slots.get(id(item), [])
            results = [s.result for s in slots if s.result is not None]
            if [r.src for r in results] != sorted(r.src for r in results if r.src is not None):
                self.note("reordered", "H05", item, "tool results put in declared order")
            for slot in slots:
                if slot.result is None:
                    slot.result = _Item(self.not_executed(slot.call), None)
                    call_id = slot.call.get("id")
                    self.note("inserted", "H03", slot.result, f"'not executed' result for {call_id!r}")
                slot.result.out = len(out)
                out.append(slot.result.msg)
        return out

    def not_executed(self, call: Mapping[str, Any]) -> Message:
        body = call.get("function") or call.get("custom") or {}
        name = body.get("name") if isinstance(body, Mapping) else None
        return _tool_dict(str(call.get("id")), NOT_EXECUTED, name, self.d)


def repair_history(
    messages: Sequence[Any], dialect: str | Dialect = "openai"
) -> tuple[list[Message], RepairReport]:
    """A copy of ``messages`` with what can be fixed without inventing facts fixed, and a report.

    * tool results are moved directly after the assistant message that declared them, in declared
      order (H04, H05);
    * tool messages that answer nothing (orphans, second results, no ``tool_call_id``) are dropped
      (H01, H02, H06, H07);
    * a declared call with no result gets an explicit error result, :data:`NOT_EXECUTED` (H03);
    * ids the dialect rejects, and repeated or missing ids, are rewritten on the call and its result
      together (H06, H11, H12, H29, H35);
    * shape fixes: empty ``tool_calls`` removed (H09), ``type`` added (H11), content made what the
      dialect needs (H08, H23, H32, H82, H84), fields Mistral rejects removed (H70), empty
      ``reasoning_content`` for DeepSeek (H62); assistant messages with nothing in them dropped.

    Arguments, function names and results are never changed, and ``messages`` is never mutated.
    What cannot be fixed stays, listed in ``report.remaining``.
    """
    d = get_dialect(dialect)
    return _Repair(messages, d).run()
