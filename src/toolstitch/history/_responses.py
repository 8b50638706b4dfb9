"""History for the Responses API: the input items the next request accepts, and their rules.

A Responses request carries its history as ``input`` items (stateless), or names the previous
response (``previous_response_id``) and carries only what is new. Either way, after a function
call the next request must hold, for every ``function_call`` the model made, exactly one
``function_call_output`` with the same ``call_id``; an output whose call the server cannot find
earns "No tool call found for function call output with call_id ...", a call left unanswered "No
tool output found for function call ...", and a reasoning item sent without the item it produced
"... was provided without its required following item".

* :func:`response_items`: the output items of a response (a ``Response``, a stitched Responses
  stream, or the same as plain data) to append to ``input``: ``function_call`` items as received
  (their ``arguments`` text untouched), ``reasoning`` items kept (a reasoning model needs them
  back beside its calls), messages and every other item as the server sent them.
* :func:`function_call_output` / :func:`function_call_outputs`: the items answering calls, paired
  by ``call_id``, with the tool messages' rules (a call that is not ``ready`` never ran: it is
  answered with an error, never with a result).
* :func:`validate_input`: the problems a server would answer with a 400 (rules ``R00``-``R09``,
  listed in ``docs/history-rules.md``), for a stateless ``input`` or one that continues
  ``previous_response_id``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import pydantic

from ..core import serialisable, valid_unicode
from ..errors import CallNotReadyError
from ._build import ToolCallLike, _call_facts, _error_text, _is_result, _result_text
from ._common import _MISSING, _plain
from ._dialects import Dialect, get_dialect
from ._validate import HistoryProblem

if TYPE_CHECKING:
    # What the builders return, for type checkers: the SDK's input item type, so their items go
    # into a ``ResponseInputParam`` as the SDK's own would. At run time they are plain dicts.
    from openai.types.responses import ResponseInputItemParam as InputItem

__all__ = [
    "function_call_output",
    "function_call_outputs",
    "response_items",
    "validate_input",
]

Item = dict[str, Any]

_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
"""The item types that are calls, and the field that holds each one's text."""
_OUTPUTS = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}
"""The item types that answer calls, and the call type each answers."""


def _response_of(source: Any) -> Any:
    """The response inside a stitched Responses stream (``get_final_response()``), or ``source``."""
    final = getattr(source, "get_final_response", None)
    if callable(final) and not isinstance(source, Mapping):
        return final()
    return source


def _dump(item: Any) -> Any:
    if isinstance(item, pydantic.BaseModel):
        # by alias (the SDK's ``async_`` is ``async`` on the wire), without the fields the
        # server did not send: the item goes back as it came
        return item.model_dump(mode="json", by_alias=True, exclude_unset=True, warnings=False)
    return _plain(item)


def response_items(source: Any, *, reasoning: bool = True) -> list[InputItem]:
    """The output items of a response, as input items for the next request.

    ``source`` is a ``Response``, a stitched Responses stream (its ``get_final_response()``), a
    response as a dict, or its ``output`` list. ``function_call`` items keep their ``id``,
    ``call_id``, ``name`` and ``arguments`` text exactly as received (``null`` fields the server
    sent are left out: input items do not take them); ``reasoning`` items are kept, and with
    ``reasoning=False`` only those that came with a call (the last one before each
    ``function_call``: OpenAI refuses a call sent back without it, rule R08). With ``store=False``
    a reasoning item can go back only with its ``encrypted_content``: ask for it with
    ``include=["reasoning.encrypted_content"]`` (``ts.run`` does). Every other item is kept as
    sent. Input is never changed: the items are copies.
    """
    response = _response_of(source)
    if isinstance(response, list | tuple):
        output: Any = response
    elif isinstance(response, Mapping):
        output = response.get("output")
    else:
        output = getattr(response, "output", None)
    if not isinstance(output, list | tuple):
        raise TypeError(
            f"expected a Response, a Responses stream or an output list, got {type(source).__name__}"
        )
    items: list[Item] = []
    for entry in output:
        data = _dump(entry)
        if not isinstance(data, Mapping):
            raise TypeError(f"an output item is {type(data).__name__}, not an object")
        # What no request can carry (a lone surrogate a hostile server put in a refused call, a
        # value nested too deep to write) is repaired as the chat completion's data is
        # (``core.serialisable``), so the next request can be sent whatever the response held.
        items.append(serialisable({k: v for k, v in data.items() if v is not None})[0])
    if not reasoning:
        kept = _reasoning_with_calls(items)
        items = [i for k, i in enumerate(items) if i.get("type") != "reasoning" or k in kept]
    return cast("list[InputItem]", items)


def _reasoning_with_calls(items: list[Item]) -> set[int]:
    """The positions of the reasoning items that came with a call: the last reasoning item before
    each ``function_call``. The server wants it back beside the call (R08), so
    ``reasoning=False`` never drops it."""
    kept: set[int] = set()
    last: int | None = None
    for k, item in enumerate(items):
        kind = item.get("type")
        if kind == "reasoning":
            last = k
        elif kind in _CALLS and last is not None:
            kept.add(last)
    return kept


def function_call_output(
    call: ToolCallLike | Any, result: Any = _MISSING, *, error: str | BaseException | None = None
) -> InputItem:
    """The ``function_call_output`` item answering ``call`` (a :class:`~toolstitch.ToolCall`, a
    ``function_call`` item of a response, or a dict with ``call_id``). A custom tool's call (a
    ``ToolCall`` whose ``type`` is ``"custom"``, or a ``custom_tool_call`` item) is answered with a
    ``custom_tool_call_output`` item, the type the server pairs it with.

    ``result`` is a ``str`` (sent as is) or any JSON value (compact JSON, as
    :func:`~toolstitch.history.tool_message` sends it); an exception as ``result``, or ``error=``,
    is an error result. A call that is not ``ready`` never ran: without an error result this raises
    :class:`~toolstitch.errors.CallNotReadyError`; answer it with
    ``function_call_output(call, error=call_error_text(call))``.
    """
    call_id, name, status, _ = _facts(call)
    if result is not _MISSING and error is not None:
        raise TypeError("function_call_output() takes a result or error=, not both")
    if isinstance(result, BaseException):
        result, error = _MISSING, result
    if result is _MISSING and error is None:
        raise TypeError("function_call_output() needs a result, or error= for a call that failed")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"function call {name!r} has no call_id, so no output can answer it")
    if error is None and status not in (None, "ready"):
        raise CallNotReadyError(
            f"function call {call_id!r} ({name!r}) is {status!r}, so it was not executed and has no "
            "result; answer it with function_call_output(call, error=call_error_text(call))",
            call=call,
            status=str(status),
        )
    output = _error_text(error, call) if error is not None else _result_text(result)
    kind = "custom_tool_call_output" if _is_custom(call) else "function_call_output"
    return cast("InputItem", {"type": kind, "call_id": valid_unicode(call_id), "output": output})


def _is_custom(call: Any) -> bool:
    """A custom tool's call: a ``ToolCall`` of ``type`` ``"custom"``, or a ``custom_tool_call`` item."""
    if isinstance(call, pydantic.BaseModel | Mapping):
        data = _plain(call)
        if isinstance(data, Mapping) and "call_id" in data:
            return data.get("type") == "custom_tool_call"
    return getattr(call, "type", None) == "custom"


def _facts(call: Any) -> tuple[Any, str | None, str | None, BaseException | None]:
    """``(call_id, name, status, error)`` of a ToolCall, a call item, or a dict."""
    if isinstance(call, pydantic.BaseModel | Mapping):
        data = _plain(call)
        if isinstance(data, Mapping) and ("call_id" in data or data.get("type") in _CALLS):
            name = data.get("name")
            return data.get("call_id"), name if isinstance(name, str) else None, None, None
    return _call_facts(call)


def function_call_outputs(items: Iterable[tuple[ToolCallLike | Any, Any] | Any]) -> list[InputItem]:
    """One ``function_call_output`` per item: a ``(call, result)`` pair, or an executed result of
    ``Toolbox.execute`` (anything with ``.call``, ``.ok`` and ``.content``). In the calls' output
    order when every call carries an ``index`` (toolstitch ``ToolCall``), else as given."""
    entries: list[tuple[Any, Any]] = []
    for item in items:
        if isinstance(item, tuple):
            if len(item) != 2:
                raise TypeError("function_call_outputs() takes (call, result) pairs or executed results")
            entries.append((item[0], item))
        elif _is_result(item):
            entries.append((item.call, item))
        else:
            raise TypeError(
                "function_call_outputs() takes (call, result) pairs or executed results, "
                f"got {type(item).__name__}"
            )
    if entries and all(isinstance(getattr(c, "index", None), int) for c, _ in entries):
        entries.sort(key=lambda e: tuple(getattr(e[0], k, 0) for k in ("choice", "index", "slot")))
    out: list[InputItem] = []
    for call, item in entries:
        if isinstance(item, tuple):
            out.append(function_call_output(call, item[1]))
        elif item.ok is True:
            out.append(function_call_output(_as_item(call), item.content))
        else:
            out.append(function_call_output(_as_item(call), error=item.content))
    return out


def _as_item(call: Any) -> Item:
    """An executed call as a bare item: the gate decided it ran, not its stream status."""
    call_id, name, _, _ = _facts(call)
    kind = "custom_tool_call" if _is_custom(call) else "function_call"
    return {"type": kind, "call_id": call_id, "name": name}


# ----------------------------------------------------------------------------- the validator

_R01 = "No tool call found for function call output with call_id {id}."
_R02 = "No tool output found for function call {id}."
_R01_CUSTOM = "No tool call found for custom tool call output with call_id {id}."
_R02_CUSTOM = "No tool output found for custom tool call {id}."
_R05 = "Missing required parameter: 'input[{index}].{field}'."
_R07 = "Item '{id}' of type 'reasoning' was provided without its required following item."
_R08 = (
    "Item '{id}' of type 'function_call' was provided without its required 'reasoning' item: '{reasoning}'."
)
_ITEM_TYPES = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "reasoning",
        "item_reference",
        "file_search_call",
        "web_search_call",
        "computer_call",
        "computer_call_output",
        "image_generation_call",
        "code_interpreter_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "custom_tool_call",
        "custom_tool_call_output",
        "compaction",
    }
)
#: Items a reasoning item may be followed by: what a model step produces after its reasoning.
_PRODUCED = frozenset(_ITEM_TYPES - {"function_call_output", "item_reference", "reasoning"})


def _problem(
    index: int | None, rule: str, message: str, text: str | None = None, param: str | None = None
) -> HistoryProblem:
    full = f'{message}. OpenAI rejects it: "{text}"' if text else message
    return HistoryProblem(index, rule, "error" if rule != "R06" else "warning", full, text, param)


def _previous_items(previous: Any) -> list[Item]:
    if previous is None:
        return []
    try:
        return cast("list[Item]", response_items(previous))
    except TypeError:
        return []


def _required_reasoning(items: list[Item]) -> dict[str, str]:
    """Each ``function_call`` item id of a response, mapped to the id of the reasoning item it came
    with (the last one before it in the output): what the call must be sent back beside (R08)."""
    required: dict[str, str] = {}
    last: str | None = None
    for item in items:
        kind, item_id = item.get("type"), item.get("id")
        if kind == "reasoning":
            last = item_id if isinstance(item_id, str) else None
        elif kind in _CALLS and isinstance(item_id, str) and last is not None:
            required[item_id] = last
    return required


#: Items that end a model's turn in ``input``: what the caller sends (R09 looks for a reasoning
#: item in each turn that makes calls).
_CALLER_ITEMS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "mcp_approval_response",
        "item_reference",
    }
)


def _kind(item: Any) -> Any:
    """An item's type; a message may leave it out (``{"role": "user", ...}``)."""
    kind = item.get("type") if isinstance(item, Mapping) else None
    if kind is None and isinstance(item, Mapping) and "role" in item:
        return "message"
    return kind


def _filled(value: Any) -> TypeGuard[str]:
    """A non-empty string: what a ``call_id`` or a ``name`` must be."""
    return isinstance(value, str) and bool(value)


class _InputChecker:
    """Runs every R rule over one ``input`` list, collecting problems in order: the Responses twin
    of :class:`._validate._Checker`, one method per kind of item (``call``, ``output``,
    ``reasoning``) and one per rule within them, then ``unanswered`` across the items.

    Its state is what the rules pair items by: the calls made so far (``made``: ``call_id`` to its
    item's index, ``-1`` for a call of the previous response not sent back; ``made_kind``: the
    call's item type, which its output's type must match), the calls answered, the reasoning items
    seen (R08) and whether the current turn has reasoned yet (R09).
    """

    def __init__(self, items: list[Any], earlier: list[Item], d: Dialect, *, unknown_previous: bool) -> None:
        self.items = items
        self.problems: list[HistoryProblem] = []
        self.made: dict[str, int] = {}
        self.made_kind: dict[str, str] = {}
        for call in earlier:
            call_id = call.get("call_id")
            if call.get("type") in _CALLS and isinstance(call_id, str):
                self.made.setdefault(call_id, -1)
                self.made_kind.setdefault(call_id, call["type"])
        self.required = _required_reasoning(earlier)
        self.deepseek = d.name == "deepseek"
        self.unknown_previous = unknown_previous
        self.answered: dict[str, int] = {}
        self.reasoning_seen: set[Any] = set()  # ids of the reasoning items before the current item
        self.turn_reasoned = False  # a reasoning item since the caller's last item (R09)

    def add(
        self, index: int | None, rule_id: str, what: str, *, text: str | None = None, param: str | None = None
    ) -> None:
        self.problems.append(_problem(index, rule_id, what, text, param))

    # -- one item at a time -----------------------------------------------------------------

    def item(self, index: int, item: Any) -> None:
        """R00 an item that is not an object; R05 a type the server does not know. Then the item's
        own rules, by its kind: an item the server would refuse is judged no further."""
        if not isinstance(item, Mapping):
            self.add(index, "R00", f"input item {index} is not an object", param=f"input[{index}]")
            return
        kind = _kind(item)
        if kind not in _ITEM_TYPES:
            what = f"input item {index} has type {kind!r}, which the server does not know"
            self.add(index, "R05", what, param=f"input[{index}].type")
            return
        self.turn(kind, item)
        if kind in _CALLS:
            self.call(index, kind, item)
        elif kind in _OUTPUTS:
            self.output(index, kind, item)
        elif kind == "reasoning":
            self.reasoning(index, item)

    def turn(self, kind: str, item: Mapping[str, Any]) -> None:
        """Follow the turns: a reasoning item is seen (R08) and reasons for its turn (R09) until the
        caller's next item (an output, a reference, a message that is not the assistant's)."""
        if kind == "reasoning":
            self.reasoning_seen.add(item.get("id"))
            self.turn_reasoned = True
        elif kind in _CALLER_ITEMS or (kind == "message" and item.get("role") != "assistant"):
            self.turn_reasoned = False

    def call(self, index: int, kind: str, item: Mapping[str, Any]) -> None:
        """A ``function_call`` or ``custom_tool_call``: its reasoning (R08, R09), its fields (R05),
        its ``call_id`` made once (R04), its arguments (R06)."""
        self.beside_reasoning(index, kind, item)
        self.reasoned_turn(index, kind)
        self.call_fields(index, kind, item)
        call_id = item.get("call_id")
        if _filled(call_id) and self.made_once(index, kind, call_id):
            self.arguments(index, kind, item)

    def beside_reasoning(self, index: int, kind: str, item: Mapping[str, Any]) -> None:
        """R08: a call of the previous response sent back with its item ``id`` comes after the
        reasoning item it came with; OpenAI refuses it otherwise (it pairs the two by id)."""
        item_id = item.get("id")
        needed = self.required.get(item_id) if isinstance(item_id, str) else None
        if needed is not None and needed not in self.reasoning_seen:
            text = _R08.format(id=item_id, reasoning=needed)
            what = f"{kind} item {index} is sent back without its reasoning item {needed!r}"
            self.add(index, "R08", what, text=text, param="input")

    def reasoned_turn(self, index: int, kind: str) -> None:
        """R09 (``dialect="deepseek"``): a turn's calls come after a reasoning item of that turn;
        DeepSeek's gateway wants one, as its chat API wants ``reasoning_content`` (H62)."""
        if self.deepseek and not self.turn_reasoned:
            what = f"{kind} item {index} has no reasoning item before it in its turn (DeepSeek)"
            self.add(index, "R09", what, param="input")

    def call_fields(self, index: int, kind: str, item: Mapping[str, Any]) -> None:
        """R05: a call has a ``call_id``, a ``name`` and its text (``arguments``, a custom tool's
        ``input``) as a string: the API's schema requires them."""
        for field, ok in (
            ("call_id", _filled(item.get("call_id"))),
            ("name", _filled(item.get("name"))),
            (_CALLS[kind], isinstance(item.get(_CALLS[kind]), str)),
        ):
            if not ok:
                text = _R05.format(index=index, field=field)
                what = f"{kind} item {index} has no usable {field}"
                self.add(index, "R05", what, text=text, param=f"input[{index}].{field}")

    def made_once(self, index: int, kind: str, call_id: str) -> bool:
        """R04: one call per ``call_id``, or the server cannot tell which one an output answers. A
        call of the previous response sent back (a stateless ``input``) is that call, not a repeat.
        True when the call is recorded as made here."""
        if self.made.get(call_id) == -1:
            self.made[call_id] = index  # the previous response's call, sent back: its own item now
        elif call_id in self.made:
            what = f"{kind} item {index} repeats call_id {call_id!r} of item {self.made[call_id]}"
            self.add(index, "R04", what, param=f"input[{index}].call_id")
            return False
        else:
            self.made[call_id] = index
        self.made_kind[call_id] = kind
        return True

    def arguments(self, index: int, kind: str, item: Mapping[str, Any]) -> None:
        """R06 (a warning): a function's ``arguments`` are a JSON object. OpenAI keeps the text as
        sent, but local servers parse it. A custom tool's input is text, so it is not judged."""
        arguments = item.get("arguments")
        if kind == "function_call" and isinstance(arguments, str) and not _is_json_object(arguments):
            what = f"the arguments of function_call item {index} are not a JSON object"
            self.add(index, "R06", what, param=f"input[{index}].arguments")

    def output(self, index: int, kind: str, item: Mapping[str, Any]) -> None:
        """An output (``function_call_output``, ``custom_tool_call_output``): its fields (R05), one
        output per call (R03), and a call it answers (R01)."""
        call_id = item.get("call_id")
        if not _filled(call_id):
            text = _R05.format(index=index, field="call_id")
            self.add(
                index,
                "R05",
                f"{kind} item {index} has no call_id",
                text=text,
                param=f"input[{index}].call_id",
            )
            return
        if not isinstance(item.get("output"), str | list):
            text = _R05.format(index=index, field="output")
            what = f"{kind} item {index} has no output text"
            self.add(index, "R05", what, text=text, param=f"input[{index}].output")
        if call_id in self.answered:
            what = f"{kind} item {index} answers call {call_id!r} again (item {self.answered[call_id]} did)"
            self.add(index, "R03", what, param=f"input[{index}].call_id")
        elif self.answers_a_call(index, kind, call_id):
            self.answered[call_id] = index

    def answers_a_call(self, index: int, kind: str, call_id: str) -> bool:
        """R01: an output answers a call made before it (here, or by the previous response), of its
        own type (the server pairs a call with an output of the call's type only). With only
        ``previous_response_id``, a call this input does not hold cannot be judged. True when the
        output answers its call."""
        text = (_R01 if kind == "function_call_output" else _R01_CUSTOM).format(id=call_id)
        if call_id not in self.made and not self.unknown_previous:
            self.add(
                index, "R01", f"{kind} item {index} answers no call made before it", text=text, param="input"
            )
            return False
        if call_id in self.made_kind and self.made_kind[call_id] != _OUTPUTS[kind]:
            what = f"{kind} item {index} answers call {call_id!r}, a {self.made_kind[call_id]}"
            self.add(index, "R01", what, text=text, param="input")
            return False
        return True

    def reasoning(self, index: int, item: Mapping[str, Any]) -> None:
        """R07: a reasoning item is followed by the item it produced (a call, a message): sent
        alone, when a history drops the call beside it, OpenAI refuses it."""
        following = self.items[index + 1] if index + 1 < len(self.items) else None
        if _kind(following) not in _PRODUCED:
            text = _R07.format(id=item.get("id"))
            what = f"reasoning item {index} is not followed by the item it produced"
            self.add(index, "R07", what, text=text, param="input")

    # -- across items -----------------------------------------------------------------------

    def unanswered(self) -> None:
        """R02: every call (here, or of the previous response) has its output in this input; the
        server refuses a request that leaves one unanswered."""
        for call_id, index in self.made.items():
            if call_id in self.answered:
                continue
            custom = self.made_kind.get(call_id) == "custom_tool_call"
            text = (_R02_CUSTOM if custom else _R02).format(id=call_id)
            where = f" (item {index})" if index >= 0 else " of the previous response"
            answer = "custom_tool_call_output" if custom else "function_call_output"
            what = f"function call {call_id!r}{where} has no {answer}"
            self.add(index if index >= 0 else None, "R02", what, text=text, param="input")


def _read(input: list[Any] | tuple[Any, ...]) -> list[Any]:
    """Each item as plain data; ``None`` for one that cannot be read (R00 then)."""
    items: list[Any] = []
    for entry in input:
        try:
            items.append(_plain(entry))
        except Exception:
            items.append(None)
    return items


def _sorted(problems: list[HistoryProblem]) -> list[HistoryProblem]:
    """By item index, the problems of the whole input (``index=None``) last."""
    return sorted(problems, key=lambda p: (p.index is None, p.index if p.index is not None else 0))


def validate_input(
    input: Any,
    *,
    previous: Any = None,
    previous_response_id: Any = None,
    dialect: str | Dialect = "openai",
) -> list[HistoryProblem]:
    """The problems of a Responses request's ``input`` that a server would answer with a 400
    (errors) or that are fragile (warnings); ``[]`` when it is valid. ``index`` is the item's
    position in ``input``.

    * ``R00`` ``input`` that is neither a string nor a list, or an item that is not an object;
    * ``R01`` a ``function_call_output`` whose ``call_id`` no ``function_call`` before it made (nor
      the previous response);
    * ``R02`` a ``function_call`` (or a call of the previous response) no output answers;
    * ``R03`` two outputs for one call; ``R04`` two calls with one ``call_id``;
    * ``R05`` an item without what the server requires (``call_id``, ``name``, ``arguments``
      text, ``output``) or of a type it does not know;
    * ``R06`` (warning) ``arguments`` that are not a JSON object: local servers parse them;
    * ``R07`` a ``reasoning`` item without the item it produced right after it;
    * ``R08`` a ``function_call`` of ``previous`` sent back with its item ``id`` but without the
      reasoning item it came with (OpenAI: "... was provided without its required 'reasoning'
      item");
    * ``R09`` (``dialect="deepseek"``) a turn that makes calls without a reasoning item before
      them: DeepSeek's gateway wants one before every call of a turn, as its chat API wants
      ``reasoning_content`` (H62).

    A custom tool's ``custom_tool_call`` (its text in ``input``) and ``custom_tool_call_output``
    are held to the rules of a ``function_call`` and its output (R01-R05, R08, R09; R06 does not
    apply: the input is text), and an output of one type answering a call of the other is ``R01``
    (the server pairs them by type too).

    ``previous`` is the response ``previous_response_id`` names, or the one whose items this
    input sends back (a ``Response``, a dict, or its output), when it is known: its calls must be
    answered here, once (sending its calls back, statelessly, is not a repeat), and beside their
    reasoning. When only
    ``previous_response_id`` is given, an output for a call this input does not hold cannot be
    judged, so ``R01`` is not reported for it. Never raises; linear in the size of ``input``.

    The rules are the methods of ``_InputChecker``, one per kind of item and per rule.
    """
    if isinstance(input, str):
        return []
    if not isinstance(input, list | tuple):
        what = f"input is a {type(input).__name__}, not a string or a list"
        return [_problem(None, "R00", what, param="input")]
    earlier = _previous_items(previous)
    unknown_previous = previous is None and previous_response_id is not None
    checker = _InputChecker(_read(input), earlier, get_dialect(dialect), unknown_previous=unknown_previous)
    for index, item in enumerate(checker.items):
        checker.item(index, item)
    checker.unanswered()
    return _sorted(checker.problems)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False
