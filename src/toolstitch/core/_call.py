"""A tool call: what users read of it, and the buffer that keeps its text.

:class:`ToolCall` is read-only for users; its life (its states, the events each allows, what
each event does) belongs to its owner, ``_owner.py`` (rule 12 of docs/design.md: that module is
the only writer of a call's state; this one defines the call and its reads). The states are named
here, since a call's ``status`` is read from them: ``open``; ``stated`` (the server stated the
whole text); ``refused`` (refused while it streams: ``invalid`` announced, its text still kept
until the seal); ``ready``, ``invalid`` and ``incomplete``. Users see the first three as
``"open"``.

Argument text is kept exactly as received, as a list of pieces joined once (rule 7: linear in
bytes). Byte accounting never raises: a lone surrogate is counted with ``surrogatepass``; the
joined text recombines a surrogate pair split across two fragments, and a lone surrogate that
remains at seal makes the call ``invalid``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import Enum
from itertools import chain
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import (
    LimitExceeded,
    SchemaViolation,
    ToolCallError,
)
from ..text import EarlyCheck, JSONScanner, Preview, has_lone_surrogate, join_surrogate_pairs, parse_arguments
from ._anomaly import Anomaly
from ._clock import CLOCK_ANCHOR, now, timings_dict, wall_clock
from ._json_form import JSONForm, error_form, json_form
from ._limits import Limits

if TYPE_CHECKING:
    from ._owner import Row

__all__ = [
    "CLOCK_ANCHOR",
    "CUSTOM",
    "STATUS",
    "CallMetrics",
    "CallStatus",
    "Early",
    "ToolCall",
    "has_lone_surrogate",
    "is_whole_text",
    "now",
    "parse_arguments",
    "push",
    "text_size",
    "timings_dict",
    "wall_clock",
]

CallStatus = Literal["open", "ready", "invalid", "incomplete"]
T = TypeVar("T")

# The states: ``stated`` is an open call whose text the server stated whole, ``refused`` an open call
# refused while it streams (announced ``invalid``, sealed ``invalid``); users see both as "open".
OPEN, STATED, REFUSED = "open", "stated", "refused"
READY, INVALID, INCOMPLETE = "ready", "invalid", "incomplete"
STATUS: dict[str, CallStatus] = {
    OPEN: "open",
    STATED: "open",
    REFUSED: "open",
    READY: "ready",
    INVALID: "invalid",
    INCOMPLETE: "incomplete",
}
"""The status users see in each state."""
CUSTOM = "custom"
"""The ``type`` of a custom tool's call: its text is the input itself, not JSON (sealed with
``_parse.parse_input``, checked against the tool's ``format``)."""


class Early(Enum):
    """Where a call's early check stands when it holds no :class:`~._early.EarlyCheck`."""

    UNREAD = "unread"
    """Its first text has not been read with events on: the check may still start there."""
    NOTHING = "nothing"
    """Nothing about the call can be decided early (no checks, no schema, a custom tool's input,
    text read first without events), or nothing more (the check is done, or refused the call)."""


UNREAD, NOTHING_EARLY = Early.UNREAD, Early.NOTHING
MAX_NAME = 1024
"""Characters of a function name beyond which it is unusable (OpenAI allows 64)."""


@dataclass(slots=True)
class CallMetrics:
    """Counts and monotonic timestamps (``time.monotonic()`` seconds) for one call.

    Differences between two ``*_at`` instants are exact durations; :func:`wall_clock` (or
    :meth:`as_dict`) turns an instant into Unix time through :data:`CLOCK_ANCHOR`.
    """

    fragments: int = 0
    """Tool-call fragments received for this call (empty ones included)."""
    bytes: int = 0
    """UTF-8 bytes of argument text received (including text dropped after a limit)."""
    opened_at: float | None = None
    """When the call's first fragment arrived."""
    first_argument_at: float | None = None
    """When the first non-empty argument text arrived."""
    arguments_complete_at: float | None = None
    """When the scanner saw the top-level JSON value close."""
    sealed_at: float | None = None
    """When the call's choice received its finish_reason (or the call hit a limit)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): counts as they are, ``*_at`` instants as Unix time."""
        return timings_dict({f.name: getattr(self, f.name) for f in fields(self)})


def is_whole_text(call: ToolCall, text: str) -> bool:
    """True when ``text`` is exactly the call's argument text so far (its length compared first): a
    resend of the whole, which routing and the owner both tell apart from new text."""
    return len(text) == call.chars and call.arguments == text


def text_size(text: str) -> int:
    """UTF-8 bytes of ``text``; never raises (a lone surrogate counts as its 3-byte encoding)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


_BATCH = 1024


def push(parts: list[str], text: str) -> None:
    """Append ``text`` to a list of pieces joined once at the end, keeping the list short: every
    ``_BATCH`` pieces the newest are joined into one, so a million tiny pieces hold about a
    thousand strings (memory stays close to the bytes ``Limits.max_stream_bytes`` counts)."""
    parts.append(text)
    if len(parts) > _BATCH:
        # Not ``parts[-_BATCH:] = [joined]``: that slice assignment slows as the list grows.
        joined = "".join(parts[-_BATCH:])
        del parts[-_BATCH:]
        parts.append(joined)


class ToolCall(JSONForm):
    """A tool call assembled from fragments, then sealed and checked. Read-only for users.

    ``choice``     the choice index the call belongs to
    ``index``      the call's ``index`` as the provider sent it (or as assigned when it sent none)
    ``slot``       opening order of the call within its choice (0, 1, …), distinct when indexes repeat
    ``id``         the call id (as the server sent it; synthesized only when it sent none usable)
    ``name``       the function name (first non-empty value)
    ``type``       the ``type`` the provider sent (``"function"``; ``"custom"`` for a custom tool's call)
    ``arguments``  the raw argument text exactly as received (a bounded sample after a limit); a
                   custom tool's call: its input text
    ``status``     ``"open"``, ``"ready"``, ``"invalid"`` or ``"incomplete"``
    ``parsed``     the parsed arguments once sealed and parsed (kept for ``invalid`` schema failures too);
                   a custom tool's call: its input, the text itself (never parsed as JSON)
    ``error``      why the call is ``invalid`` or ``incomplete``, else ``None``
    ``anomalies``  what the provider did differently for this call
    ``metrics``    counts and timings
    ``preview``    the arguments so far as a partial dict, for display only (never act on it)
    ``extra``      unknown provider fields sent on the call (e.g. ``extra_content``), kept for replay
    """

    __slots__ = (
        "_anomalies",
        "_bytes_left",
        "_chars",
        "_choice",
        "_clock",
        "_done",
        "_early",
        "_error",
        "_extra",
        "_id",
        "_index",
        "_joined",
        "_metrics",
        "_name",
        "_parsed",
        "_parts",
        "_pending_error",
        "_phase",
        "_preview",
        "_row",
        "_sample_chars",
        "_scanner",
        "_slot",
        "_status",
        "_surrogates",
        "_type",
    )

    def __init__(
        self, choice: int, index: int, slot: int, limits: Limits, clock: Callable[[], float] | None = None
    ) -> None:
        self._choice = choice
        self._index = index
        self._slot = slot
        self._id: str | None = None
        self._name: str | None = None
        self._type: str | None = None
        self._status: CallStatus = "open"
        self._phase = OPEN
        self._row: Row
        """The table's row for the call's state: what each event does now (one dictionary hit);
        written by its owner, from its opening (``CallOwner.open``) on."""
        self._parsed: Any = None
        self._error: ToolCallError | None = None
        self._anomalies: list[Anomaly] = []
        self._metrics = CallMetrics()
        self._extra: dict[str, Any] = {}
        self._scanner = JSONScanner()
        """Scanned lazily: it catches up with the text only when something asks (:meth:`_scan`)."""
        self._clock = clock or now
        self._chars = 0
        self._parts: list[str] = []
        """The newest pieces of argument text (fewer than ``_BATCH``), in order."""
        self._done: list[str] = []
        """Older text, joined ``_BATCH`` pieces at a time: the whole text is ``_done + _parts``."""
        self._joined: str | None = ""
        self._bytes_left = limits.max_argument_bytes
        self._sample_chars = limits.sample_chars
        self._surrogates = False
        self._pending_error: ToolCallError | None = None
        """An error decided while the call was open (an unreadable fragment): applied at seal."""
        self._preview: Preview | None = None
        self._early: EarlyCheck | Early = UNREAD
        """The early check of its text (``text/_early.py``), or where it stands without one."""

    def __repr__(self) -> str:
        return (
            f"ToolCall(choice={self._choice}, index={self._index}, id={self._id!r}, "
            f"name={self._name!r}, status={self._status!r}, arguments={self.arguments!r})"
        )

    # -- reading (public, read-only) --------------------------------------------------------

    @property
    def choice(self) -> int:
        """The choice index the call belongs to."""
        return self._choice

    @property
    def index(self) -> int:
        """The call's ``index`` as the provider sent it (or as assigned when it sent none)."""
        return self._index

    @property
    def slot(self) -> int:
        """Opening order of the call within its choice (0, 1, …); distinct even when indexes repeat."""
        return self._slot

    @property
    def id(self) -> str | None:
        """The call id (as the server sent it; synthesized only when it sent none usable)."""
        return self._id

    @property
    def name(self) -> str | None:
        """The function name (first non-empty value)."""
        return self._name

    @property
    def type(self) -> str | None:
        """The ``type`` the provider sent for the call: ``"function"``, or ``"custom"`` for a call of
        a custom tool (a Responses ``custom_tool_call``), whose input is text, not JSON."""
        return self._type

    @property
    def status(self) -> CallStatus:
        """``"open"``, ``"ready"``, ``"invalid"`` or ``"incomplete"``."""
        return self._status

    @property
    def stated(self) -> bool:
        """True once the server stated the call's whole text (its text is frozen, still unsealed)."""
        return self._phase == STATED

    @property
    def parsed(self) -> Any:
        """The parsed arguments once sealed (kept for schema failures too), else ``None``."""
        return self._parsed

    @property
    def error(self) -> ToolCallError | None:
        """Why the call is ``invalid`` or ``incomplete``, else ``None``."""
        return self._error

    @property
    def anomalies(self) -> list[Anomaly]:
        """What the provider did differently for this call."""
        return self._anomalies

    @property
    def metrics(self) -> CallMetrics:
        """Counts and timings."""
        return self._metrics

    @property
    def extra(self) -> dict[str, Any]:
        """Unknown provider fields sent on the call (e.g. ``extra_content``), kept for replay."""
        return self._extra

    @property
    def scanner(self) -> JSONScanner:
        """The incremental scanner's view of the argument text so far (``complete``, ``error``).

        Rule 2 (docs/design.md): a fragment is appended and nothing else. The scanner reads the
        text only when something asks where the JSON stands (this property, eager dispatch, the
        router's rare ambiguous cases), and then only the text that arrived since it last read.
        """
        return self._scan()

    def _scan(self) -> JSONScanner:
        scanner = self._scanner
        if scanner.offset < self._chars and self._status == "open":
            was_complete = scanner.complete
            scanner.feed(self._text_from(scanner.offset))
            if scanner.complete and not was_complete:
                self._metrics.arguments_complete_at = self._clock()
        return scanner

    @property
    def chars(self) -> int:
        """Characters of argument text kept so far."""
        return self._chars

    @property
    def arguments(self) -> str:
        """The argument text as received, joined once and cached."""
        joined = self._joined
        if joined is None:
            done = self._done
            raw = "".join([*done, *self._parts] if done else self._parts)
            # The pieces stay as received (the scanner and the preview count characters in them);
            # only the text handed out recombines a surrogate pair split across two fragments.
            self._done = [raw] if raw else []
            self._parts = []
            joined = self._joined = join_surrogate_pairs(raw) if self._surrogates else raw
        return joined

    def text_from(self, start: int) -> str:
        """The argument text from character ``start`` on, touching only the pieces it needs."""
        return self._text_from(start)

    def _text_from(self, start: int) -> str:
        if start == 0:
            done = self._done
            if len(done) == 1 and not self._parts:
                return done[0]
            raw = "".join([*done, *self._parts])
            self._done = [raw] if raw else []
            self._parts = []
            return raw
        need = self._chars - start
        if need <= 0:
            return ""
        taken: list[str] = []
        size = 0
        for piece in chain(reversed(self._parts), reversed(self._done)):
            taken.append(piece)
            size += len(piece)
            if size >= need:
                break
        taken.reverse()
        text = "".join(taken) if len(taken) > 1 else taken[0]
        return text[size - need :] if size > need else text

    @property
    def preview(self) -> dict[str, Any] | None:
        """The arguments so far, for display only. **Not safe to act on.**

        A dict of what has arrived (``None`` before the opening ``{``): open strings as the prefix
        that has arrived, open objects and arrays with the members that have begun; unfinished
        numbers and literals are left out, and keys are never invented. A call that shows a
        preview may still turn ``invalid`` or ``incomplete``: execute only ``ready`` calls, with
        ``parsed``. Once the call is ``ready`` the preview is ``parsed`` itself. Maintained
        incrementally (``text/_preview.py``); each read returns a fresh dict. Never raises. A custom
        tool's call has no preview (None): its input is text, read as ``arguments``.
        """
        if self._type == CUSTOM:
            return None
        if self._status == "ready":
            return self._parsed  # type: ignore[no-any-return]
        try:
            state = self._preview
            if state is None or state.consumed > self._chars:
                state = self._preview = Preview()
            return state.read(self._text_from(state.consumed))
        except Exception:  # display only: never raise
            return None

    def to_dict(self) -> dict[str, Any]:
        """The call as JSON-safe data, as it stands now (``_json_form.py``): ``id``, ``name``,
        ``type``, ``index``, ``choice``, ``status``, ``arguments`` (the raw text), ``parsed``,
        ``preview``, ``error`` (``{"type", "code", "message"}`` or None) and ``anomalies``
        (``{"code", "message"}`` each). Never raises."""
        error = self._error
        return {
            "id": json_form(self._id),
            "name": json_form(self._name),
            "type": json_form(self._type),
            "index": self._index,
            "choice": self._choice,
            "status": self._status,
            "arguments": json_form(self.arguments),
            "parsed": json_form(self._parsed),
            "preview": json_form(self.preview),
            "error": None if error is None else error_form(error),
            "anomalies": [
                {"code": json_form(a.code), "message": json_form(a.message)} for a in self._anomalies
            ],
        }

    @property
    def sealed(self) -> bool:
        """True once the call can no longer change (``ready``, ``invalid`` or ``incomplete``)."""
        return self._status != "open"

    @property
    def ready(self) -> bool:
        """True when the call is safe to execute."""
        return self._status == "ready"

    @property
    def limited(self) -> bool:
        """True when a byte bound was hit: only a sample of the text was kept."""
        return isinstance(self._error, LimitExceeded)

    def parsed_as(self, model: builtins.type[T]) -> T:
        """The arguments validated as ``model`` (a pydantic model, or any type pydantic validates:
        a dataclass, a ``TypedDict``): a new instance on each call, never the executed one.

        Raises :class:`~toolstitch.errors.CallNotReadyError` when the call has no parsed arguments
        object (still open, cut off, or text that is not a JSON object), and
        :class:`~toolstitch.errors.SchemaViolation` (``errors`` lists every problem, with its path)
        when they do not fit ``model``.
        """
        from pydantic import TypeAdapter, ValidationError

        from ..errors import CallNotReadyError

        parsed = self._parsed
        if self._status == "open" or not isinstance(parsed, dict):
            why = self._error.message if self._error is not None else f"the call is {self._status}"
            raise CallNotReadyError(
                f"call {self._id!r} has no arguments object to validate ({why})",
                call=self,
                status=self._status,
            )
        name = getattr(model, "__name__", repr(model))
        try:
            return TypeAdapter(model).validate_python(parsed)
        except ValidationError as exc:
            problems = [
                f"{'.'.join(str(p) for p in e.get('loc', ())) or '(arguments)'}: {e.get('msg')}"
                for e in exc.errors(include_url=False)
            ]
            raise SchemaViolation(
                f"the arguments of call {self._id!r} are not a valid {name}: " + "; ".join(problems),
                raw=self.arguments,
                errors=problems,
            ) from None
