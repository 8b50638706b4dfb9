"""Helpers that more than one of the builders, the validator and repair use.

They live here, not in one of those modules, so that none of the three has to import another's
internals: reading input the way the SDK sends it (:func:`to_plain`), the ``tool_calls`` of a
message, the ``_MISSING`` sentinel, the shape of a tool message (``_tool_dict``), which both
:func:`~toolstitch.history.tool_message` and repair's inserted results must agree on, and the record
both repairs keep of each message or item (:class:`Repairing`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

import pydantic

from ._dialects import Dialect

Message = dict[str, Any]


@dataclass
class Repairing:
    """A message or input item being repaired: its copy (``value``), where it came from (``src``;
    None for one repair inserted), where it went (``out``) and whether it was dropped. Chat repair
    (``_repair.py``) uses it as it is; Responses repair (``_repair_input.py``) adds what it moves
    around an item."""

    value: Any
    src: int | None
    out: int | None = None
    dropped: bool = False


class _Missing(Enum):
    """A key a message lacks (``m.get(key, _MISSING)``: ``None`` is a value there), or a result the
    caller did not give (``tool_message(call)``: ``None`` is a result)."""

    MISSING = "missing"


_MISSING: Final = _Missing.MISSING

#: How deep :func:`to_plain` copies. Below this, values are kept by reference, uncopied: nothing in
#: this package reads or changes anything that deep (a message's fields are at depth 1, a call's
#: function at depth 3), and no JSON encoder could send such a value anyway. It bounds the work a
#: self-referencing structure can cause.
COPY_DEPTH = 10_000

_LEAF = (str, int, float, bool, type(None))

# ------------------------------------------------------------------------- reading input


def _model_fields(model: pydantic.BaseModel) -> Any:
    """A model as plain data, the way the SDK sends it (``exclude_unset``, ``__api_exclude__``).

    pydantic's own dump is the fast, exact path; it refuses values nested deeper than its
    serialisation limit (a provider field nested a few hundred levels), so such a model is read one
    level at a time instead, its fields handed back to :func:`to_plain` to walk without recursion.
    """
    exclude = getattr(model, "__api_exclude__", None)
    try:
        return model.model_dump(mode="json", exclude_unset=True, exclude=exclude, warnings=False)
    except (ValueError, RecursionError):  # pydantic's depth limit, or Python's
        pass
    skip = set(exclude or ())
    fields_set = model.model_fields_set
    out = {k: v for k, v in vars(model).items() if k in fields_set and k not in skip}
    out.update({k: v for k, v in (model.__pydantic_extra__ or {}).items() if k not in skip})
    return out


def to_plain(value: Any) -> tuple[Any, int]:
    """``(data, depth)``: plain JSON-like data from dicts, lists and SDK models, and how deeply
    nested it is (a scalar is 0, ``{}`` is 1).

    The result is a fresh copy down to :data:`COPY_DEPTH` (mappings become dicts, tuples lists;
    other values are kept as they are), so callers may change it without touching the input. It
    walks with an explicit stack, never recursion, so a value nested 900 levels deep costs what its
    size costs and raises nothing. A container that contains itself is kept by reference where it
    recurs, and counts as deeper than :data:`COPY_DEPTH`.
    """
    if isinstance(value, _LEAF):
        return value, 0
    root: list[Any] = [None]
    deepest = 0
    on_path: set[int] = set()
    # (parent, key, value, depth); an entry whose parent is None closes the container in its key.
    stack: list[tuple[Any, Any, Any, int]] = [(root, 0, value, 1)]
    while stack:
        parent, key, item, depth = stack.pop()
        if parent is None:
            on_path.discard(id(key))
            continue
        if isinstance(item, pydantic.BaseModel):
            item = _model_fields(item)
        if not isinstance(item, Mapping | list | tuple):
            parent[key] = item
            continue
        if depth > COPY_DEPTH or id(item) in on_path:
            parent[key] = item
            deepest = COPY_DEPTH + 1
            continue
        deepest = max(deepest, depth)
        on_path.add(id(item))
        stack.append((None, item, None, 0))  # holds ``item``, so its id is not reused meanwhile
        if isinstance(item, Mapping):
            out: Any = dict.fromkeys(item)
            children: Any = item.items()
        else:
            out = [None] * len(item)
            children = enumerate(item)
        parent[key] = out
        for k, v in children:
            if isinstance(v, _LEAF):
                out[k] = v
            else:
                stack.append((out, k, v, depth + 1))
    return root[0], deepest


def _plain(value: Any) -> Any:
    """:func:`to_plain` without the depth, for callers that only read shallow fields."""
    return to_plain(value)[0]


def _tool_calls(message: Mapping[str, Any]) -> list[Any]:
    """The message's tool calls when it is an assistant message with a non-empty list, else []."""
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    return calls if isinstance(calls, list) else []


# --------------------------------------------------------------------------- tool messages


def _tool_dict(call_id: str, content: str, name: str | None, d: Dialect) -> Message:
    out: Message = {"role": "tool", "tool_call_id": call_id, "content": content}
    if d.tool_message_name and name:
        out["name"] = name
    return out
