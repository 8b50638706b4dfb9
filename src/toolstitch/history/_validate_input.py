"""The Responses API's offline validator: the rules ``R00``-``R09`` of a request's ``input``.

The Responses twin of :mod:`._validate`: :func:`validate_input` returns :class:`HistoryProblem`
lists, and ``_InputChecker`` runs the rules, one method per kind of item and one per rule within
them, as ``_validate._Checker`` runs the chat rules. The rules, their texts and their sources are
the table "The Responses API (R00-R09)" of ``docs/history-rules.md``. The texts are OpenAI's
whatever the dialect; a dialect decides only whether R09 applies. The builders whose items keep
these rules are in :mod:`._responses`; :mod:`._repair_input` fixes what breaks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard, cast

from ._common import _plain
from ._dialects import Dialect, get_dialect
from ._responses import _CALLS, _OUTPUTS, Item, _is_call, response_items
from ._validate import HistoryProblem, _clip, _is_json_object, _quote

__all__ = ["validate_input"]

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
        elif _is_call(kind) and isinstance(item_id, str) and last is not None:
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


_NOT_A_STRING = "(not a string)"
"""The kind of an item whose ``type`` is a list, an object or a number: no type the server knows
(R05), and, unlike the value itself, one that can be looked up in the tables of kinds."""


def _kind(item: Any) -> str | None:
    """An item's type; a message may leave it out (``{"role": "user", ...}``)."""
    kind = item.get("type") if isinstance(item, Mapping) else None
    if kind is None and isinstance(item, Mapping) and "role" in item:
        return "message"
    return kind if kind is None or isinstance(kind, str) else _NOT_A_STRING


def _item_id(item: Any) -> str | None:
    """An item's ``id`` when it is a string (one that is not matches no item: R08 pairs by id)."""
    item_id = item.get("id") if isinstance(item, Mapping) else None
    return item_id if isinstance(item_id, str) else None


def _said(value: Any) -> str:
    """A value as the server's message quotes it, cut as every problem cuts what it quotes (an id
    may be a megabyte long, or a list: the message stays short)."""
    return _clip(str(value), 80)


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
            if _is_call(call.get("type")) and isinstance(call_id, str):
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
            known = "a type that is not a string" if kind is _NOT_A_STRING else f"type {_quote(kind)}"
            what = f"input item {index} has {known}, which the server does not know"
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
            self.reasoning_seen.add(_item_id(item))
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
            text = _R08.format(id=_said(item_id), reasoning=_said(needed))
            what = f"{kind} item {index} is sent back without its reasoning item {_quote(needed)}"
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
            what = f"{kind} item {index} repeats call_id {_quote(call_id)} of item {self.made[call_id]}"
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
            first = self.answered[call_id]
            what = f"{kind} item {index} answers call {_quote(call_id)} again (item {first} did)"
            self.add(index, "R03", what, param=f"input[{index}].call_id")
        elif self.answers_a_call(index, kind, call_id):
            self.answered[call_id] = index

    def answers_a_call(self, index: int, kind: str, call_id: str) -> bool:
        """R01: an output answers a call made before it (here, or by the previous response), of its
        own type (the server pairs a call with an output of the call's type only). With only
        ``previous_response_id``, a call this input does not hold cannot be judged. True when the
        output answers its call."""
        text = (_R01 if kind == "function_call_output" else _R01_CUSTOM).format(id=_said(call_id))
        if call_id not in self.made and not self.unknown_previous:
            self.add(
                index, "R01", f"{kind} item {index} answers no call made before it", text=text, param="input"
            )
            return False
        if call_id in self.made_kind and self.made_kind[call_id] != _OUTPUTS[kind]:
            what = f"{kind} item {index} answers call {_quote(call_id)}, a {self.made_kind[call_id]}"
            self.add(index, "R01", what, text=text, param="input")
            return False
        return True

    def reasoning(self, index: int, item: Mapping[str, Any]) -> None:
        """R07: a reasoning item is followed by the item it produced (a call, a message): sent
        alone, when a history drops the call beside it, OpenAI refuses it."""
        following = self.items[index + 1] if index + 1 < len(self.items) else None
        if _kind(following) not in _PRODUCED:
            text = _R07.format(id=_said(item.get("id")))
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
            text = (_R02_CUSTOM if custom else _R02).format(id=_said(call_id))
            where = f" (item {index})" if index >= 0 else " of the previous response"
            answer = "custom_tool_call_output" if custom else "function_call_output"
            what = f"function call {_quote(call_id)}{where} has no {answer}"
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
