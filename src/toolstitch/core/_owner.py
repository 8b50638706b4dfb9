"""The owner of a call's life: its states, the events each allows, and what each event does.

Rule 12 of docs/design.md: this module is the only writer of a call's state (a
:class:`~._call.ToolCall`, which users see read-only). The readers of both APIs
(``Accumulator._read`` for chunks, ``_responses.py`` for Responses events) only translate wire
shapes into the events below, through :class:`CallOwner`; routing (which call a fragment belongs
to) stays in ``_route.py``. Modelled on h11's ``h11/_state.py``: the table is data, and an event
the table does not list for a state refuses the call
(:class:`~toolstitch.errors.TransitionRefused`); nothing passes silently.

The table is :data:`TRANSITIONS`: each cell names its action and the state that follows it, and
docs/design.md shows it as :func:`render_table` writes it. Every event is one column with one
payload type (:class:`Row`), and every action has one signature (:class:`Action`): it returns an
error to refuse the call, which then goes to ``invalid`` whatever its cell says. The states:
``open``; ``stated`` (the server stated the whole text); ``refused`` (refused while it streams:
``invalid`` announced, its text still kept until the seal); ``ready``, ``invalid`` and
``incomplete`` (``_call.py`` names them; users see the first three as ``"open"``).

* **fragment**: a piece of argument text; **resent**: the whole text so far, sent again (it
  replaces the text). Appended to an open call (the hot transition: one dictionary hit, one
  append, one counter), every byte counted against ``Limits`` (the call's
  ``max_argument_bytes`` and the stream's ``max_stream_bytes``). After the text was stated, or
  the call was sealed, any text refuses it, whitespace included: the text that was checked is the
  text that runs.
* **identity**: ``id``, ``name``, ``type``, unknown fields. Written once, from the first usable
  value; a name arriving in pieces before any argument text is joined; a later different value is
  noted, never written. A sealed call's identity is frozen. An id longer than
  ``Limits.max_id_chars`` refuses the call; an id the server sent is never replaced.
* **statement**: the whole text stated by the server (the Responses API's ``.done``, its
  ``output_item.done`` and final output). With no text streamed, the statement is adopted as the
  text; otherwise it must equal it, or the call is refused. Either way the text is frozen.
* **verdict**: the text so far can no longer become valid for the call's tool (``text/_early.py``:
  only certain verdicts, asked while events are read). The call is refused at once
  (``ToolCallInvalid`` now, ``error`` set) and can never be ``ready``; it keeps its text as it
  arrives and is sealed ``invalid`` (the seal's error, with every reason, replaces the first), or
  left ``incomplete`` like any open call when the input ends first.
* **finish**: the choice (or response) finished: parse once, strictly, check against the request
  (``_seal.CallChecks``), then ``ready`` or ``invalid``.
* **limit**, **fault**: a bound was exceeded, or toolstitch or the wire failed on something that
  touched the call: ``invalid``, with a bounded sample of the text.
* **end**: the input ended before the call was sealed: ``incomplete``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypedDict, TypeVar, cast

from ..errors import (
    CallIncomplete,
    LateFragment,
    LimitExceeded,
    MissingName,
    SchemaViolation,
    ToolCallError,
    TransitionRefused,
)
from ..text import EarlyCheck, JSONScanner, has_lone_surrogate, parse_arguments, parse_input
from ._anomaly import Anomaly, AnomalyCode, note, show
from ._call import (
    _BATCH,
    CUSTOM,
    INCOMPLETE,
    INVALID,
    MAX_NAME,
    NOTHING_EARLY,
    OPEN,
    READY,
    REFUSED,
    STATED,
    STATUS,
    UNREAD,
    Early,
    ToolCall,
    is_whole_text,
    text_size,
)
from ._events import ArgumentsComplete, ArgumentsMalformed, ToolCallInvalid, arguments_delta
from ._limits import Limits

if TYPE_CHECKING:
    from ._events import Event
    from ._seal import CallChecks

__all__ = [
    "EVENTS",
    "TRANSITIONS",
    "CallOwner",
    "Cell",
    "Ending",
    "Finish",
    "Fragment",
    "Identity",
    "Row",
    "Statement",
    "render_table",
]

EVENTS = ("fragment", "resent", "identity", "statement", "verdict", "finish", "limit", "fault", "end")
"""The table's columns, each an event with one payload type (:class:`Row`)."""


# -- the events: one typed payload per column ------------------------------------------------------

Fragment = tuple[str, Any, bool]
"""The payload of ``fragment`` and ``resent``: ``(text, raw, events)``, the argument text (for
``resent``, the whole text so far, sent again), the wire piece it came in (for the anomalies it
causes) and whether events are read (``events``, the switch ``feed(events=...)`` names: build
``ArgumentsDelta``, ask the scanner and the
early check). A plain tuple, not a class: most chunks of a stream build one, on the hot path."""


class Identity(NamedTuple):
    """The payload of ``identity``: what one piece says of who the call is. ``new_id``: the router
    read the piece as the call's id changing mid-arguments (kept, and noted)."""

    id: str | None
    name: str | None
    type: str | None
    extra: dict[str, Any] | None
    new_id: bool = False
    raw: Any = None


class Statement(NamedTuple):
    """The payload of ``statement``: the server stated the call whole (``where`` names the event).
    ``text`` None: the text is final as it stands. ``adopt=False``: the statement may not supply
    text that never streamed (the reader knows text may have gone astray)."""

    text: str | None
    name: str | None
    id: str | None
    where: str
    adopt: bool = True
    raw: Any = None


class Finish(NamedTuple):
    """The payload of ``finish``: when, the request's checks, and whether the call is its choice's
    first (``parallel_tool_calls=False`` allows only that one)."""

    t: float
    checks: CallChecks
    first: bool


class Ending(NamedTuple):
    """The payload of ``end``: why the input ended before the call was sealed, and when (None:
    now)."""

    reason: str
    t: float | None = None


P = TypeVar("P", contravariant=True)
Refusal = ToolCallError | None
"""What an action returns: the error that refuses the call, or None."""


class Action(Protocol[P]):
    """What a cell does: every action has this one signature. It returns an error to refuse the
    call (the owner then makes it ``invalid`` and announces it on ``out``), or None, and the call
    goes to the cell's next state."""

    def __call__(self, owner: CallOwner, call: ToolCall, event: P, out: list[Event], /) -> Refusal: ...


@dataclass(frozen=True, slots=True)
class Cell(Generic[P]):
    """One cell of the table: its action (None: nothing happens) and the state that follows it
    (None: the call stays where it is). An action that refuses the call sends it to ``invalid``
    instead, whatever the cell says."""

    action: Action[P] | None
    to: str | None = None


NOTHING: Cell[Any] = Cell(None)
"""A cell in which the event changes nothing (a sealed call hears of it, and that is all)."""


class Row(TypedDict):
    """A state's row: each event (a column) with its payload's type."""

    fragment: Cell[Fragment]
    resent: Cell[Fragment]
    identity: Cell[Identity]
    statement: Cell[Statement]
    verdict: Cell[ToolCallError]
    finish: Cell[Finish]
    limit: Cell[ToolCallError]
    fault: Cell[ToolCallError]
    end: Cell[Ending]


# -- the owner ------------------------------------------------------------------------------------


def _clip(text: str, limit: int = 500) -> str:
    """``text`` cut to ``limit`` characters (an error message can list every schema problem)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _note(owner: CallOwner, call: ToolCall, raw: Any, what: str, /, **values: Any) -> None:
    """Note ``what`` (a key of ``_anomaly.NOTES``) for ``call``, for the reader to record."""
    note(owner.notes, what, call._choice, call._index, raw, **values)


def _move(call: ToolCall, phase: str) -> None:
    """Enter ``phase``: the state, the status users see, and the table's row for it."""
    call._phase = phase
    call._status = STATUS[phase]
    call._row = TRANSITIONS[phase]


def _to_invalid(call: ToolCall, error: ToolCallError, out: list[Event]) -> None:
    """A refusal: ``invalid`` with ``error``, announced (an executor acting on ``ToolCallReady`` must
    hear that the call must not run after all)."""
    if call._status == "open" and call._metrics.sealed_at is None:
        call._metrics.sealed_at = call._clock()
    call._error = error
    _move(call, INVALID)
    out.append(ToolCallInvalid(call, error))


def _step(owner: CallOwner, call: ToolCall, cell: Cell[P], event: P, out: list[Event]) -> bool:
    """Apply one cell: its action, then its next state, or ``invalid`` when the action refused the
    call. False when the cell says nothing happens."""
    action = cell.action
    if action is None:
        return False
    error = action(owner, call, event, out)
    if error is not None:
        _to_invalid(call, error, out)
    elif cell.to is not None:
        _move(call, cell.to)
    return True


def _keep_sample(call: ToolCall, extra: str) -> str:
    """Keep only a bounded sample of the call's text (plus ``extra``): a refused call must not hold
    megabytes (every byte kept counts, rule 9)."""
    keep = call._sample_chars
    sample = (call.arguments[:keep] + extra[:keep])[:keep]
    call._preview = None
    call._parts = []
    call._done = [sample] if sample else []
    call._joined = sample
    call._chars = len(sample)
    call._scanner = JSONScanner()
    return sample


class CallOwner:
    """The one writer of every call of one stream, for both APIs: each event method applies the
    cell of the call's current row (:data:`TRANSITIONS`).

    It also holds the stream's byte budget (``Limits.max_stream_bytes``), since every byte a call
    keeps is counted here; the accumulators charge their own text (content, reasoning, unknown
    fields) through :meth:`charge`. What a call announces goes to the ``out`` each method is
    given; the anomalies an event caused wait in :attr:`notes` for the reader, which records them
    with the call right after (:meth:`take_notes`).
    """

    __slots__ = ("bytes_left", "checks", "clock", "limits", "notes")

    def __init__(self, limits: Limits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self.clock = clock
        self.bytes_left = limits.max_stream_bytes
        self.checks: CallChecks | None = None
        """The request's checks, for the verdicts that are certain while a call streams (set by
        the accumulator; None: nothing is decided early)."""
        self.notes: list[Anomaly] = []
        """Anomalies the last event caused, until the reader takes them (:meth:`take_notes`)."""

    def take_notes(self) -> list[Anomaly]:
        """The anomalies waiting for the reader (emptied)."""
        notes = self.notes
        self.notes = []
        return notes

    def charge(self, size: int) -> bool:
        """Take ``size`` bytes from the stream budget; False (nothing taken) when over it."""
        left = self.bytes_left - size
        if left < 0:
            return False
        self.bytes_left = left
        return True

    def open(self, choice: int, index: int, slot: int, t: float) -> ToolCall:
        """A new, open call (the router decided a fragment opens one)."""
        call = ToolCall(choice, index, slot, self.limits, self.clock)
        call._row = TRANSITIONS[OPEN]
        call._metrics.opened_at = t
        return call

    # -- the events -----------------------------------------------------------------------------

    def fragment(self, call: ToolCall, fragment: Fragment, out: list[Event]) -> None:
        """One piece of the call (counted), with its argument text (the ``fragment`` event when the
        text is not empty). The one entrance for text, and the hot path: on an open call the cell's
        action is the append itself."""
        call._metrics.fragments += 1
        if fragment[0]:
            cell = call._row["fragment"]
            # Every fragment cell has an action and keeps the state (a test holds the table to it),
            # so the hot path needs no more of ``_step`` than this.
            error = cell.action(self, call, fragment, out)  # type: ignore[misc]
            if error is not None:
                _to_invalid(call, error, out)

    def resend(self, call: ToolCall, fragment: Fragment, out: list[Event]) -> None:
        """One piece of the call (counted) that sent its whole text so far again (``resent``)."""
        call._metrics.fragments += 1
        if fragment[0]:
            _step(self, call, call._row["resent"], fragment, out)

    def identify(self, call: ToolCall, identity: Identity, out: list[Event], opening: bool = False) -> None:
        """What a piece says of the call's id, name, type and unknown fields (``identity``);
        ``opening``: the piece opened the call, which may be one too many for its choice."""
        _step(self, call, call._row["identity"], identity, out)
        if opening and call._slot >= self.limits.max_calls_per_choice:
            self.limit_calls(call, out)

    def taint(self, call: ToolCall, error: ToolCallError) -> None:
        """Something about the open call cannot be trusted (an unreadable part of a fragment, its
        choice claimed twice): refused when it is sealed (the first reason is kept). Not an event:
        nothing changes until the seal."""
        if call._status == "open" and call._pending_error is None:
            call._pending_error = error

    def state(self, call: ToolCall, statement: Statement, out: list[Event]) -> None:
        """The server stated the call whole (``statement``)."""
        _step(self, call, call._row["statement"], statement, out)

    def seal(self, call: ToolCall, finish: Finish) -> bool:
        """The call's choice (or response) finished (``finish``): parse and check it (``ready`` or
        ``invalid``). True when its verdict is news (False for a call refused while it streamed:
        its ``ToolCallInvalid`` was announced then). The accumulator announces the verdict."""
        news = call._phase != REFUSED
        _step(self, call, call._row["finish"], finish, [])
        return news

    def verdict(self, call: ToolCall, error: ToolCallError, out: list[Event]) -> None:
        """The call can no longer become valid while it still streams (``verdict``, ``text/_early.py``)."""
        _step(self, call, call._row["verdict"], error, out)

    def limit_calls(self, call: ToolCall, out: list[Event]) -> None:
        """The call's choice already holds ``Limits.max_calls_per_choice`` calls (``limit``)."""
        limit = self.limits.max_calls_per_choice
        error = LimitExceeded(
            f"more than Limits.max_calls_per_choice={limit} tool calls in one choice",
            limit="max_calls_per_choice",
            value=limit,
        )
        _step(self, call, call._row["limit"], error, out)
        call._bytes_left = call._sample_chars  # keep no more than a sample of its text

    def refuse(self, call: ToolCall, error: ToolCallError, out: list[Event] | None = None) -> bool:
        """A fault touched the call (an unreadable part of the input, toolstitch's own failure):
        ``invalid`` unless it was already refused or ended (``fault``). True when it changed."""
        return _step(self, call, call._row["fault"], error, [] if out is None else out)

    def end(self, call: ToolCall, reason: str, t: float | None = None) -> bool:
        """The input ended (or the response said so) before the call was sealed (``end``):
        ``incomplete``. True when it changed."""
        return _step(self, call, call._row["end"], Ending(reason, t), [])

    # -- repairs that do not come from the wire -------------------------------------------------

    def give_id(self, call: ToolCall, made: str) -> None:
        """A message needs a usable, unique id and the server sent none usable for this call (none
        at all, or one another call of the message holds): ``made`` is used. Never called for an id
        the server sent that is unique in its message."""
        call._id = made

    def annotate(self, call: ToolCall, note: Anomaly) -> None:
        """Keep an anomaly on the call (the accumulator decides once per call which to keep)."""
        call._anomalies.append(note)


# -- the actions ------------------------------------------------------------------------------------


def _append(owner: CallOwner, call: ToolCall, fragment: Fragment, out: list[Event]) -> Refusal:
    """open + fragment, the hot transition: one append, the counters against the call's and the
    stream's bounds, and with events read the ``ArgumentsDelta`` and what the scanner and the
    early check say. Both read just this fragment when in step with the text."""
    text, _, read = fragment
    metrics = call._metrics
    n = len(text)
    size = n if text.isascii() else text_size(text)
    left = owner.bytes_left - size
    if left < 0:  # over the stream's bound
        metrics.bytes += size
        return _exceed(owner, call, "max_stream_bytes", owner.limits.max_stream_bytes, text)
    owner.bytes_left = left
    metrics.bytes += size
    chars = call._chars
    if not chars and metrics.first_argument_at is None:  # (set once the text has begun)
        metrics.first_argument_at = call._clock()
    bytes_left = call._bytes_left - size
    call._bytes_left = bytes_left
    if bytes_left < 0:
        return _exceed(owner, call, "max_argument_bytes", bytes_left + metrics.bytes, text)
    if size != n and not call._surrogates and has_lone_surrogate(text):
        call._surrogates = True
    parts = call._parts
    parts.append(text)
    if len(parts) >= _BATCH:
        call._done.append("".join(parts))
        parts.clear()
    call._joined = None
    call._chars = chars + n
    if not read:  # nobody reads events
        return None
    out.append(arguments_delta(call, text))
    scanner = call._scanner
    body = False
    if scanner.offset == chars:
        news = scanner.feed(text)
        if news:
            if scanner.complete:
                metrics.arguments_complete_at = call._clock()
                out.append(ArgumentsComplete(call))
            if scanner.error is not None:
                out.append(ArgumentsMalformed(call, scanner.error, scanner.error_at))
        else:
            body = news is None
    else:  # text arrived while nobody read events: caught up from the joined text
        was_complete = scanner.complete
        had_error = scanner.error is not None
        call._scan()
        if scanner.complete and not was_complete:
            out.append(ArgumentsComplete(call))
        if scanner.error is not None and not had_error:
            out.append(ArgumentsMalformed(call, scanner.error, scanner.error_at))
    early = call._early
    if type(early) is not EarlyCheck:
        if early is not UNREAD:
            return None  # nothing to check
        early = call._early = _start_early(owner, call, chars, out)
        if type(early) is not EarlyCheck:
            return None
    if body and early.free and early.offset == chars:
        # The scanner read the fragment as staying inside a string, and the check is in a string
        # nobody checks: nothing there for it but the offset.
        early.offset = chars + n
        return None
    reason = early.feed(text, chars)
    if reason is not None:
        error = SchemaViolation(
            f"arguments can no longer match the schema of {call._name!r}: {reason}",
            raw=call.arguments[: call._sample_chars],
            errors=[reason],
        )
        owner.verdict(call, error, out)
    elif early.done:
        call._early = NOTHING_EARLY
    return None


def _resend(owner: CallOwner, call: ToolCall, fragment: Fragment, out: list[Event]) -> Refusal:
    """open + resent: the text so far is replaced by the resent whole, once the stream's bound
    allows it (over the bound, a replacement replaces nothing)."""
    text = fragment[0]
    size = text_size(text)
    if owner.bytes_left - size < 0:
        call._metrics.bytes += size
        return _exceed(owner, call, "max_stream_bytes", owner.limits.max_stream_bytes, "")
    metrics = call._metrics
    owner.bytes_left += call._chars  # the replaced text is no longer kept (approximation in chars)
    call._preview = None
    call._parts = []
    call._done = []
    call._joined = ""
    call._chars = 0
    call._scanner = JSONScanner()
    if type(call._early) is EarlyCheck:
        call._early = UNREAD  # read again from the start of the new text
    call._bytes_left += metrics.bytes
    metrics.bytes = 0
    call._surrogates = False
    return _append(owner, call, fragment, out)


def _start_early(owner: CallOwner, call: ToolCall, chars: int, out: list[Event]) -> EarlyCheck | Early:
    """The early check of a call whose first text is being read (``text/_early.py``): its name is fixed
    from here on, so the request's verdict on the name is asked now; then what is certain about
    its tool's schema, if anything."""
    checks = owner.checks
    if checks is None or chars != 0 or call._name is None:
        return NOTHING_EARLY
    error, node = checks.early(call._name, "")
    if error is not None:
        owner.verdict(call, error, out)
        return NOTHING_EARLY
    if node is None or call._type == CUSTOM:  # a custom tool's input is text, not JSON
        return NOTHING_EARLY
    return EarlyCheck(node)


def _exceed(owner: CallOwner, call: ToolCall, limit_name: str, limit: int, text: str) -> ToolCallError:
    """A byte bound was exceeded: a sample is kept, the call refused."""
    sample = _keep_sample(call, text)
    owner.notes.append(
        Anomaly(
            AnomalyCode.LIMIT_EXCEEDED,
            f"Limits.{limit_name}={limit} reached: the call's text beyond it was not kept, and the "
            "call was refused",
            call._choice,
            call._index,
        )
    )
    return LimitExceeded(
        f"arguments exceed Limits.{limit_name}={limit}; kept the first {len(sample)} characters",
        raw=sample,
        limit=limit_name,
        value=limit,
    )


def _frozen_text(owner: CallOwner, call: ToolCall, fragment: Fragment, out: list[Event]) -> Refusal:
    """stated or ready + fragment: text for a call whose text is frozen (the server stated it
    whole, or the call was sealed). Counted, noted, refused; the frozen text is kept, whitespace
    included: the text that was checked is the text that runs. A sealed call's whole text resent
    is dropped."""
    text, raw, _ = fragment
    if call._phase != STATED and _resent_whole(owner, call, text, raw):
        return None
    call._metrics.bytes += text_size(text)
    sample = text[: call._sample_chars]
    if call._phase == STATED:
        _note(owner, call, raw, "after_statement")
        return TransitionRefused(
            "argument text arrived after the server stated the call's whole text; the stated text "
            "was kept and the call refused",
            raw=sample,
        )
    _note(owner, call, raw, "late_text")
    return LateFragment(
        "a fragment arrived after the call was sealed; the sealed text was kept and the call refused",
        raw=sample,
    )


def _resent_whole(owner: CallOwner, call: ToolCall, text: str, raw: Any) -> bool:
    """A sealed call's whole text, sent again (some servers repeat the arguments after the
    finish): dropped, noted. True when ``text`` was that."""
    if not is_whole_text(call, text):
        return False
    _note(owner, call, raw, "sealed_resend")
    return True


def _count_only(owner: CallOwner, call: ToolCall, fragment: Fragment, out: list[Event]) -> Refusal:
    """invalid or incomplete + fragment: counted, never kept (a late fragment's sample grows to
    the bound, so a refusal shows what came late); its whole text resent is dropped. A call
    refused for another reason that still receives text is refused for that too (what it would
    have been is not what was checked): its error says so, and it is announced again."""
    text, raw, _ = fragment
    if _resent_whole(owner, call, text, raw):
        return None
    call._metrics.bytes += text_size(text)
    error = call._error
    news: ToolCallError | None = None
    if call._phase == INVALID and error is not None and not isinstance(error, LimitExceeded | LateFragment):
        error = news = LateFragment(
            "a fragment arrived after the call was sealed; the sealed text was kept and the call refused",
            raw="",
        )
    if isinstance(error, LateFragment) and len(error.raw) < call._sample_chars:
        error.raw = (error.raw + text[: call._sample_chars])[: call._sample_chars]
    if not isinstance(error, LimitExceeded):
        _note(owner, call, raw, "late_text")
    return news


def _identify(owner: CallOwner, call: ToolCall, identity: Identity, out: list[Event]) -> Refusal:
    """open + identity: written once, from the first usable value. An id past the bound refuses
    the call, which still keeps it: the history answers it under that id and the model is told."""
    fid, name, ftype, extra, new_id, raw = identity
    refusal: ToolCallError | None = None
    if fid is not None:
        if call._id is None:
            if len(fid) > owner.limits.max_id_chars or not owner.charge(len(fid)):
                limit = owner.limits.max_id_chars
                refusal = LimitExceeded(
                    f"the call's id of {len(fid)} characters exceeds Limits.max_id_chars={limit} "
                    "or the stream's byte budget; the call is refused and its id is not replaced",
                    limit="max_id_chars",
                    value=limit,
                )
                # Kept whole when the stream's budget can hold it (memory stays bounded), else a
                # bounded prefix.
                if len(fid) > 64 and not owner.charge(len(fid)):
                    fid = fid[:64]
            call._id = fid
        elif fid == call._id:
            _note(owner, call, raw, "id_repeated")
        elif new_id:
            _note(owner, call, raw, "id_changed", old=call._id, new=fid)
            if len(fid) <= owner.limits.max_id_chars and owner.charge(len(fid)):
                call._id = fid
        else:
            _note(owner, call, raw, "id_conflict", new=fid, old=call._id)
    if name is not None:
        _identify_name(owner, call, name, raw)
    if call._type is None:
        if ftype:
            if ftype == "null":
                _note(owner, call, raw, "type_null")
            else:
                call._type = ftype
                if ftype != "function" and ftype != CUSTOM:
                    _note(owner, call, raw, "type_unexpected", new=ftype)
        elif call._metrics.fragments == 0:
            _note(owner, call, raw, "type_missing")
    elif ftype == call._type:
        if call._metrics.fragments == 1:  # a repeated quirk is told once per call
            _note(owner, call, raw, "type_repeated")
    elif ftype == "":
        _note(owner, call, raw, "type_empty")
    elif ftype == "null":
        _note(owner, call, raw, "type_null")
    elif ftype is not None:
        _note(owner, call, raw, "type_conflict", new=ftype, old=call._type)
    if extra:
        call._extra.update(extra)
    return refusal


def _identify_name(owner: CallOwner, call: ToolCall, name: str, raw: Any) -> None:
    """The name, written once. Before any argument text, a different name can only be more of the
    same name: a resend with more text (replace) or the next piece (append), as in Continue's
    report of Gemini sending "edit_ex" + "isting_file". The tool check still applies."""
    current = call._name
    if current is None:
        call._name = name
    elif name == current:
        _note(owner, call, raw, "name_repeated")
    elif call._chars == 0:
        joined = name if name.startswith(current) else current + name
        if len(joined) > MAX_NAME:
            # Pieces without end (a hostile stream): keep what there is, refuse at seal.
            call._pending_error = MissingName(f"the function name grew beyond {MAX_NAME} characters")
            _note(owner, call, raw, "name_conflict", new=name, old=current)
        else:
            call._name = joined
            _note(owner, call, raw, "name_fragmented", old=current, new=name, joined=joined)
    else:
        _note(owner, call, raw, "name_conflict", new=name, old=current)


def _identity_frozen(owner: CallOwner, call: ToolCall, identity: Identity, out: list[Event]) -> Refusal:
    """sealed + identity: a late fragment may repeat the identity, never complete or change it."""
    fid, name, _, _, _, raw = identity
    if fid is not None and fid != call._id:
        _note(owner, call, raw, "sealed_id", new=fid, old=call._id)
    if name is not None and name != call._name:
        _note(owner, call, raw, "sealed_name", new=name, old=call._name)
    return None


def _disagree(owner: CallOwner, call: ToolCall, what: str, raw: Any) -> ToolCallError:
    """A statement that contradicts the call: noted, and the call refused."""
    owner.notes.append(Anomaly(AnomalyCode.ARGUMENTS_MISMATCH, what, call._choice, call._index, raw))
    return TransitionRefused(
        f"{what}: the call is not certainly what the server meant, so it is refused",
        raw=call.arguments[: call._sample_chars],
    )


def _statement(owner: CallOwner, call: ToolCall, statement: Statement, out: list[Event]) -> Refusal:
    """open, stated, refused or ready + statement: adopted when nothing streamed (and ``adopt``
    allows it), else held to what streamed; either way the text is frozen."""
    text, name, fid, where, adopt, raw = statement
    opened = call._phase == OPEN or call._phase == REFUSED  # (a refused call may still be named)
    if name is not None and name != call._name:
        if not (call._name is None and opened and name):
            what = f"the name in {where} ({show(name)}) differs from {show(call._name)}"
            return _disagree(owner, call, what, raw)
        call._name = name
    if fid is not None and fid != call._id and not (fid == "" and call._id is None):
        if not (call._id is None and opened and len(fid) <= owner.limits.max_id_chars):
            what = f"the call_id in {where} ({show(fid)}) differs from {show(call._id)}"
            return _disagree(owner, call, what, raw)
        call._id = fid
    if text is None:
        return None
    if opened and call._chars == 0 and call._metrics.bytes == 0:
        if text and not adopt:
            return _disagree(owner, call, f"{where} states text that never streamed for this call", raw)
        return _append(owner, call, (text, raw, False), out) if text else None
    if call.arguments != text:
        return _disagree(owner, call, f"the arguments in {where} differ from the text that streamed", raw)
    return None


def _seal(owner: CallOwner, call: ToolCall, finish: Finish, out: list[Event]) -> Refusal:
    """open, stated or refused + finish: parse once, strictly, then the request's checks
    (``_seal.py``): ``ready``, or ``invalid`` with the error. A call refused while it streamed is
    sealed ``invalid`` with the seal's error (every reason, not only the first). Every refusal at
    seal is on the record, under its error's code (docs/refusals.md)."""
    t, checks, first = finish
    call._metrics.sealed_at = t
    text = call.arguments
    if call._type == CUSTOM:
        # A custom tool's input is text, not JSON: it is its own value (``_parse.parse_input``).
        as_object = False
        parsed, error = parse_input(text)
    else:
        as_object = text == "" and checks.empty_as_object(call._name)
        parsed, error = parse_arguments("{}" if as_object else text)
    call._parsed = parsed
    if call._pending_error is not None:
        error = call._pending_error
    elif not call._name:
        error = MissingName("the call was sealed without a function name", raw=text)
    elif has_lone_surrogate(call._name):
        error = MissingName("the function name is not valid Unicode (it holds a lone surrogate)", raw=text)
    elif error is not None:
        # Text that does not parse, for a tool the request rules out or did not offer as this kind
        # of tool: the tool is the reason (the model must call another, not resend its text).
        error = checks.by_name(call) or error
    else:
        error = checks.verdict(call, parsed, first, as_object, owner.notes)
    if call._phase == REFUSED and error is None:
        error = call._error  # never ready once refused (the early verdict is held to this one)
    if error is not None:
        owner.notes.append(Anomaly(error.code, f"the call was refused: {_clip(error.message)}"))
    return error


def _refuse_early(owner: CallOwner, call: ToolCall, error: ToolCallError, out: list[Event]) -> Refusal:
    """open + verdict: the text so far can no longer become valid (``text/_early.py``). Refused at once
    for everyone listening (``ToolCallInvalid`` now, ``error`` set), sealed ``invalid`` when its
    choice finishes; until then (state ``refused``) its text is kept as it arrives, so the message
    holds what the model wrote. An earlier reason (a taint) is announced first."""
    call._early = NOTHING_EARLY
    if call._pending_error is not None:
        error = call._pending_error
    call._error = error
    out.append(ToolCallInvalid(call, error))
    return None


def _refusal(owner: CallOwner, call: ToolCall, error: ToolCallError, out: list[Event]) -> Refusal:
    """+ fault, + verdict on a stated call: the event's error refuses the call (a ready call is
    withdrawn)."""
    return error


def _limit(owner: CallOwner, call: ToolCall, error: ToolCallError, out: list[Event]) -> Refusal:
    """+ limit: a bound was exceeded; a sample is kept, the call refused."""
    _keep_sample(call, "")
    return error


def _end(owner: CallOwner, call: ToolCall, ending: Ending, out: list[Event]) -> Refusal:
    """open, stated or refused + end: ``incomplete``; the text is kept as it arrived. So is a call
    refused while it streamed (its verdict was announced then): what a cut stream leaves is
    incomplete."""
    reason, t = ending
    call._metrics.sealed_at = call._clock() if t is None else t
    call._error = CallIncomplete(f"{reason}; the arguments may be truncated", raw=call.arguments)
    return None


def _refused_transition(event: str, state: str) -> Cell[Any]:
    """The cell for an event a state does not list: the call is refused, never silently kept."""

    def unlisted(owner: CallOwner, call: ToolCall, payload: Any, out: list[Event]) -> Refusal:
        return TransitionRefused(f"the event {event!r} is not allowed for a call that is {state}")

    return Cell(unlisted, INVALID)


_FROZEN = Cell(_frozen_text)
_COUNTED = Cell(_count_only)
_REFUSES = Cell(_refusal, INVALID)
_LIMITED = Cell(_limit, INVALID)
_SEALS = Cell(_seal, READY)
_ENDS = Cell(_end, INCOMPLETE)

_ENDED: dict[str, Cell[Any]] = {
    "fragment": _COUNTED,
    "resent": _COUNTED,
    "identity": Cell(_identity_frozen),
    "statement": NOTHING,
    "verdict": NOTHING,
    "finish": NOTHING,
    "limit": NOTHING,
    "fault": NOTHING,
    "end": NOTHING,
}
"""The row of a call that was refused or ended: it hears of what comes late, and nothing changes."""

_TABLE: dict[str, dict[str, Cell[Any]]] = {
    OPEN: {
        "fragment": Cell(_append),
        "resent": Cell(_resend),
        "identity": Cell(_identify),
        "statement": Cell(_statement, STATED),
        "verdict": Cell(_refuse_early, REFUSED),
        "finish": _SEALS,
        "limit": _LIMITED,
        "fault": _REFUSES,
        "end": _ENDS,
    },
    STATED: {
        "fragment": _FROZEN,
        "resent": _FROZEN,
        "identity": Cell(_identify),
        "statement": Cell(_statement),
        "verdict": _REFUSES,
        "finish": _SEALS,
        "limit": _LIMITED,
        "fault": _REFUSES,
        "end": _ENDS,
    },
    REFUSED: {
        "fragment": Cell(_append),
        "resent": Cell(_resend),
        "identity": Cell(_identify),
        "statement": Cell(_statement),
        "verdict": NOTHING,
        "finish": Cell(_seal, INVALID),
        "limit": _LIMITED,
        "fault": _REFUSES,
        "end": _ENDS,
    },
    READY: {
        "fragment": _FROZEN,
        "resent": _FROZEN,
        "identity": Cell(_identity_frozen),
        "statement": Cell(_statement),
        "finish": NOTHING,
        "limit": _LIMITED,
        "fault": _REFUSES,
        "end": NOTHING,
    },
    INVALID: {**_ENDED},
    INCOMPLETE: {**_ENDED},
}
"""State -> event -> (action, next state): the whole of a call's life, as data. A cell left out
refuses the call (:func:`_refused_transition`): ready + verdict is the one, since a ready call's
text is no longer read. Rendered into docs/design.md by :func:`render_table`."""

for _state, _cells in _TABLE.items():
    for _event in EVENTS:
        _cells.setdefault(_event, _refused_transition(_event, _state))
del _state, _cells, _event

TRANSITIONS: dict[str, Row] = {state: cast(Row, cells) for state, cells in _TABLE.items()}
"""The table, one typed :class:`Row` per state (what ``ToolCall._row`` holds)."""


def render_table() -> str:
    """The table as a Markdown table, for docs/design.md (a test keeps the two the same): each cell
    names its action and, after an arrow, the state that follows it (none: the call stays); ``·``
    is a cell where nothing happens, ``unlisted`` one the table leaves out (it refuses the call)."""
    lines = ["| state | " + " | ".join(EVENTS) + " |", "|---" * (len(EVENTS) + 1) + "|"]
    for state, cells in _TABLE.items():
        row = []
        for event in EVENTS:
            cell = cells[event]
            action = cell.action
            name = "·" if action is None else getattr(action, "__name__", "?").lstrip("_")
            row.append(name if cell.to is None else f"{name} → {cell.to}")
        lines.append(f"| {state} | " + " | ".join(row) + " |")
    return "\n".join(lines)
