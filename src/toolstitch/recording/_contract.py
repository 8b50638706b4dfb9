"""The request's contract, read one way wherever a request comes from: rule 10, failing closed.

A streamed call is checked against what the request offered and allowed: its ``tools`` (and legacy
``functions``), ``tool_choice`` (or legacy ``function_call``) and ``parallel_tool_calls``. The SDK
sends them from several places, and the one the server reads wins: ``create``'s keyword arguments,
``extra_body`` merged over them (``extra_json`` over a low-level ``post``'s body), a body given as a
mapping, or JSON bytes. :func:`read_contract` reads a request in that shape (the callers turn
bodies and ``extra_json`` into it) and returns a :class:`Contract` that is either readable or
*unreadable*, never "unknown":

* ``tools`` / ``functions``: absent (``None``, the SDK's "not given"), or a sequence of tools, a
  ``list`` or a ``tuple`` alike. A ``str``, ``bytes``, a mapping, a number, a one-shot iterator
  (which the SDK would consume while sending) or an entry that is not a tool (not an object, a
  function without a string ``name``, ``parameters`` that are not a JSON Schema object, one name
  offered twice with two definitions) cannot be read as what was offered;
* ``tool_choice``: absent, a string, or an object; ``function_call``: absent, a string or an
  object; ``parallel_tool_calls``: absent or a boolean. Anything else cannot be read either;
* ``extra_body`` itself: absent or a mapping.

An unreadable contract refuses every call with :class:`~toolstitch.errors.ContractViolation`, saying
what could not be read: a call checked against a contract nobody can read would be checked against
nothing. "Tools unknown" (names and schemas unchecked) exists only where a caller says so
explicitly: ``Accumulator(tools=None)``, and ``ts.stitch`` / ``ts.calls_of`` without ``tools``.

It lives here, below the client, because replay reads a recorded request through it too: a replay
refuses what the live stream refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

from ..core import Accumulator, CallChecks, Limits, ResponseAccumulator, requested_choice
from ._plain import is_sentinel

if TYPE_CHECKING:
    from typing_extensions import TypedDict, Unpack

    class AccumulatorOptions(TypedDict, total=False):
        """The keywords :meth:`Contract.accumulator` passes on to the accumulator it builds."""

        limits: Limits | None
        empty_arguments: Literal["invalid", "object"]
        started_at: float | None
        clock: Callable[[], float] | None
        recover_text_tool_calls: bool


__all__ = ["CONTRACT_FIELDS", "Contract", "given_contract", "read_contract"]

#: The request fields that make up the contract.
CONTRACT_FIELDS = ("tools", "functions", "tool_choice", "function_call", "parallel_tool_calls")


class _Unreadable(Exception):
    """A part of the request that cannot be read as a contract; ``args[0]`` says which and why."""


@dataclass(frozen=True, slots=True)
class Contract:
    """What a request offered and allowed, as the core checks it, or why it cannot be read.

    ``tools`` is the list of offered tools (``functions`` in the ``tools`` shape after them; ``[]``
    when the request offered none, so every call is refused, rule 10), or ``None`` for "not known"
    (only :func:`given_contract` makes that, when its caller passed no tools). ``unreadable`` is
    None, or what could not be read (then every call is refused).
    """

    tools: list[Any] | None
    tool_choice: Any = None
    parallel_tool_calls: Any = None
    unreadable: str | None = None

    @overload
    def accumulator(self, *, kind: None = None, **options: Unpack[AccumulatorOptions]) -> Accumulator: ...

    @overload
    def accumulator(
        self, *, kind: type[ResponseAccumulator], **options: Unpack[AccumulatorOptions]
    ) -> ResponseAccumulator: ...

    def accumulator(
        self, *, kind: type[ResponseAccumulator] | None = None, **options: Unpack[AccumulatorOptions]
    ) -> Accumulator | ResponseAccumulator:
        """An accumulator of class ``kind`` (the Responses API's ``ResponseAccumulator`` reads its
        own events) that holds every call to this contract; one that cannot be read refuses every
        call, saying why."""
        given: dict[str, Any] = {
            "limits": None,
            "empty_arguments": "invalid",
            "started_at": None,
            "clock": None,
            **options,
        }
        if given.pop("recover_text_tool_calls", False):  # a keyword the chat accumulator alone takes
            given["recover_text_tool_calls"] = True
        build: Callable[..., Accumulator | ResponseAccumulator] = kind or Accumulator
        if self.unreadable is None:
            return build(
                self.tools,
                tool_choice=self.tool_choice,
                parallel_tool_calls=self.parallel_tool_calls,
                **given,
            )
        # Offering no tool refuses every call already (rule 10, and a recording says "none" so its
        # replay refuses them too); the checks below say why, instead of "offered: none".
        accumulator = build([], **given)
        if isinstance(getattr(accumulator, "_checks", None), CallChecks):
            accumulator._checks = _RefuseEvery(self.unreadable, given["empty_arguments"])
        return accumulator


class _RefuseEvery(CallChecks):
    """Checks that refuse every call that parsed, with one reason: the contract could not be read."""

    __slots__ = ("_why",)

    def __init__(self, why: str, empty_arguments: Literal["invalid", "object"]) -> None:
        super().__init__([], empty_arguments=empty_arguments)
        self._why = (
            f"the request's contract could not be read ({why}), so no call can be checked against "
            "it: every call is refused"
        )

    def _name_violation(self, name: str | None) -> tuple[str, str] | None:
        return "unreadable", self._why


def _name(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def _as_dict(value: Any) -> dict[str, Any] | None:
    """A JSON object (a mapping, or a pydantic model such as the SDK's) as a dict; else None."""
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            dumped = dump(exclude_unset=True)
        except Exception:
            return None
        if isinstance(dumped, Mapping):
            return dict(dumped)
    return None


def _sequence(value: Any, where: str) -> list[Any] | None:
    """``value`` as the list of entries it holds: None when absent, else a list or a tuple (any
    sequence that is not text); anything else cannot be read (a one-shot iterator would be read by
    toolstitch or by the SDK, never both)."""
    if value is None or is_sentinel(value):
        return None
    if isinstance(value, str | bytes | bytearray | memoryview | Mapping) or not isinstance(value, Sequence):
        raise _Unreadable(f"{where} is {_name(value)}, not a list")
    return list(value)


def _function(body: Any, where: str) -> dict[str, Any]:
    """A function definition (``{"name": ..., "parameters": {...}}``), read or refused."""
    fields = _as_dict(body)
    if fields is None:
        raise _Unreadable(f"{where} is {_name(body)}, not a function definition")
    if not isinstance(fields.get("name"), str) or not fields["name"]:
        raise _Unreadable(f"{where} has no name")
    params = fields.get("parameters")
    if params is not None and not is_sentinel(params):
        schema = _as_dict(params)
        if schema is None:
            raise _Unreadable(f"{where}.parameters is {_name(params)}, not a JSON Schema object")
        fields["parameters"] = schema
    return fields


def _tool(entry: Any, where: str) -> dict[str, Any]:
    """One entry of ``tools``, read or refused: a function (or custom) tool is read whole; a tool of
    another type is kept as sent (no call can name it: the core offers functions and custom tools)."""
    tool = _as_dict(entry)
    if tool is None:
        raise _Unreadable(f"{where} is {_name(entry)}, not a tool")
    kind = tool.get("type", "function")
    if not isinstance(kind, str):
        raise _Unreadable(f"{where}.type is {_name(kind)}, not a string")
    if kind == "function":
        tool["function"] = _function(tool.get("function"), f"{where}.function")
    elif kind == "custom":
        body = _as_dict(tool.get("custom"))
        if body is None or not isinstance(body.get("name"), str):
            raise _Unreadable(f"{where}.custom is not a custom tool with a name")
        tool["custom"] = body
    return tool


def _choice(value: Any, where: str) -> Any:
    """``tool_choice`` or ``function_call``: absent, a string, or an object (as a dict)."""
    if value is None or is_sentinel(value):
        return None
    if isinstance(value, str):
        return value
    spec = _as_dict(value)
    if spec is None:
        raise _Unreadable(f"{where} is {_name(value)}, not a string or an object")
    body = _as_dict(spec.get("allowed_tools"))
    if body is not None and "tools" in body:
        tools = _sequence(body["tools"], f"{where}.allowed_tools.tools")
        spec["allowed_tools"] = {**body, "tools": [_as_dict(t) or t for t in tools or ()]}
    kind = spec.get("type")
    if isinstance(kind, str) and kind in ("function", "custom"):
        inner = _as_dict(spec.get(kind))
        if inner is not None:
            spec[kind] = inner
    return spec


def _parallel(value: Any) -> bool | None:
    if value is None or is_sentinel(value):
        return None
    if not isinstance(value, bool):
        raise _Unreadable(f"parallel_tool_calls is {_name(value)}, not true or false")
    return value


def _one_definition_per_name(offered: list[dict[str, Any]]) -> None:
    """Refuse a name offered twice with two definitions: which one the server holds the model to is
    its own choice (the first, the last, or an error), so a call cannot be checked against it."""
    seen: dict[str, dict[str, Any]] = {}
    for tool in offered:
        kind = tool.get("type", "function")
        body = tool.get(kind) if kind in ("function", "custom") else None
        if not isinstance(body, dict):
            continue
        name = body.get("name")
        if isinstance(name, str):
            if name in seen and seen[name] != tool:
                raise _Unreadable(f"the tool {name!r} is offered twice, with two definitions")
            seen[name] = tool


def _sent(request: Mapping[str, Any], extra: Mapping[str, Any] | None, key: str) -> Any:
    """What the request body carries under ``key``: the SDK merges ``extra_body`` over its own
    fields, so a value there is the one the server reads (and the contract calls are held to)."""
    if extra is not None and key in extra:
        return extra[key]
    return request.get(key)


def read_contract(request: Mapping[str, Any]) -> Contract:
    """The contract of ``request`` (``create``'s keyword arguments, or a body with ``extra_json``
    as ``extra_body``): readable, or unreadable with the reason; never "unknown"."""
    try:
        extra_body = request.get("extra_body")
        extra: Mapping[str, Any] | None = None
        if extra_body is not None and not is_sentinel(extra_body):
            extra = _as_dict(extra_body)
            if extra is None:
                raise _Unreadable(f"extra_body is {_name(extra_body)}, not a mapping")
        tools = _sequence(_sent(request, extra, "tools"), "tools")
        functions = _sequence(_sent(request, extra, "functions"), "functions")
        offered = [_tool(t, f"tools[{i}]") for i, t in enumerate(tools or ())]
        offered += [
            {"type": "function", "function": _function(f, f"functions[{i}]")}
            for i, f in enumerate(functions or ())
        ]
        _one_definition_per_name(offered)
        tool_choice = _choice(_sent(request, extra, "tool_choice"), "tool_choice")
        function_call = _choice(_sent(request, extra, "function_call"), "function_call")
        parallel = _parallel(_sent(request, extra, "parallel_tool_calls"))
    except _Unreadable as why:
        return Contract([], unreadable=str(why))
    except Exception as exc:  # a hostile mapping that fails when read: nothing can be checked
        return Contract([], unreadable=f"reading it raised {type(exc).__name__}")
    return Contract(offered, requested_choice(tool_choice, function_call), parallel)


def given_contract(
    tools: Iterable[Any] | None, tool_choice: Any, function_call: Any, parallel_tool_calls: Any
) -> Contract:
    """The contract a caller passes by hand (``ts.stitch``, ``ts.calls_of``): read as a request's,
    except that ``tools=None`` means "not known" (names and schemas unchecked), as documented there.
    ``tools`` is read once, whatever the iterable."""
    tool_list = list(tools) if tools is not None and not isinstance(tools, str | bytes | Mapping) else tools
    request = {
        "tools": tool_list,
        "tool_choice": tool_choice,
        "function_call": function_call,
        "parallel_tool_calls": parallel_tool_calls,
    }
    contract = read_contract(request)
    if tools is None and contract.unreadable is None:
        return Contract(None, contract.tool_choice, contract.parallel_tool_calls)
    return contract
