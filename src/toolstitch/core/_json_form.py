"""Every event's JSON form: ``event.to_dict()``, written once for the stream events and the run events.

A web handler sends events on (server-sent events, a websocket, a log line), so each event has a
form that ``json.dumps(form, allow_nan=False)`` always accepts, whatever the provider or a tool
produced: ``{"type": "<the class's name in snake_case>", <field>: <its form>, ...}``. Forms:

* a call: ``ToolCall.to_dict()`` (``_call.py``), as the call stands when ``to_dict()`` is called;
* an exception: ``{"type": <class name>, "message": ...}``, plus ``code`` for a call's error;
* an object with ``as_dict()`` (timings, a timeline): that; any other dataclass (a tool's result, a
  step, a run's result, an anomaly): its fields; a pydantic model (the SDK's objects): its JSON dump;
* text: valid Unicode (a lone surrogate becomes U+FFFD, as in the finished completion); a NaN or an
  infinity: the string JSON lacks a number for; an integer too long to print: a marker string; a
  value nested deeper than :data:`MAX_DEPTH`: :data:`TOO_DEEP`; anything else: its ``repr``.

It never raises on a hostile value (rule 9): what cannot be read becomes a marker. ``to_dict()`` reads
the live objects an event carries, so call it when the event arrives (as ``run_events`` hands it
over) to send what stood then.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any, ClassVar

from ..errors import ToolCallError
from ._serialisable import valid_unicode

__all__ = ["MAX_DEPTH", "TOO_DEEP", "JSONForm", "error_form", "event_type", "json_form", "model_fields"]

MAX_DEPTH = 200
"""Deepest container written out: arguments are bounded deeper than this by ``Limits.max_depth``."""
TOO_DEEP = "[nested too deep]"
_MAX_INT_BITS = 10_000
"""Bits of an integer beyond which it is not written as a number: Python refuses to print one of
more than 4,300 digits (``sys.get_int_max_str_digits``), and no JSON reader keeps it exact."""
_WORD = re.compile(r"(?<!^)(?=[A-Z])")


class JSONForm:
    """The base of every event (and of ``ToolCall``): :meth:`to_dict` over the dataclass's fields."""

    __slots__ = ()
    _type_name: ClassVar[dict[type, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        """This event as JSON-safe data: ``{"type": "tool_call_ready", "call": {...}, ...}``."""
        form: dict[str, Any] = {"type": event_type(type(self))}
        if is_dataclass(self):
            for field in fields(self):
                form[field.name] = json_form(getattr(self, field.name))
        return form


def event_type(cls: type) -> str:
    """``ToolCallReady`` → ``"tool_call_ready"`` (computed once per class)."""
    name = JSONForm._type_name.get(cls)
    if name is None:
        name = JSONForm._type_name[cls] = _WORD.sub("_", cls.__name__).lower()
    return name


def json_form(value: Any, depth: int = 0) -> Any:
    """``value`` as data ``json.dumps(..., allow_nan=False)`` accepts (see the module); never raises."""
    try:
        return _form(value, depth)
    except Exception:  # a hostile object's own methods (repr, properties, iteration)
        return _unreadable(value)


def _form(value: Any, depth: int) -> Any:
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        return valid_unicode(str.__str__(value))
    if isinstance(value, int):
        bits = value.bit_length()
        return int(value) if bits <= _MAX_INT_BITS else f"[integer of {bits} bits]"
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if depth >= MAX_DEPTH:
        return TOO_DEEP
    deeper = depth + 1
    if isinstance(value, JSONForm):
        return value.to_dict()
    if isinstance(value, BaseException):
        return error_form(value)
    if isinstance(value, Mapping):
        return {_key(k): json_form(v, deeper) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_form(v, deeper) for v in value]
    as_dict = getattr(type(value), "as_dict", None)
    if callable(as_dict):
        return json_form(as_dict(value), deeper)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_form(getattr(value, f.name), deeper) for f in fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            # Python mode: a NaN stays a float here (JSON mode would write null), and is spelt below.
            return json_form(dump(mode="python", by_alias=True, warnings=False), deeper)
        except Exception:  # too deep for pydantic, or a model that cannot dump itself: its fields
            return json_form(model_fields(value), deeper)
    return valid_unicode(repr(value))


def _key(key: Any) -> str:
    return valid_unicode(key if type(key) is str else str(key))


def model_fields(model: Any) -> dict[str, Any]:
    """A pydantic model's fields and extra fields, read without serialising (for a model too deep
    for pydantic, or one that cannot dump itself; ``recording/_plain.py`` reads models so too)."""
    found = {k: v for k, v in vars(model).items() if not k.startswith("_")}
    extra = getattr(model, "__pydantic_extra__", None)
    if isinstance(extra, dict):
        found.update(extra)
    return found


def error_form(error: BaseException) -> dict[str, Any]:
    """``{"type": <class name>, "message": ...}``, with ``code`` for a call's error."""
    form: dict[str, Any] = {"type": type(error).__name__}
    if isinstance(error, ToolCallError):
        form["code"] = json_form(error.code)
    try:
        form["message"] = valid_unicode(str(error))
    except Exception:  # an exception whose __str__ fails
        form["message"] = f"<{type(error).__name__}>"
    return form


def _unreadable(value: Any) -> str:
    return f"<{type(value).__name__}>"
