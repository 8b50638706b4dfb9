"""Tools the model may call: Python functions (or raw JSON schemas) turned into :class:`Tool`.

A :class:`Tool` is the one place that knows three things about a function: the JSON schema the model
is shown, how the model's arguments are checked and turned into Python values (the *binder*), and how
the function is run (sync or async, timeout, read-only, needs confirmation). Everything else (the gate,
the executor, the run loop) asks the tool rather than guessing.

Schemas come from pydantic, never from hand-written code: ``pydantic.create_model`` over the function's
signature (type hints, defaults, ``Annotated[..., Field(...)]``), with parameter descriptions from the
docstring (Google, Sphinx or NumPy style). A function whose only parameter is a pydantic model takes
that model's fields as its arguments (the shape ``openai.pydantic_function_tool`` uses). The same
pydantic model then validates the arguments, so what the model was shown and what is checked cannot
drift apart.

Strict mode (``"strict": true``) is used whenever the schema allows it (see ``_strict.py``): optional
parameters become required-but-nullable, and ``null`` means "use the default". Otherwise the tool is
sent without ``strict`` and the full pydantic schema is shown.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeAlias, TypedDict, overload

import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import ParamSpec, TypeVar

from ..core import InputFormat, ToolCall, TrustedGrammar, read_format, trust_grammar
from ..history import schema_error
from ._approval import Deny
from ._cancel import CancelToken
from ._process import ISOLATIONS, reference_of
from ._runtime import is_async_callable
from ._strict import clean_schema, is_strict_schema, strict_schema

_P = ParamSpec("_P", default=...)
_R = TypeVar("_R", default=Any)
"""A tool's function's parameters and return type: ``@ts.tool`` keeps the function's signature,
so calling the tool directly type-checks as calling the function would. A bare ``Tool`` is any."""

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ConfirmCallback", "Isolation", "Tool", "ToolOptions", "isolation_problem", "tool"]

ConfirmCallback: TypeAlias = Callable[[ToolCall, "Tool"], "bool | Deny | Awaitable[bool | Deny]"]
"""Asked before a ``confirm=True`` tool runs: ``confirm(call, tool) -> True | False | ts.Deny(reason)``.

``call`` is the sealed, validated :class:`~toolstitch.ToolCall` (``call.name``, ``call.parsed``,
``call.id``), ``tool`` the :class:`Tool` it names. A plain function runs in a worker thread (it may
block, asking a person); an ``async def`` (or any callable returning an awaitable) is awaited. Only
``True`` runs the call; ``False`` refuses it with a generic reason; ``ts.Deny("reason")`` refuses it
and the model reads the reason. A callback that raises refuses the call with a generic reason (the
exception is logged, never shown to the model). The toolbox's ``timeout``/``total_timeout`` bound the
wait.
"""

Isolation: TypeAlias = Literal["thread", "process"]
"""Where a sync tool runs: in a thread of the toolbox's pool (``"thread"``: a timeout bounds the wait
for it, not its run), or in a worker process that is killed when its timeout passes (``"process"``:
the timeout bounds the run; see ``tools/_process.py``)."""

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # OpenAI's pattern, accepted by every provider (H13)


# ----------------------------------------------------------------------------- docstrings

_GOOGLE_HEADERS = re.compile(r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments):\s*$")
_OTHER_HEADERS = re.compile(
    r"^(Returns?|Yields?|Raises?|Examples?|Notes?|See Also|Warnings?|Attributes|References):\s*$"
)
_NUMPY_UNDERLINE = re.compile(r"^-{3,}\s*$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$")
_GOOGLE_ITEM = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ITEM = re.compile(r"^(\w+)\s*(?::.*)?$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(summary, {parameter: description})`` from a Google, Sphinx or NumPy style docstring.

    The summary is the text before the first section, so "Args:" blocks are not sent twice (once in
    the description, once per parameter).
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if _GOOGLE_HEADERS.match(stripped):
            section, current = "google", None
        elif _OTHER_HEADERS.match(stripped):
            section, current = "other", None
        elif nxt and _NUMPY_UNDERLINE.match(nxt) and stripped:
            section = "numpy" if stripped.lower() in ("parameters", "other parameters") else "other"
            current = None
            i += 1
        elif (m := _SPHINX_PARAM.match(stripped)) is not None:
            section, current = "sphinx", m.group(1)
            params[current] = m.group(2).strip()
        elif stripped.startswith(":") and section in (None, "sphinx"):
            section, current = "other", None
        elif section is None:
            summary.append(line)
        elif section == "google" and stripped:
            indent = len(line) - len(line.lstrip())
            m = _GOOGLE_ITEM.match(stripped)
            if m is not None and (current is None or indent <= _indent_of(lines, current)):
                current = m.group(1).lstrip("*")
                params[current] = m.group(2).strip()
            elif current is not None:
                params[current] = (params[current] + " " + stripped).strip()
        elif section == "numpy" and stripped:
            if line == line.lstrip() and (m := _NUMPY_ITEM.match(stripped)) is not None:
                current = m.group(1)
                params[current] = ""
            elif current is not None:
                params[current] = (params[current] + " " + stripped).strip()
        elif section == "sphinx" and stripped and current is not None:
            params[current] = (params[current] + " " + stripped).strip()
        i += 1
    return "\n".join(summary).strip(), {k: v for k, v in params.items() if v}


def _indent_of(lines: list[str], name: str) -> int:
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith(name) or stripped.startswith("*" + name):
            return len(line) - len(stripped)
    return 0


# ----------------------------------------------------------------------------- binders


class _Binder(Protocol):
    """Turns the model's parsed arguments into keyword arguments for the function, or says why not."""

    def bind(self, arguments: Any) -> tuple[dict[str, Any] | None, list[str]]: ...


# key -> (drop null, nested plan, nested is a list)
_NullPlan: TypeAlias = dict[str, tuple[bool, "_NullPlan | None", bool]]


def _accepts_none(annotation: Any) -> bool:
    try:
        TypeAdapter(annotation).validate_python(None)
    except Exception:
        return False
    return True


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The pydantic model inside ``annotation`` (``M``, ``M | None``, ``list[M]``), if there is one."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _nested_model(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (list, Sequence, tuple, set, frozenset) or (
        isinstance(origin, type) and origin is not dict and issubclass(origin, Sequence)
    ):
        if args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            return args[0], True
        return None, False
    if len(args) == 1:
        return _nested_model(args[0])
    return None, False


def _null_plan(model: type[BaseModel], seen: frozenset[type[BaseModel]] = frozenset()) -> _NullPlan:
    """Where ``null`` stands for "use the default" in a strict schema made from ``model``."""
    plan: _NullPlan = {}
    seen = seen | {model}
    for name, field in model.model_fields.items():
        key = field.alias or name
        drop = not field.is_required() and not _accepts_none(field.annotation)
        sub, is_list = _nested_model(field.annotation)
        subplan = _null_plan(sub, seen) if sub is not None and sub not in seen else None
        if drop or subplan:
            plan[key] = (drop, subplan, is_list)
    return plan


def _drop_nulls(data: Any, plan: _NullPlan | None) -> Any:
    """A copy of ``data`` without the ``null`` values that mean "the default" (never mutates)."""
    if not plan or not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        entry = plan.get(key)
        if entry is not None:
            drop, sub, is_list = entry
            if value is None and drop:
                continue
            if sub:
                if is_list and isinstance(value, list):
                    value = [_drop_nulls(v, sub) for v in value]
                else:
                    value = _drop_nulls(value, sub)
        out[key] = value
    return out


def _show_input(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_validation_error(exc: ValidationError) -> list[str]:
    """One line per problem, with the argument path and what was received: what the model needs to
    correct its call."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(arguments)"
        kind = err.get("type")
        if kind == "missing":
            lines.append(f"{loc}: required argument is missing")
        elif kind == "extra_forbidden":
            lines.append(f"{loc}: unexpected argument (not in the schema)")
        else:
            lines.append(f"{loc}: {err.get('msg')} (got {_show_input(err.get('input'))})")
    return lines


def _object_only(arguments: Any) -> list[str]:
    if isinstance(arguments, dict):
        return []
    return [f"(arguments): must be a JSON object, got {type(arguments).__name__}"]


class _SignatureBinder:
    """Arguments validated by a pydantic model made from the function's signature."""

    def __init__(self, model: type[BaseModel], fields: dict[str, str], plan: _NullPlan | None) -> None:
        self.model = model
        self.fields = fields  # model field name -> function parameter name
        self.plan = plan

    def bind(self, arguments: Any) -> tuple[dict[str, Any] | None, list[str]]:
        problems = _object_only(arguments)
        if problems:
            return None, problems
        try:
            value = self.model.model_validate(_drop_nulls(arguments, self.plan))
        except ValidationError as exc:
            return None, format_validation_error(exc)
        # Only what the model sent: the function applies its own defaults, as a direct call would.
        return {self.fields[f]: getattr(value, f) for f in value.model_fields_set}, []


class _ModelBinder:
    """The function's single parameter is a pydantic model; the arguments are that model's fields."""

    def __init__(self, model: type[BaseModel], param: str, plan: _NullPlan | None) -> None:
        self.model = model
        self.param = param
        self.plan = plan
        keys = {f.alias or n for n, f in model.model_fields.items()}
        self.known = None if model.model_config.get("extra") == "allow" else keys

    def bind(self, arguments: Any) -> tuple[dict[str, Any] | None, list[str]]:
        problems = _object_only(arguments)
        if problems:
            return None, problems
        if self.known is not None:
            # The schema we publish is closed; a model that would silently ignore extras must not
            # let a misspelt argument pass unnoticed.
            problems = [
                f"{k}: unexpected argument (not in the schema)" for k in arguments if k not in self.known
            ]
        try:
            value = self.model.model_validate(_drop_nulls(arguments, self.plan))
        except ValidationError as exc:
            problems.extend(format_validation_error(exc))
        if problems:
            return None, problems
        return {self.param: value}, []


class _InputBinder:
    """A custom tool: its input is text (the call's ``parsed`` is the string itself), held to the
    tool's ``format`` (a grammar as a full match, by its engine; ``core/_schema_grammar.py``), and passed
    as the function's one ``str`` parameter."""

    def __init__(self, name: str, param: str, fmt: InputFormat) -> None:
        self.name = name
        self.param = param
        self.fmt = fmt

    def bind(self, arguments: Any) -> tuple[dict[str, Any] | None, list[str]]:
        if type(arguments) is not str:
            return None, [f"(input): must be text, got {type(arguments).__name__}"]
        error = self.fmt.check(self.name, arguments, arguments, [])
        if error is not None:
            return None, [error.message]
        return {self.param: arguments}, []


class _SchemaBinder:
    """A raw JSON schema: arguments checked with ``jsonschema``, passed on as keyword arguments."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        import jsonschema

        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        self.validator = cls(schema)  # checked against its metaschema by ``Tool.from_schema``

    def bind(self, arguments: Any) -> tuple[dict[str, Any] | None, list[str]]:
        problems = _object_only(arguments)
        if problems:
            return None, problems
        errors = sorted(self.validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            return None, [
                f"{'.'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in errors
            ]
        return dict(arguments), []


# ----------------------------------------------------------------------------- the Tool


def _function_name(fn: Any) -> str:
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        name = type(fn).__name__
    return name


class ToolOptions(TypedDict, total=False):
    """The options every way of making a tool takes (``tool``, ``Tool.from_function``,
    ``Tool.from_schema``), written once. See :class:`Tool` for what each one means."""

    name: str | None
    description: str | None
    read_only: bool
    timeout: float | None
    confirm: bool
    eager: bool | None
    strict: bool | None
    warm: Callable[[], Any] | None
    cache: float | None
    isolation: Isolation | None


class _DecoratorOptions(ToolOptions, total=False):
    """What ``@tool(...)`` takes besides :class:`ToolOptions`: a raw schema, or a custom tool."""

    parameters: Mapping[str, Any] | None
    custom: bool
    format: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class _Options:
    """:class:`ToolOptions` with their defaults, checked once."""

    name: str | None = None
    description: str | None = None
    read_only: bool = False
    timeout: float | None = None
    confirm: bool = False
    eager: bool | None = None
    strict: bool | None = None
    warm: Callable[[], Any] | None = None
    cache: float | None = None
    isolation: Isolation | None = None

    @classmethod
    def of(cls, options: ToolOptions) -> _Options:
        unknown = set(options) - set(cls.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown tool option(s): {', '.join(sorted(unknown))}")
        made = cls(**options)
        if made.timeout is not None and not made.timeout > 0:
            raise ValueError("timeout must be a positive number of seconds (or None)")
        if made.cache is not None:
            if not made.read_only:
                raise ValueError(
                    "cache= answers a repeated call without running it; only read_only tools may do "
                    "that (a side effect must happen each time it is asked for)"
                )
            if isinstance(made.cache, bool) or not made.cache > 0:
                raise ValueError("cache must be a positive number of seconds (or None)")
        if made.isolation is not None and made.isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be 'thread', 'process' or None, got {made.isolation!r}")
        if made.warm is not None and not callable(made.warm):
            raise TypeError("warm must be a function of no arguments (sync or async), or None")
        if made.eager and (not made.read_only or made.confirm):
            raise ValueError(
                "eager dispatch runs a call before its stream is sealed; only read_only tools that need "
                "no confirmation may do that"
            )
        return made

    def description_or(self, summary: str) -> str:
        return self.description if self.description is not None else summary


class Tool(Generic[_P, _R]):
    """A function the model may call, with its schema, its checks and how it runs.

    Made by :func:`tool` (from a Python function) or :meth:`Tool.from_schema` (from a raw JSON
    schema). Calling the tool calls the function, so a decorated function keeps working as before.

    ``read_only``  the function has no side effects: it may run again after a restart, and it may be
                   dispatched eagerly (``eager``), before the stream that requested it is sealed.
    ``timeout``    seconds the call may run (None: the toolbox's default).
    ``confirm``    the call needs the toolbox's approval callback to say yes first.
    ``strict``     the schema is sent with ``"strict": true``.
    ``cache``      seconds a result of this ``read_only`` tool answers the same call (same canonical
                   arguments) again within the run's ledger scope (see ``tools/_cache.py``).
    ``warm``       a function of no arguments (sync or async) run once per toolbox before the first
                   call: its setup overlaps the model's writing (see ``tools/_warm.py``).
    ``isolation``  ``"thread"`` or ``"process"`` (a sync tool run in a worker process, killed at its
                   timeout: see ``tools/_process.py``); None: the toolbox's (``Toolbox(isolation=)``).
    ``reference``  how a worker process finds the function (its module and qualified name).
    """

    def __init__(
        self,
        fn: Callable[_P, _R],
        *,
        name: str,
        description: str,
        parameters: dict[str, Any],
        binder: _Binder,
        strict: bool,
        call_param: str | None = None,
        options: _Options | None = None,
        cancel_param: str | None = None,
        custom: bool = False,
        format: Mapping[str, Any] | None = None,
    ) -> None:
        if not _NAME.match(name):
            raise ValueError(
                f"tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$ (OpenAI rejects other names)"
            )
        opts = options if options is not None else _Options()
        read_only, confirm = opts.read_only, opts.confirm
        self.fn: Callable[_P, _R] = fn
        self.name = name
        self.description = description
        self.parameters = parameters
        self.binder = binder
        self.strict = strict
        self.read_only = read_only
        self.timeout = opts.timeout
        self.confirm = confirm
        self.custom = custom
        """A custom tool (``{"type": "custom"}``): the model writes free text, not JSON arguments,
        and the function receives it as its one ``str`` parameter."""
        self.format: dict[str, Any] | None = None
        """A custom tool's ``format`` as sent (None: free text); a trusted one stays marked
        (``trust_grammar``), so the seal sees the mark in the request."""
        if format is not None:
            self.format = trust_grammar(format) if isinstance(format, TrustedGrammar) else dict(format)
        eager = opts.eager if opts.eager is not None else (read_only and not confirm)
        self.eager = eager and not custom  # a text input is complete only when its stream is sealed
        self.warm = opts.warm
        self.cache = opts.cache
        self.call_param = call_param
        """A parameter annotated ``ToolCall``: it receives the call (its id makes an idempotency key)."""
        self.cancel_param = cancel_param
        """A parameter annotated :class:`~toolstitch.CancelToken`: it receives a fresh token per call,
        cancelled when the result is no longer wanted (see ``tools/_cancel.py``)."""
        self.is_async = is_async_callable(fn)
        self.isolation: Isolation | None = opts.isolation
        """``"thread"``, ``"process"``, or None: the toolbox's (:meth:`Toolbox.isolation_of`)."""
        self.reference = reference_of(fn)
        self.server: str | None = None
        """The MCP server whose tool this is (``Toolbox(mcp=[...])``); None for a Python function."""
        if self.isolation == "process":
            problem = isolation_problem(self)
            if problem is not None:
                raise ValueError(problem)

    def __repr__(self) -> str:
        flags = [f for f in ("custom", "read_only", "confirm", "strict") if getattr(self, f)]
        return f"Tool({self.name!r}{''.join(', ' + f for f in flags)})"

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return self.fn(*args, **kwargs)

    def definition(self) -> dict[str, Any]:
        """The entry of the request's ``tools`` list (a ``ChatCompletionToolParam``; for a custom
        tool a ``ChatCompletionCustomToolParam``, ``{"type": "custom", "custom": {...}}``, which
        ``ts.run(api="responses")`` sends flat, as the Responses API's ``CustomToolParam``)."""
        if self.custom:
            body: dict[str, Any] = {"name": self.name}
            if self.description:
                body["description"] = self.description
            if self.format is not None:
                body["format"] = self.format
            return {"type": "custom", "custom": body}
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = self.parameters
        if self.strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def bind(self, arguments: Any) -> tuple[dict[str, Any] | None, list[str]]:
        """Check parsed arguments: ``(keyword arguments, [])`` or ``(None, problems)``.

        The keyword arguments are what the function will receive (pydantic values, not raw JSON).
        """
        return self.binder.bind(arguments)

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def from_function(cls, fn: Callable[..., Any], **options: Unpack[ToolOptions]) -> Tool:
        """A tool whose schema comes from ``fn``'s type hints and docstring (see :func:`tool`)."""
        opts = _Options.of(options)
        strict = opts.strict
        if isinstance(fn, Tool):
            fn = fn.fn
        summary, param_docs = parse_docstring(inspect.getdoc(fn))
        sig = inspect.signature(fn)
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception:  # unresolvable forward references: fall back to the raw annotations
            hints = {}
        call_param: str | None = None
        cancel_param: str | None = None
        params: list[tuple[str, Any, Any]] = []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(
                    f"{_function_name(fn)}: *args/**kwargs cannot be described to the model; "
                    "name every parameter (or use Tool.from_schema)"
                )
            if p.kind is p.POSITIONAL_ONLY:
                raise TypeError(
                    f"{_function_name(fn)}: positional-only parameter {p.name!r} is not supported"
                )
            annotation = hints.get(p.name, p.annotation)
            if annotation is inspect.Parameter.empty:
                annotation = Any
            if annotation is ToolCall or (
                # an unresolvable string annotation (a local import under PEP 563) naming ToolCall
                isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "ToolCall"
            ):
                call_param = p.name
                continue
            if _is_token(annotation):
                cancel_param = p.name
                continue
            params.append((p.name, annotation, p.default))
        tool_name = opts.name or _function_name(fn)
        if (
            len(params) == 1
            and params[0][2] is inspect.Parameter.empty
            and isinstance(params[0][1], type)
            and issubclass(params[0][1], BaseModel)
        ):
            model: type[BaseModel] = params[0][1]
            binder_model = model
            base_schema = model.model_json_schema()
            if not summary:
                summary = (model.__doc__ or "").strip() if model.__doc__ != BaseModel.__doc__ else ""
            make_binder: Callable[[_NullPlan | None], _Binder] = lambda plan: _ModelBinder(  # noqa: E731
                model, params[0][0], plan
            )
        else:
            fields: dict[str, Any] = {}
            names: dict[str, str] = {}
            for i, (pname, annotation, default) in enumerate(params):
                # Field names are synthetic (the parameter name is the alias), so a parameter called
                # "json", "copy" or "model_config" cannot collide with BaseModel's own attributes.
                fname = f"p{i}"
                names[fname] = pname
                value = ... if default is inspect.Parameter.empty else default
                # Only pass a description we have: Field(description=None) would erase one given
                # in Annotated[..., Field(description=...)].
                info = (
                    Field(value, alias=pname, description=param_docs[pname])
                    if pname in param_docs
                    else Field(value, alias=pname)
                )
                fields[fname] = (annotation, info)
            signature_model = pydantic.create_model(
                tool_name, __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True), **fields
            )
            binder_model = signature_model
            base_schema = signature_model.model_json_schema(by_alias=True)
            make_binder = lambda plan: _SignatureBinder(signature_model, names, plan)  # noqa: E731
        published = strict_schema(base_schema) if strict is not False else None
        if strict and published is None:
            raise ValueError(f"{tool_name}: the parameters cannot be expressed in strict mode")
        if published is not None:
            binder = make_binder(_null_plan(binder_model))
            use_strict = True
        else:
            published = clean_schema(base_schema)
            published.setdefault("additionalProperties", False)
            binder = make_binder(None)
            use_strict = False
        if summary and published.get("description") == summary:
            del published["description"]  # a model's docstring: already the tool's description
        return cls(
            fn,
            name=tool_name,
            description=opts.description_or(summary),
            parameters=published,
            binder=binder,
            strict=use_strict,
            call_param=call_param,
            options=opts,
            cancel_param=cancel_param,
        )

    @classmethod
    def from_definition(
        cls, definition: Mapping[str, Any], fn: Callable[..., Any], **options: Unpack[ToolOptions]
    ) -> Tool:
        """A tool from a request's ``tools`` entry and the function that runs its calls.

        ``openai.pydantic_function_tool(Model)`` gives a definition that keeps ``Model``: the schema
        is sent as that function made it, the arguments are validated by ``Model``, and ``fn``
        receives the ``Model`` instance (its one parameter; a parameter annotated ``ToolCall`` gets
        the call). Any other ``{"type": "function", "function": {...}}`` entry is a raw-schema tool
        (:meth:`from_schema`). ``name``, ``description`` and ``strict`` default to the definition's.
        A custom tool's entry (``{"type": "custom", "custom": {...}}``, or the Responses API's flat
        ``{"type": "custom", "name": ..., "format": ...}``) makes a custom tool
        (:meth:`from_custom`) with its ``format``.
        """
        if isinstance(definition, Mapping) and definition.get("type") == "custom":
            body = definition.get("custom", definition)
            if not isinstance(body, Mapping) or not isinstance(body.get("name"), str):
                raise TypeError("a custom tool definition needs a 'name'")
            custom_options: ToolOptions = {**options}
            custom_options["name"] = options.get("name") or str(body["name"])
            if options.get("description") is None and isinstance(body.get("description"), str):
                custom_options["description"] = str(body["description"])
            return cls.from_custom(fn, format=body.get("format"), **custom_options)
        function = definition.get("function") if isinstance(definition, Mapping) else None
        if not isinstance(definition, Mapping) or definition.get("type", "function") != "function":
            raise TypeError("a tool definition is a mapping {'type': 'function', 'function': {...}}")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise TypeError("a tool definition needs 'function' with a 'name'")
        merged: ToolOptions = {**options}
        name = options.get("name") or str(function["name"])
        description = options.get("description")
        if description is None:
            text = function.get("description")
            description = text if isinstance(text, str) else ""
        strict = options.get("strict")
        if strict is None and isinstance(function.get("strict"), bool):
            strict = bool(function["strict"])
        merged["name"], merged["description"], merged["strict"] = name, description, strict
        parameters = function.get("parameters")
        if parameters is None:
            parameters = {"type": "object", "properties": {}, "additionalProperties": False}
        if not isinstance(parameters, Mapping):
            raise TypeError("the definition's 'parameters' must be a JSON schema object")
        # openai's PydanticFunctionTool: a dict that keeps the model (on "function"; older SDKs: on
        # the definition itself).
        model = getattr(function, "model", None) or getattr(definition, "model", None)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return cls.from_schema(fn, parameters=parameters, **merged)
        opts = _Options.of(merged)
        call_param, params = _split_call_param(fn)
        cancel_param = _token_param(fn)
        params = [p for p in params if p != cancel_param]
        if len(params) != 1:
            raise TypeError(
                f"{_function_name(fn)}: a tool made from pydantic_function_tool({model.__name__}) takes "
                f"one parameter (the {model.__name__} instance), got {len(params)}"
            )
        return cls(
            fn,
            name=name,
            description=description,
            parameters=dict(parameters),
            binder=_ModelBinder(model, params[0], _null_plan(model)),
            strict=bool(strict),
            call_param=call_param,
            options=opts,
            cancel_param=cancel_param,
        )

    @classmethod
    def from_custom(
        cls,
        fn: Callable[..., Any],
        *,
        format: Mapping[str, Any] | None = None,
        **options: Unpack[ToolOptions],
    ) -> Tool:
        """A custom tool: the model writes free text (no JSON), which ``fn`` receives as its one
        ``str`` parameter (besides a ``ToolCall`` or ``CancelToken`` one, as for every tool).

        ``format`` is the Responses API's ``CustomToolInputFormat``: ``{"type": "text"}`` (or None:
        free text), or ``{"type": "grammar", "syntax": "regex" | "lark", "definition": ...}``. A
        call's input is checked against the grammar (a full match) before ``fn`` runs: a regex with
        Rust ``regex`` semantics, a lark grammar with llguidance (``toolstitch[grammars]``). A
        custom tool is never dispatched eagerly (its text is complete only when the stream is
        sealed) and has no strict mode. A format that cannot be read, a grammar its engine does not
        compile, or a lark grammar without llguidance installed raises ``ValueError`` here: no call
        of such a tool could ever run. A format marked with :func:`~toolstitch.trust_grammar` may
        be defined without llguidance: its calls then run unchecked, with the anomaly
        ``grammar_unchecked``.
        """
        opts = _Options.of(options)
        name = opts.name or _function_name(fn)
        if opts.strict:
            raise ValueError(f"{name}: a custom tool takes text; strict mode is for JSON arguments")
        if opts.eager:
            raise ValueError(
                f"{name}: a custom tool's text is complete only when its stream is sealed, so it is "
                "never dispatched eagerly"
            )
        if format is not None and not isinstance(format, Mapping):
            raise TypeError(f"{name}: format must be a mapping (a CustomToolInputFormat), or None")
        fmt = read_format(format)
        if fmt.problem is not None:
            raise ValueError(f"{name}: the format cannot be checked: {fmt.problem}")
        call_param, params = _split_call_param(fn)
        cancel_param = _token_param(fn)
        params = [p for p in params if p != cancel_param]
        try:
            hints = typing.get_type_hints(fn)
        except Exception:
            hints = {}
        if len(params) != 1 or hints.get(
            params[0], inspect.signature(fn).parameters[params[0]].annotation
        ) not in (
            str,
            "str",
        ):
            raise TypeError(
                f"{name}: a custom tool is a function of exactly one str parameter (its text input), "
                f"got {', '.join(params) or 'none'}"
            )
        summary, _ = parse_docstring(inspect.getdoc(fn))
        return cls(
            fn,
            name=name,
            description=opts.description_or(summary),
            parameters={},
            binder=_InputBinder(name, params[0], fmt),
            strict=False,
            call_param=call_param,
            options=opts,
            cancel_param=cancel_param,
            custom=True,
            format=format,
        )

    @classmethod
    def from_schema(
        cls, fn: Callable[..., Any], *, parameters: Mapping[str, Any], **options: Unpack[ToolOptions]
    ) -> Tool:
        """A tool described by a raw JSON schema; arguments are checked with ``jsonschema``.

        The schema is sent as given. ``strict=None`` marks it strict only when it already complies
        with strict mode. The function receives the arguments as keyword arguments. A schema that is not
        valid JSON Schema raises ``ValueError`` here, naming the tool and the part of the schema that
        is wrong (jsonschema's ``SchemaError`` is its ``__cause__``).
        """
        opts = _Options.of(options)
        strict = opts.strict
        schema = dict(parameters)
        name = opts.name or _function_name(fn)
        # A broken schema is a programming error: say so at definition time, naming the tool and the
        # part of the schema that is wrong, in the history check's words (H91), not with jsonschema's
        # dump of its metaschema (kept as the cause).
        problem = schema_error(schema)
        if problem is not None:
            why, exc = problem
            raise ValueError(f"the parameters of tool {name!r} {why}") from exc
        if schema.get("type") != "object":
            raise ValueError(f"the parameters of tool {name!r} must be a JSON schema of type 'object'")
        if strict is None:
            strict = is_strict_schema(schema)
        elif strict and not is_strict_schema(schema):
            raise ValueError(
                "strict=True needs a strict-mode schema: every object closed (additionalProperties false), "
                "every property required, no default"
            )
        summary, _ = parse_docstring(inspect.getdoc(fn))
        return cls(
            fn,
            name=name,
            description=opts.description_or(summary),
            parameters=schema,
            binder=_SchemaBinder(schema),
            strict=strict,
            options=opts,
            cancel_param=_token_param(fn),
        )


def isolation_problem(t: Tool) -> str | None:
    """Why ``t`` cannot run with ``isolation="process"`` (checked when it is made so, and when it
    joins a toolbox whose default is ``"process"``), or None. Whether a worker process can import
    its function is checked when it joins a toolbox (``_process.importable_problem``)."""
    what = f"{t.name}: isolation='process' runs the tool's function in a worker process"
    if t.is_async:
        return (
            f"{what}, and an async def runs on an event loop (cancelled there at its timeout): "
            "make it a sync function, or use isolation='thread'"
        )
    if t.cancel_param is not None:
        return (
            f"{what}, which is killed when the result is no longer wanted, so the tool takes no "
            f"CancelToken: drop the {t.cancel_param!r} parameter (or use isolation='thread')"
        )
    if t.warm is not None:
        return (
            f"{what}, and warm= would prepare this process, not the worker: drop warm= (do that setup "
            "when the tool's module is imported, which the worker does) or use isolation='thread'"
        )
    if t.call_param is not None:
        return (
            f"{what}, and the ToolCall lives in this process: drop the {t.call_param!r} parameter "
            "(take what it needs as arguments) or use isolation='thread'"
        )
    return None


def _is_token(annotation: Any) -> bool:
    """``annotation`` names :class:`CancelToken` (the class, or an unresolved string naming it)."""
    return annotation is CancelToken or (
        isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "CancelToken"
    )


def _token_param(fn: Callable[..., Any]) -> str | None:
    """``fn``'s parameter annotated :class:`CancelToken`, if any."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a callable without a signature takes no token
        return None
    for p in parameters:
        if _is_token(hints.get(p.name, p.annotation)):
            return p.name
    return None


def _split_call_param(fn: Callable[..., Any]) -> tuple[str | None, list[str]]:
    """``fn``'s parameter annotated ``ToolCall`` (if any), and the names of the others."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    call_param = None
    names = []
    for p in inspect.signature(fn).parameters.values():
        annotation = hints.get(p.name, p.annotation)
        if annotation is ToolCall or (
            isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "ToolCall"
        ):
            call_param = p.name
        else:
            names.append(p.name)
    return call_param, names


@overload
def tool(fn: Callable[_P, _R], /) -> Tool[_P, _R]: ...


# A type checker reads the options of the overload below from ``_DecoratorOptions``; help() shows
# the implementation's, spelled out; from there on they travel as one ToolOptions.
@overload
def tool(
    fn: None = None, /, **options: Unpack[_DecoratorOptions]
) -> Callable[[Callable[_P, _R]], Tool[_P, _R]]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    timeout: float | None = None,
    confirm: bool = False,
    eager: bool | None = None,
    strict: bool | None = None,
    parameters: Mapping[str, Any] | None = None,
    warm: Callable[[], Any] | None = None,
    cache: float | None = None,
    isolation: Isolation | None = None,
    custom: bool = False,
    format: Mapping[str, Any] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a function: ``@tool`` or ``@tool(read_only=True, timeout=5, ...)``.

    The schema comes from the type hints and the docstring through pydantic; ``parameters=`` gives a
    raw JSON schema instead (checked with ``jsonschema``). ``strict=None`` uses strict mode when the
    schema allows it. ``eager`` defaults to ``read_only`` (without ``confirm``): ``ts.run`` then
    starts its calls as soon as their arguments are complete and valid, before the stream is sealed
    (``eager=False`` here, or ``run(..., eager=False)``, waits for the seal). Sync and
    ``async def`` functions both work. ``warm=fn`` (no arguments, sync or
    async) prepares what the tool needs (a connection, a client) once per toolbox, while the model
    is still writing: calls wait for it, and one that fails leaves the tool cold, never failing.
    ``cache=seconds`` (``read_only`` tools only) answers a repeated call from its stored result.
    ``isolation="process"`` (a sync tool) runs it in a worker process that is killed at its
    timeout, so the timeout bounds its run (``"thread"``, or None: the toolbox's, ``"thread"`` by
    default; see ``Toolbox(isolation=...)``).
    ``custom=True`` (or a ``format=``, the Responses API's ``CustomToolInputFormat``) makes a
    custom tool: the model writes free text, the function's one ``str`` parameter, checked against
    ``format`` first (see :meth:`Tool.from_custom`).
    """

    # The public signature above spells the options out (for help() and type checkers); from here
    # on they travel as one ToolOptions.
    options: ToolOptions = {
        "name": name,
        "description": description,
        "read_only": read_only,
        "timeout": timeout,
        "confirm": confirm,
        "eager": eager,
        "strict": strict,
        "warm": warm,
        "cache": cache,
        "isolation": isolation,
    }

    def make(f: Callable[..., Any]) -> Tool:
        if custom or format is not None:
            if parameters is not None:
                raise TypeError("a custom tool takes text: parameters= is for JSON arguments")
            return Tool.from_custom(f, format=format, **options)
        if parameters is not None:
            return Tool.from_schema(f, parameters=parameters, **options)
        return Tool.from_function(f, **options)

    if fn is not None:
        return make(fn)
    return make
