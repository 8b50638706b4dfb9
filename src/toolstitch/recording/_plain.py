"""Plain JSON data from whatever a request, a chunk or a report holds: one conversion, bounded.

The recorder writes request parameters (pydantic models, classes, timeouts, SDK sentinels) and the
reports print completions and calls; both need plain data that ``json.dumps`` always accepts. A
provider controls part of that data, so the conversion is bounded: nesting deeper than
:data:`MAX_DEPTH` becomes the marker :data:`TOO_DEEP` (Python's own recursion limit is about
1,000 frames, and pydantic refuses to serialise deeper than a few hundred), and with
``finite=True`` a NaN or an infinity becomes the string JSON lacks a number for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..core import model_fields

__all__ = ["MAX_DEPTH", "TOO_DEEP", "is_sentinel", "plain"]

MAX_DEPTH = 100
TOO_DEEP = "[nested too deep]"


def is_sentinel(value: Any) -> bool:
    """The SDK's ``NOT_GIVEN`` / ``omit``: a parameter that was not given."""
    return type(value).__name__ in ("NotGiven", "Omit")


def plain(value: Any, *, finite: bool = False, depth: int = 0) -> Any:
    """``value`` as plain JSON data: dicts with string keys, lists, strings, numbers, booleans, None.

    Pydantic models are dumped (or, when they refuse, walked field by field), classes become their
    qualified name, SDK sentinels are left out of mappings, anything else becomes its ``repr``.
    """
    if depth > MAX_DEPTH:
        return TOO_DEEP
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, float):
        if finite and not math.isfinite(value):
            return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return value
    deeper = depth + 1
    if isinstance(value, Mapping):
        return {str(k): plain(v, finite=finite, depth=deeper) for k, v in value.items() if not is_sentinel(v)}
    if isinstance(value, (list, tuple)):
        return [plain(v, finite=finite, depth=deeper) for v in value]
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return plain(dump(mode="json", warnings=False), finite=finite, depth=deeper)
        except Exception:  # too deep for pydantic, or a model that cannot serialise itself
            return plain(model_fields(value), finite=finite, depth=deeper)
    return repr(value)
