"""Make the finished completion's data serialisable to JSON, whatever the provider sent.

The completion is built from what arrived, and what arrives over JSON can still be something that
pydantic cannot write back out: a lone UTF-16 surrogate (valid JSON ``"\\ud83d"``, or an emoji a
proxy cut in two between chunks) and a value nested deeper than pydantic's serialiser goes (it stops
near 255 levels). A ``ChatCompletion`` whose ``model_dump_json()`` raises would break the user's
logging, caching and history later, far from the cause; so the data is repaired once, at the end,
and every repair is reported to the caller (rule 8: a tolerance is visible):

* surrogate pairs split across pieces are recombined into their character (nothing is lost);
* a surrogate that is still alone becomes U+FFFD (it cannot be written as UTF-8 at all);
* a container nested deeper than ``MAX_DEPTH`` is replaced by ``None``.

Linear in the size of the data; containers and strings that need nothing are returned as they are
(no copy).
"""

from __future__ import annotations

from typing import Any

from ..text import has_lone_surrogate, join_surrogate_pairs

MAX_DEPTH = 160
"""Deepest container kept: well under pydantic's serialisation limit (about 255 levels)."""


def valid_unicode(text: str) -> str:
    """``text`` as it can be sent: pairs joined, a lone surrogate as U+FFFD (the rule the finished
    completion's data is held to). An id or item that goes back to a server is written this way
    wherever it is written, so that a call and the message answering it keep one id."""
    return _text(text, set())


def _text(text: str, problems: set[str]) -> str:
    if not has_lone_surrogate(text):
        return text
    joined = join_surrogate_pairs(text)
    if not has_lone_surrogate(joined):
        return joined
    problems.add("a lone UTF-16 surrogate was replaced by U+FFFD")
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _fix(value: Any, depth: int, problems: set[str]) -> Any:
    kind = type(value)
    if kind is str:
        return _text(value, problems)
    if kind is dict or kind is list:
        if depth >= MAX_DEPTH:
            problems.add(f"a value nested deeper than {MAX_DEPTH} levels was dropped")
            return None
        if kind is list:
            items = [_fix(item, depth + 1, problems) for item in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            return items
        fixed = {}
        changed = False
        for key, item in value.items():
            new_key = _text(key, problems) if type(key) is str else key
            new_item = _fix(item, depth + 1, problems)
            changed = changed or new_key is not key or new_item is not item
            fixed[new_key] = new_item
        return fixed if changed else value
    return value


def serialisable(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``data`` with lone surrogates and over-deep values repaired, and what was repaired."""
    problems: set[str] = set()
    fixed = _fix(data, 0, problems)
    return (fixed if type(fixed) is dict else data), sorted(problems)
