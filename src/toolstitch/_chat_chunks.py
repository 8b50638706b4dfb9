"""The chat-completion chunks a scripted "model" sends: :func:`~toolstitch.testing.chunk` and
:func:`~toolstitch.testing.tool_call_chunks`, re-exported by ``toolstitch.testing``.

Its own module because the builders are the half of the local test server (``testing.py``) a test
uses without a server at all (``ts.stitch(tool_call_chunks(...))``). Like the server, it imports
nothing of toolstitch. :func:`split_evenly` and :func:`round_robin` also cut and order the
Responses API events (``_response_events.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

_T = TypeVar("_T")


def chunk(
    *,
    choices: list[dict[str, Any]] | None = None,
    delta: Mapping[str, Any] | None = None,
    finish_reason: str | None = None,
    index: int = 0,
    usage: Mapping[str, Any] | None = None,
    id: str = "chatcmpl-test",
    model: str = "test-model",
    created: int = 1700000000,
    **extra: Any,
) -> dict[str, Any]:
    """Build one well-formed ``chat.completion.chunk`` dict.

    With ``choices=None`` a single choice is built from ``delta``/``finish_reason``/``index``;
    pass ``choices=[]`` with ``usage`` for the usage-only final chunk OpenAI sends. ``extra`` keys
    are added at the top level (e.g. ``system_fingerprint`` or a provider's unknown field).
    """
    if choices is None:
        choices = [dict(index=index, delta=dict(delta or {}), logprobs=None, finish_reason=finish_reason)]
    out: dict[str, Any] = dict(id=id, object="chat.completion.chunk", created=created, model=model)
    out["choices"] = choices
    if usage is not None:
        out["usage"] = dict(usage)
    out.update(extra)
    return out


def split_evenly(text: str, n: int) -> list[str]:
    """Cut ``text`` into at most ``n`` non-empty pieces at even character offsets (inside strings,
    escapes or numbers alike: a realistic stream does not respect JSON tokens)."""
    n = max(1, n)
    bounds = [round(k * len(text) / n) for k in range(n + 1)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def round_robin(groups: Sequence[Sequence[_T]]) -> list[_T]:
    """The members of ``groups`` taken in turns, one of each group a round (parallel calls whose
    fragments interleave); a group that ran out is passed over."""
    width = max((len(group) for group in groups), default=0)
    return [group[k] for k in range(width) for group in groups if k < len(group)]


def tool_call_chunks(
    calls: Sequence[tuple[str, str, str]],
    *,
    pieces: int = 3,
    interleave: bool = True,
    finish_reason: str | None = "tool_calls",
    content: str | None = None,
    usage: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """A realistic OpenAI-style tool-call stream for ``calls = [(id, name, arguments_text), ...]``.

    Order: a role chunk (plus one content chunk when ``content`` is given); per call a header
    fragment (``index``, ``id``, ``type``, ``function.name``, ``arguments: ""``) then its arguments
    in ``pieces`` pieces; with ``interleave`` the fragments of parallel calls alternate
    round-robin; then a chunk with ``finish_reason``; then a usage chunk with empty ``choices`` when
    ``usage`` is given.
    """
    out = [chunk(delta={"role": "assistant", "content": "" if content else None})]
    if content:
        out.append(chunk(delta={"content": content}))
    per_call: list[list[dict[str, Any]]] = []
    for i, (call_id, name, arguments) in enumerate(calls):
        header = {"index": i, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        parts = [{"index": i, "function": {"arguments": p}} for p in split_evenly(arguments, pieces)]
        per_call.append([header, *parts])
    fragments = round_robin(per_call) if interleave else [frag for f in per_call for frag in f]
    out.extend(chunk(delta={"tool_calls": [frag]}) for frag in fragments)
    out.append(chunk(delta={}, finish_reason=finish_reason))
    if usage is not None:
        out.append(chunk(choices=[], usage=usage))
    return out
