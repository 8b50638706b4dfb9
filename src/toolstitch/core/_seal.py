"""Sealing a call and checking it against the request: the only way a call becomes ``ready``.

Rule 4 ("seal, check, then execute") and rule 10 ("the request is the contract") meet here. A call
is sealed once its choice has finished; then, in this order:

1. its text is parsed strictly (``_call.parse_arguments``: valid Unicode, JSON, an object);
2. ``""`` arguments: read as ``{}`` only for a tool whose schema declares no properties at all
   (no meaning can change; anomaly ``empty_arguments_no_parameters``), or under the explicit
   ``empty_arguments="object"`` policy (anomaly ``empty_arguments_as_object``); else ``invalid``;
3. the request's contract: ``tool_choice="none"``, a forced function, an ``allowed_tools`` list and
   ``parallel_tool_calls=False`` (every call after the first of a choice) are enforced
   (``ContractViolation`` plus an anomaly ``contract_violation``);
4. the tool's JSON Schema (``_schema.py``); for a custom tool's call (``type == "custom"``: its text
   is its input, never parsed as JSON), the tool's ``format`` (``_schema_grammar.py``: a regex grammar
   is a full match, a lark grammar is recorded as unchecked), and a call of either kind naming a tool
   offered as the other is refused.

The accumulator and :func:`sealed_call` (calls rebuilt from a history message) share this code, so
a call from history is held to exactly the rules of a streamed one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Literal

from ..errors import ContractViolation, InternalFault, MalformedArguments, ToolCallError
from ..text import Node
from ._anomaly import Anomaly, AnomalyCode
from ._call import ToolCall
from ._clock import now
from ._limits import Limits
from ._owner import CallOwner, Finish, Identity
from ._schema import ToolSchemas, _as_mapping

__all__ = ["CallChecks", "offered_tools", "requested_choice", "sealed_call"]


def _choice_names(spec: Mapping[str, Any]) -> tuple[str, frozenset[str] | None]:
    """``(mode, allowed names)`` for a ``tool_choice`` object; names None when any tool may run."""
    kind = spec.get("type")
    if kind in ("function", "custom"):
        body = spec.get(kind)
        name = body.get("name") if isinstance(body, Mapping) else None
        # A forced choice whose name cannot be read allows nothing (fail closed).
        return "forced", frozenset([name] if isinstance(name, str) else ())
    if kind == "allowed_tools":
        body = spec.get("allowed_tools")
        tools = body.get("tools") if isinstance(body, Mapping) else None
        names: set[str] = set()
        for tool in tools if isinstance(tools, list) else ():
            tool = _as_mapping(tool)
            if tool is None:
                continue
            tkind = tool.get("type")
            inner = tool.get(tkind) if isinstance(tkind, str) else None
            name = inner.get("name") if isinstance(inner, Mapping) else tool.get("name")
            if isinstance(name, str):
                names.add(name)
        return "allowed", frozenset(names)
    return "auto", None


def offered_tools(tools: Any, functions: Any) -> list[Any] | None:
    """The tools a request offered: its ``tools`` and its legacy ``functions`` (read in the ``tools``
    shape), ``[]`` when it sent neither, so that every call is refused (rule 10). ``None`` (names
    unchecked) when either is not a list: a value whose meaning cannot be read."""
    if not isinstance(tools, list | None) or not isinstance(functions, list | None):
        return None
    return [*(tools or ()), *({"type": "function", "function": f} for f in functions or ())]


def requested_choice(tool_choice: Any, function_call: Any) -> Any:
    """The request's ``tool_choice``; without one, its legacy ``function_call`` in the same terms
    (``"none"``, ``"auto"``, or ``{"name": ...}`` forcing that function)."""
    if tool_choice is not None:
        return tool_choice
    if isinstance(function_call, Mapping):
        return {"type": "function", "function": {"name": function_call.get("name")}}
    return function_call


class CallChecks:
    """What a sealed call is checked against: the request's tools, tool_choice, parallel_tool_calls.

    ``tools`` None means "not known" (no name check); a list, even empty, is what the request offered.
    ``tool_choice`` and ``parallel_tool_calls`` take the values sent with the request (anything the
    SDK accepts: ``"none"``, ``"auto"``, ``"required"``, ``{"type": "function", ...}``, an
    ``allowed_tools`` object, or the SDK's ``NOT_GIVEN``/``omit``, which constrain nothing).
    """

    __slots__ = ("_allowed", "_empty_as_object", "_mode", "_single", "schemas")

    def __init__(
        self,
        tools: list[Any] | None,
        *,
        empty_arguments: Literal["invalid", "object"] = "invalid",
        tool_choice: Any = None,
        parallel_tool_calls: Any = None,
    ) -> None:
        if empty_arguments not in ("invalid", "object"):
            raise ValueError('empty_arguments must be "invalid" or "object"')
        # None: the tools are not known (a sans-I/O caller who did not pass them), so names are not
        # checked. An empty list: the request offered none, so every call is an UnknownTool.
        self.schemas = ToolSchemas(tools) if tools is not None else None
        self._empty_as_object = empty_arguments == "object"
        self._single = parallel_tool_calls is False
        self._mode = "auto"
        self._allowed: frozenset[str] | None = None
        if isinstance(tool_choice, str):
            if tool_choice == "none":
                self._mode = "none"
        else:
            spec = _as_mapping(tool_choice) if tool_choice is not None else None
            if spec is not None:
                self._mode, self._allowed = _choice_names(spec)

    def empty_as_object(self, name: str | None) -> bool:
        """Is ``""`` read as ``{}`` for a call to ``name``? Under ``empty_arguments="object"``, or
        for a tool whose schema declares no properties (no meaning can change)."""
        if self._empty_as_object:
            return True
        schemas = self.schemas
        return schemas is not None and name is not None and schemas.takes_no_arguments(name)

    def verdict(
        self, call: ToolCall, parsed: Any, first: bool, as_object: bool, notes: list[Anomaly]
    ) -> ToolCallError | None:
        """What the request says of a call whose text parsed: None (it may run) or why not. The
        owner of the call (``_owner.py``) applies it; anomalies for the call go to ``notes``."""
        if as_object:
            if self._empty_as_object:
                notes.append(
                    Anomaly(
                        AnomalyCode.EMPTY_ARGUMENTS_AS_OBJECT,
                        'empty arguments read as {} by the empty_arguments="object" policy',
                    )
                )
            else:
                notes.append(
                    Anomaly(
                        AnomalyCode.EMPTY_ARGUMENTS_NO_PARAMETERS,
                        f"empty arguments read as {{}}: the schema of {call.name!r} declares no properties",
                    )
                )
        violation = self._contract(call, first)
        if violation is not None:
            return ContractViolation(violation[1], raw=call.arguments, kind=violation[0])
        schemas = self.schemas
        if schemas is not None and call.name is not None:
            if call.type == "custom":
                return schemas.check_input(call.name, parsed, call.arguments, notes)
            return schemas.check(call.name, parsed, call.arguments)
        return None

    def by_name(self, call: ToolCall) -> ToolCallError | None:
        """What the request says of a call by its name and kind alone, asked when its text does not
        parse: a name ``tool_choice`` rules out, a tool not offered, or one offered as the other
        kind (a function called as a custom tool, or the reverse). None when the tool is right and
        only the text is wrong. The same answers :meth:`verdict` gives for a call whose text parsed."""
        violation = self._name_violation(call.name)
        if violation is not None:
            return ContractViolation(violation[1], raw=call.arguments, kind=violation[0])
        schemas = self.schemas
        if schemas is None or call.name is None:
            return None
        return schemas.kind_error(call.name, call.type == "custom", call.arguments)

    def early(self, name: str | None, raw: str) -> tuple[ToolCallError | None, Node | None]:
        """While a call streams, once its name is fixed: the request's certain verdict on the name
        (a tool it did not offer, or one its ``tool_choice`` rules out), else None and what is
        certain about the tool's schema (``text/_early.py``; None when nothing is). The same decisions
        as :meth:`verdict`, asked early: the early verdict is the one the seal would give."""
        if name is None:
            return None, None
        violation = self._name_violation(name)
        if violation is not None:
            return ContractViolation(violation[1], raw=raw, kind=violation[0]), None
        schemas = self.schemas
        if schemas is None:
            return None, None
        unknown = schemas.unknown(name, raw)
        if unknown is not None:
            return unknown, None
        return None, schemas.early_node(name)

    def _name_violation(self, name: str | None) -> tuple[str, str] | None:
        """``(kind, why)`` (a :class:`ContractViolation`'s) when ``tool_choice`` rules the name out."""
        mode = self._mode
        if mode == "none":
            return "tool_choice_none", f'the request said tool_choice="none", yet the model called {name!r}'
        allowed = self._allowed
        if allowed is not None and name not in allowed:
            wanted = ", ".join(sorted(allowed)) or "no readable name"
            what = "forced" if mode == "forced" else "allowed by tool_choice"
            return "tool_choice", f"the model called {name!r}; the request {what}: {wanted}"
        return None

    def _contract(self, call: ToolCall, first: bool) -> tuple[str, str] | None:
        violation = self._name_violation(call.name)
        if violation is not None:
            return violation
        if self._single and not first:
            why = "the request said parallel_tool_calls=False, and this is not the first call of its choice"
            return "parallel_tool_calls", why
        return None


def sealed_call(
    *,
    index: int,
    id: str | None,
    name: str | None,
    arguments: Any,
    tools: Iterable[Any] | None = None,
    choice: int = 0,
    limits: Limits | None = None,
    empty_arguments: Literal["invalid", "object"] = "invalid",
) -> ToolCall:
    """A sealed, checked :class:`ToolCall` built from a finished message (a history entry).

    Held to the rules of a streamed call, through the same owner: the text is kept exactly, parsed
    strictly, checked against ``tools`` (when given) and bounded by ``limits``. ``arguments`` that
    are not a string (or None, read as ``""``) make the call ``invalid``. Never raises on hostile
    values: a failure makes the call ``invalid`` with :class:`~toolstitch.errors.InternalFault`.
    """
    limits = limits or Limits()
    if type(index) is not int or index < 0:
        index = 0
    owner = CallOwner(limits, now)
    t = now()
    call = owner.open(choice, index, index, t)
    notes: list[Anomaly] = []
    events: list[Any] = []
    try:
        checks = CallChecks(list(tools) if tools is not None else None, empty_arguments=empty_arguments)
        if arguments is None:
            arguments = ""
        text = arguments if type(arguments) is str else None
        fid = id if type(id) is str and id else None
        fname = name if type(name) is str and name else None
        owner.identify(call, Identity(fid, fname, "function", None), events)
        owner.fragment(call, (text or "", None, False), events)
        if text is None:
            owner.refuse(
                call,
                MalformedArguments(
                    f"arguments in the message are a {type(arguments).__name__}, not a string"
                ),
            )
        else:
            owner.seal(call, Finish(t, checks, True))
    except Exception as exc:  # fail closed: never ready on a path that failed
        owner.refuse(call, InternalFault(f"the call could not be checked: {type(exc).__name__}: {exc}"))
    notes.extend(owner.take_notes())
    for note in notes:
        owner.annotate(call, replace(note, choice=choice, call_index=index))
    return call
