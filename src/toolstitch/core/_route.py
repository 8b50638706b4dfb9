"""Routing fragments to calls: which call a fragment belongs to, and what it writes there.

The chat reader (``Accumulator._read_fragment``) reads each ``delta.tool_calls`` entry; this
module decides, per choice, which :class:`~._call.ToolCall` each fragment continues or opens
(:func:`resolve_call`) and what argument text it adds (:func:`argument_text`). It writes no call:
the owner does (``_owner.py``).

Rules enforced here (numbers refer to ``docs/design.md``):

* **Key by index** (1). A fragment joins the call its ``index`` names. When ``index`` is missing or
  unusable (Gemini, Mistral, Ollama, Bedrock's ``-1``) a fragment with a new id opens a call and one
  without an id continues the latest call. An index reused for a different call (a different
  non-empty id, or a different name after the call's value is complete, or a name and a new ``{``)
  opens a new call; an exact resend of the complete value does not.
* **One call, never a silently split one** (Mistral, issue 10). A further complete JSON value with no
  id and no name at an index whose value was complete stays in the same call, appended as text, and
  refuses the call at seal (``further_json_value``): the later value contradicts the first.
* **Written once** (Q07-Q10, Q13-Q15). ``id``, ``function.name`` and ``type`` are set from the first
  usable value and never appended. A name that arrives in pieces before any argument text is joined;
  an id that changes while the arguments are still streaming is replaced (Poolside).
* **Cumulative resends** (Q17) are detected without ever misreading a standard stream (see
  :func:`argument_text`).

The only per-choice state is :class:`CallTable` (the maps from index and id to calls, and the last
fragment of a call while it may still turn out to be a cumulative resend).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from ._anomaly import Anomaly, AnomalyCode, note, show
from ._call import ToolCall, has_lone_surrogate, is_whole_text
from ._owner import CallOwner

__all__ = [
    "FURTHER",
    "NEW_ID",
    "SKIP",
    "CallTable",
    "argument_text",
    "ensure_ids",
    "open_call",
    "resolve_call",
]

SKIP = -1
"""The index :func:`resolve_call` returns for a fragment that must not open a call."""


class _Chain:
    """Where the last argument fragment of a call that may be a cumulative resender (Q17) is.

    Each fragment of a cumulative provider repeats all the text so far, so it starts with the
    previous fragment. Tracking stops at the first fragment that does not (every standard stream,
    usually at its second fragment), so the check costs nothing afterwards. Only the fragment's
    length is kept: the fragment itself is the tail of the call's text (appended as it came while
    the chain is ambiguous; the whole text once it latched), so routing keeps no byte of its own
    (rule 9: every byte kept counts against ``Limits``).
    """

    __slots__ = ("latched", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        """Characters of the call's last fragment; -1 until its first text."""
        self.latched = False

    def last(self, call: ToolCall) -> str:
        """The call's last fragment (its text's tail)."""
        return call.text_from(max(call.chars - self.size, 0))


class CallTable:
    """Per-choice bookkeeping that maps fragments to calls: by index, by id, and the latest call."""

    __slots__ = ("by_id", "by_index", "calls", "chains", "custom", "max_index", "refused")

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.by_index: dict[int, ToolCall] = {}
        self.by_id: dict[str, ToolCall] = {}
        self.max_index = -1
        self.chains: dict[int, _Chain] = {}
        """Per call slot, while the call may still turn out to resend its arguments cumulatively."""
        self.refused = 0
        """Fragments that would have opened a call beyond ``Limits.max_calls_per_choice`` (counted only)."""
        self.custom = False
        """A fragment of a custom tool's call arrived: every later fragment takes the long way,
        where its shape is held to its call's type (``_accumulator._type_clash``)."""


def _starts_new_value(arguments: str | None) -> bool:
    return bool(arguments) and arguments.lstrip().startswith("{")  # type: ignore[union-attr]


def _is_resend(call: ToolCall, text: str | None) -> bool:
    """True when ``text`` is exactly the call's argument text so far."""
    return text is not None and is_whole_text(call, text)


def _mid_value(call: ToolCall) -> bool:
    """True while the call's arguments have started and their top-level value is still open."""
    if call.status != "open":
        return False
    scanner = call.scanner
    return scanner.started and not scanner.complete and scanner.error is None


FURTHER = 1
"""Flag from :func:`resolve_call`: a further JSON value for a call whose value was complete (Mistral)."""
NEW_ID = 2
"""Flag from :func:`resolve_call`: the fragment's id replaces the call's id (Q15)."""


def resolve_call(
    table: CallTable,
    index: int | None,
    fid: str | None,
    name: str | None,
    arguments: str | None,
    empty: bool,
    choice: int,
    raw: Any,
    anomalies: list[Anomaly],
) -> tuple[ToolCall | None, int, int]:
    """Find the call a fragment belongs to.

    ``index``, ``fid``, ``name`` and ``arguments`` are the fragment's cleaned values; ``empty`` says
    it carries nothing else either (no unknown fields). Returns ``(call, index, flags)``: ``call``
    is None when the fragment opens a new call, which the reader then creates at ``index``;
    ``(None, SKIP, 0)`` when the fragment carries nothing and must not open one. ``flags`` holds
    :data:`FURTHER` and :data:`NEW_ID`. Repairs append to ``anomalies``.

    The scanner is asked only in the cases that need it (a name or a new ``{`` arriving at a call,
    a missing index): a standard continuation costs a dict lookup and three comparisons.
    """
    if index is None:
        return _resolve_unindexed(table, fid, name, arguments, empty, choice, raw, anomalies)
    call = table.by_index.get(index)
    if call is None:
        latest = table.calls[-1] if table.calls else None
        if fid is None and name is None and arguments and latest is not None and _mid_value(latest):
            # Q05 (Nebius, Cerebras): continuation pieces at a new index, without id or name.
            note(anomalies, "index_changed", choice, latest.index, raw, new=index, index=latest.index)
            return latest, latest.index, 0
        if empty and fid is None and name is None and not arguments:
            note(anomalies, "empty_indexed", choice, index, raw, index=index)
            return None, SKIP, 0
        if not table.calls and index > 0:
            note(anomalies, "not_from_zero", choice, index, raw, index=index)
        elif table.calls and index > table.max_index + 1:
            note(anomalies, "gap", choice, index, raw, before=table.max_index, index=index)
        return None, index, 0
    if fid is None:
        if name is None and (not arguments or "{" not in arguments or not _starts_new_value(arguments)):
            return call, index, 0  # the common case: a plain continuation
        if not call.scanner.complete:
            return call, index, 0
        if name is not None and call.name is not None and name != call.name:
            note(anomalies, "reused_name", choice, index, raw, new=name, index=index, old=call.name)
            return None, index, 0
        if _starts_new_value(arguments) and not _is_resend(call, arguments):
            if name is not None:
                # A call header (a name) with a new value: the provider announced a new call.
                note(anomalies, "reused_value", choice, index, raw, new=name, index=index)
                return None, index, 0
            # No id, no name: nothing says this is another call. Splitting it off would leave the
            # first value ready although the provider went on to contradict it (hosted Mistral).
            note(anomalies, "further_value", choice, index, raw, index=index)
            return call, index, FURTHER
        return call, index, 0
    if fid == call.id:
        return call, index, 0
    other = table.by_id.get(fid)
    if other is not None:
        if other.index == index:
            # Calls sharing an index (Q02), interleaved, told apart by their ids.
            return other, index, 0
        # The id belongs to a call at another index: ids are not unique (Q39, TGI's "0").
        # The index wins (rule 1); the duplicate id is replaced when the message is built.
        return call, index, 0
    if call.id is None:
        return call, index, 0  # the id arrives after the call opened (Q11, Q12)
    if name is None and _mid_value(call):
        # Q15 (Poolside): the id changes while the arguments are still streaming.
        table.by_id.setdefault(fid, call)
        return call, index, NEW_ID
    note(anomalies, "reused_id", choice, index, raw, new=fid, index=index, old=call.id)
    return None, index, 0


def _resolve_unindexed(
    table: CallTable,
    fid: str | None,
    name: str | None,
    arguments: str | None,
    empty: bool,
    choice: int,
    raw: Any,
    anomalies: list[Anomaly],
) -> tuple[ToolCall | None, int, int]:
    """No usable index (Q01, Q06, Q37): by id, then by position."""
    next_index = table.max_index + 1
    if fid is not None:
        known = table.by_id.get(fid)
        if known is None:
            note(anomalies, "new_by_id", choice, next_index, raw)
            return None, next_index, 0
        if _starts_new_value(arguments) and known.scanner.complete and not _is_resend(known, arguments):
            note(anomalies, "new_after_complete", choice, next_index, raw)
            return None, next_index, 0
        note(anomalies, "by_id", choice, known.index, raw)
        return known, known.index, 0
    latest = table.calls[-1] if table.calls else None
    if latest is None:
        if empty and name is None and not arguments:
            note(anomalies, "empty_unindexed", choice, next_index, raw)
            return None, SKIP, 0
        note(anomalies, "opened", choice, next_index, raw)
        return None, next_index, 0
    name_differs = name is not None and latest.name is not None and name != latest.name
    complete = latest.scanner.complete
    new_value = complete and _starts_new_value(arguments) and not _is_resend(latest, arguments)
    opens_new = (
        name_differs
        or (new_value and name is not None)
        or (complete and name is not None and latest.name is not None and not arguments)
    )
    if opens_new:
        note(anomalies, "opened_new", choice, next_index, raw)
        return None, next_index, 0
    flags = 0
    if new_value:
        # A further value with no id, no name and no index: the same call, refused (as above).
        note(anomalies, "further_value", choice, latest.index, raw, index=latest.index)
        flags = FURTHER
    note(anomalies, "continued", choice, latest.index, raw)
    return latest, latest.index, flags


def open_call(table: CallTable, owner: CallOwner, choice: int, index: int, t: float, watch: bool) -> ToolCall:
    """Open a new call at ``index`` (as :func:`resolve_call` said), by the owner, and enter it in
    the table. ``watch``: the call may turn out to resend its text cumulatively (Chat Completions),
    so its chain starts now and its first text is routed (a choice with a chain takes no
    shortcut: the readers' hot exits need no call's state to know a call's first text)."""
    call = owner.open(choice, index, len(table.calls), t)
    if watch:
        table.chains[call.slot] = _Chain(-1)
    table.calls.append(call)
    table.by_index[index] = call
    if index > table.max_index:
        table.max_index = index
    return call


def ensure_ids(
    calls: list[ToolCall], basis: str, unsendable: bool = True
) -> Iterator[tuple[ToolCall, str, Anomaly]]:
    """The calls of one message (``calls`` in message order) that need an id: none usable arrived
    (none, or, with ``unsendable``, one holding a lone surrogate, which no request can carry
    back), or another call of the message already holds theirs. Yields ``(call, made id, anomaly)``; the
    owner writes the id (``CallOwner.give_id``). An id the server sent that is unique in its
    message is never replaced, however long (``Limits.max_id_chars`` bounds it).

    A valid history needs one. A made id is unique within the message (the slot) and, in practice,
    across turns (``basis``: the completion id, or for providers that send none, its time, model
    and choice; plus the call's name and arguments), so that idempotency by call id never mistakes
    a later turn's call for an earlier one. ``surrogatepass``: a name or id holding a lone
    surrogate must not make this fail.
    """
    seen: set[str] = set()
    for call in calls:
        cid = call.id
        if cid is not None and cid not in seen and not (unsendable and has_lone_surrogate(cid)):
            seen.add(cid)
            continue
        code = AnomalyCode.CALL_ID_REUSED if cid is not None and cid in seen else AnomalyCode.ID_SYNTHESIZED
        text = f"{basis}:{call.slot}:{call.name or ''}:{call.arguments}"
        made = "call_ts" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        seen.add(made)
        yield call, made, Anomaly(code, f"id {show(cid)} unusable; synthesized {made!r}", raw=cid)


def _object_start_breaks(call: ToolCall) -> bool:
    """True when a ``{`` appended to the call's text so far could not be part of valid JSON.

    ``{`` may follow only inside a string or where a value is expected (after ``:``, ``[``, or a
    ``,`` inside an array). Anywhere else (after ``{``, a key, a value, a ``,`` in an object, the
    closed top-level value) the text is certainly broken if read as a plain continuation.
    """
    scanner = call.scanner
    if scanner.error is not None or scanner.complete:
        return True
    if scanner.in_string:
        return False
    tail = call.arguments.rstrip()
    if not tail:
        return False
    last = tail[-1]
    return not (last in ":[" or (last == "," and scanner.in_array))


def argument_text(
    table: CallTable,
    call: ToolCall,
    text: str,
    replace: bool,
    further: bool,
    raw: Any,
    anomalies: list[Anomaly],
) -> tuple[str | None, bool]:
    """The text to add to ``call`` (non-empty ``text`` from one fragment) and whether it replaces
    the existing text (``replace``: the fragment sent the arguments whole, as an object).

    Cumulative resends (Q17: each fragment repeats all the text so far, then some) are detected
    by a chain: while every fragment starts with the previous one, the call *may* be cumulative.
    The switch happens only when reading the fragment as a plain continuation could not be valid
    JSON (:func:`_object_start_breaks`), so a standard stream is never misread, however its text
    happens to be cut (``{"`` then ``{": 1}`` is the key ``"{"``). Until then fragments are
    appended as usual; at the switch the call's text is replaced by the latest full text, and from
    then on only what each fragment adds is appended. A standard stream leaves the chain at its
    second fragment, so the check costs one dict lookup afterwards.

    A sealed call never changes: an exact resend of its text is dropped (noted), anything else is
    handed on, and the reader refuses it as a late fragment. A further value (``further``) is
    appended as it came: the call keeps everything that arrived, and is refused at seal.
    """
    if call.status != "open":
        return text, False  # the owner's table decides (an exact resend of a sealed text is dropped)
    chains = table.chains
    slot = call.slot
    chain = chains.get(slot) if chains else None
    if further or replace:
        if chain is not None:
            del chains[slot]
        if replace and _is_resend(call, text):
            return None, False
        return text, replace
    if chain is None:
        return text, False
    if chain.size < 0:  # the call's first text: watched from here on
        chain.size = len(text)
        return text, False
    last = chain.last(call)
    if chain.latched:
        if len(text) >= len(last) and text.startswith(last):
            chain.size = len(text)
            return text[len(last) :] or None, False
        if last.startswith(text):
            return None, False  # a shorter resend: nothing new
        del chains[slot]  # the provider stopped resending: plain pieces from here on
        return text, False
    if len(text) < len(last) or not text.startswith(last) or not text.lstrip().startswith("{"):
        del chains[slot]  # a standard stream: stop checking this call
        return text, False
    if not _object_start_breaks(call):
        chain.size = len(text)  # still ambiguous: read as a plain piece for now
        return text, False
    chain.latched = True
    chain.size = len(text)
    note(anomalies, "cumulative", call.choice, call.index, raw)
    if call.chars == len(last):
        return text[len(last) :] or None, False
    # Earlier resends were appended while still ambiguous: start over from the full text.
    return text, True
