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
4. the tool's JSON Schema (``_schema.py``).

The accumulator and :func:`sealed_call` (calls rebuilt from a history message) share this code, so
a call from history is held to exactly the rules of a streamed one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Literal

from ..errors import ContractViolation, InternalFault, MalformedArguments
from ._anomaly import Anomaly, AnomalyCode
from ._call import ToolCall, text_size
from ._clock import now
from ._limits import Limits
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

    def seal(self, call: ToolCall, t: float, first: bool, notes: list[Anomaly]) -> None:
        """Seal ``call`` (it must be open) and check it; anomalies for the call go to ``notes``."""
        empty = call._chars == 0 and call._status == "open"
        schemas = self.schemas
        no_parameters = (
            empty
            and not self._empty_as_object
            and schemas is not None
            and call._name is not None
            and schemas.takes_no_arguments(call._name)
        )
        call._seal(t, self._empty_as_object or no_parameters)
        if call._status != "ready":
            return
        if empty:
            if no_parameters:
                notes.append(
                    Anomaly(
                        AnomalyCode.EMPTY_ARGUMENTS_NO_PARAMETERS,
                        f"empty arguments read as {{}}: the schema of {call._name!r} declares no properties",
                    )
                )
            else:
                notes.append(
                    Anomaly(
                        AnomalyCode.EMPTY_ARGUMENTS_AS_OBJECT,
                        'empty arguments read as {} by the empty_arguments="object" policy',
                    )
                )
        violation = self._contract(call, first)
        if violation is not None:
            call._invalidate(ContractViolation(violation, raw=call.arguments))
            notes.append(Anomaly(AnomalyCode.CONTRACT_VIOLATION, violation))
            return
        if schemas is not None and call._name is not None:
            error = schemas.check(call._name, call._parsed, call.arguments)
            if error is not None:
                call._invalidate(error)

    def _contract(self, call: ToolCall, first: bool) -> str | None:
        mode = self._mode
        if mode == "none":
            return f'the request said tool_choice="none", yet the model called {call._name!r}'
        allowed = self._allowed
        if allowed is not None and call._name not in allowed:
            wanted = ", ".join(sorted(allowed)) or "no readable name"
            what = "forced" if mode == "forced" else "allowed by tool_choice"
            return f"the model called {call._name!r}; the request {what}: {wanted}"
        if self._single and not first:
            return "the request said parallel_tool_calls=False, and this is not the first call of its choice"
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

    Held to the rules of a streamed call: the text is kept exactly, parsed strictly, checked against
    ``tools`` (when given) and bounded by ``limits``. ``arguments`` that are not a string (or None,
    read as ``""``) make the call ``invalid``. Never raises on hostile values: a failure makes the
    call ``invalid`` with :class:`~toolstitch.errors.InternalFault`.
    """
    limits = limits or Limits()
    if type(index) is not int or index < 0:
        index = 0
    call = ToolCall(choice, index, index, limits)
    call._type = "function"
    t = now()
    call._metrics.opened_at = t
    try:
        call._id = id if type(id) is str and id else None
        call._name = name if type(name) is str and name else None
        checks = CallChecks(list(tools) if tools is not None else None, empty_arguments=empty_arguments)
        if arguments is None:
            arguments = ""
        if type(arguments) is not str:
            call._invalidate(
                MalformedArguments(f"arguments in the message are a {type(arguments).__name__}, not a string")
            )
            call._metrics.sealed_at = t
            return call
        call._metrics.fragments = 1
        call._append(arguments, text_size(arguments))
        if call._status == "open":
            notes: list[Anomaly] = []
            checks.seal(call, t, True, notes)
            call._anomalies.extend(replace(n, choice=choice, call_index=index) for n in notes)
    except Exception as exc:  # fail closed: never ready on a path that failed
        call._invalidate(InternalFault(f"the call could not be checked: {type(exc).__name__}: {exc}"))
    return call
