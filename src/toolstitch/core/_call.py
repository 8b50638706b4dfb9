"""One tool call: its buffer, its state machine, its limits and its timings.

The state machine (rule 4 of docs/design.md, "seal, check, then execute")::

    open ──seal──▶ ready       arguments parse and (when the tool is known) fit its schema
      │      └───▶ invalid     they do not; ``error`` says why and keeps the raw text
      ├──limit───▶ invalid     a Limits bound was exceeded (``LimitExceeded``), further text dropped
      ├──fault───▶ invalid     toolstitch itself failed on a chunk that touched the call
      └──end─────▶ incomplete  the stream ended before the call's choice got a finish_reason

A sealed call is frozen: a late non-empty fragment never changes its text; it turns the call
``invalid`` with :class:`~toolstitch.errors.LateFragment` instead, so nothing that changed after the
check can be executed.

Users see :class:`ToolCall` read-only: every public attribute is a property without a setter, and
the methods that write a call start with ``_`` and are called by the core only (the accumulator,
the router in ``_route.py``, :func:`toolstitch.core.sealed_call`). Other layers never write a call.

Argument text is kept exactly as received, as a list of fragments joined once (rule 7: linear in
bytes). Byte accounting never raises: a lone surrogate (``"\\udc80"`` decoded by the SDK from a JSON
escape) is counted with ``surrogatepass``. When fragments held surrogates, the joined text
recombines a pair split across two fragments into its character; a lone surrogate that remains at
seal makes the call ``invalid`` (the text is not valid Unicode, so no tool could receive it intact).
"""

from __future__ import annotations

import builtins
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from itertools import chain
from typing import Any, Literal, TypeVar

from ..errors import (
    ArgumentsNotAnObject,
    CallIncomplete,
    EmptyArguments,
    LateFragment,
    LimitExceeded,
    MalformedArguments,
    MissingName,
    ToolCallError,
)
from ._anomaly import Anomaly
from ._clock import now, timings_dict
from ._limits import Limits
from ._preview import Preview
from ._scanner import JSONScanner

__all__ = [
    "CallMetrics",
    "CallStatus",
    "ToolCall",
    "parse_arguments",
    "push",
    "text_size",
]

CallStatus = Literal["open", "ready", "invalid", "incomplete"]
T = TypeVar("T")


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


def text_size(text: str) -> int:
    """UTF-8 bytes of ``text``; never raises (a lone surrogate counts as its 3-byte encoding)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


_BATCH = 1024


def push(parts: list[str], text: str) -> None:
    """Append ``text`` to a list of pieces joined once at the end, keeping the list short.

    Every ``_BATCH`` pieces the newest ones are joined into one, so a stream of a million tiny
    pieces holds about a thousand strings, not a million objects (memory stays close to the bytes
    kept, which is what ``Limits.max_stream_bytes`` counts), and the extra copying stays linear.
    """
    parts.append(text)
    if len(parts) > _BATCH:
        # Not ``parts[-_BATCH:] = [joined]``: that slice assignment gets slower as the list of
        # joined batches grows (measured: 0.2 us per piece at first, 1.6 us after 800,000).
        joined = "".join(parts[-_BATCH:])
        del parts[-_BATCH:]
        parts.append(joined)


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` is not valid Unicode (holds a surrogate code point)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def join_surrogate_pairs(text: str) -> str:
    """Recombine surrogate pairs (a character split by a proxy that cuts UTF-16 code units)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        # ``1e400`` is valid JSON text, but no double holds it: Python reads infinity, other
        # parsers an error or another number. A value a tool would not receive as sent is refused.
        raise ValueError(f"the number {text[:40]} is outside the range of a double")
    return value


def _finite_int(text: str) -> int:
    value = int(text)
    if len(text) > 308 and abs(value) > _MAX_DOUBLE:
        raise ValueError(f"the number {text[:40]}... is outside the range of a double")
    return value


_MAX_DOUBLE = int(sys.float_info.max)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                # Parsers disagree on duplicates (first wins, last wins, error): what a preview or
                # an approval screen showed could differ from what a tool receives. Refused.
                raise ValueError(f"the key {key[:40]!r} appears twice in one object")
            seen.add(key)
    return value


_ESCAPED_SURROGATE = re.compile(r"\\[uU][dD][89a-fA-F]")


def _has_surrogate_value(value: Any) -> bool:
    """True when a parsed value holds a lone surrogate (from an escape such as ``"\\udc00"``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if has_lone_surrogate(item):
                return True
        elif type(item) is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


def parse_arguments(text: str) -> tuple[Any, ToolCallError | None]:
    """Parse argument text strictly: RFC 8259 JSON, an object at the top level, and a value every
    parser reads alike: no NaN or Infinity, no number outside a double's range, no key twice in one
    object, no lone surrogate (raw or escaped). So a ``ready`` value is valid Unicode."""
    if text == "":
        return None, EmptyArguments(
            "no argument text arrived (arguments is an empty string, not {})", raw=text
        )
    if has_lone_surrogate(text):
        return None, MalformedArguments(
            "the argument text is not valid Unicode (it holds a lone UTF-16 surrogate, e.g. a "
            "character cut in half by a proxy): it cannot reach a tool intact",
            raw=text,
        )
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_finite_int,
            object_pairs_hook=_unique_keys,
        )
    except (ValueError, RecursionError) as exc:
        pos = getattr(exc, "pos", None)
        return None, MalformedArguments(f"arguments are not valid JSON: {exc}", raw=text, position=pos)
    if _ESCAPED_SURROGATE.search(text) is not None and _has_surrogate_value(value):
        return None, MalformedArguments(
            "the arguments hold an escaped lone UTF-16 surrogate (such as \\udc00): the value is not "
            "valid Unicode, so no tool could receive it intact",
            raw=text,
        )
    if not isinstance(value, dict):
        return value, ArgumentsNotAnObject(
            f"arguments must be a JSON object, got {type(value).__name__}", raw=text
        )
    return value, None


class ToolCall:
    """A tool call assembled from fragments, then sealed and checked. Read-only for users.

    ``choice``     the choice index the call belongs to
    ``index``      the call's ``index`` as the provider sent it (or as assigned when it sent none)
    ``slot``       opening order of the call within its choice (0, 1, …), distinct when indexes repeat
    ``id``         the call id (first non-empty value; synthesized when the provider sent none)
    ``name``       the function name (first non-empty value)
    ``type``       the ``type`` the provider sent (normally ``"function"``)
    ``arguments``  the raw argument text exactly as received (a bounded sample after a limit)
    ``status``     ``"open"``, ``"ready"``, ``"invalid"`` or ``"incomplete"``
    ``parsed``     the parsed arguments once sealed and parsed (kept for ``invalid`` schema failures too)
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
        "_preview",
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
        """An error decided while the call was open (a contradicting second value): applied at seal."""
        self._preview: Preview | None = None
        """The preview's parser state, built on the first read of ``preview``."""

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
        """The call id (first non-empty value; synthesized when the provider sent none)."""
        return self._id

    @property
    def name(self) -> str | None:
        """The function name (first non-empty value)."""
        return self._name

    @property
    def type(self) -> str | None:
        """The ``type`` the provider sent for the call."""
        return self._type

    @property
    def status(self) -> CallStatus:
        """``"open"``, ``"ready"``, ``"invalid"`` or ``"incomplete"``."""
        return self._status

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
        """Bring the scanner up to date with the text (incremental: linear in bytes overall)."""
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

    @property
    def preview(self) -> dict[str, Any] | None:
        """The arguments so far, for display only. **Not safe to act on.**

        A dict of what has arrived (``None`` before the opening ``{``): open strings as the prefix
        that has arrived, open objects and arrays with the members that have begun; unfinished
        numbers and literals are left out, and keys are never invented. It may show a value the
        tool's schema refuses, and a call that shows a preview may still turn ``invalid`` or
        ``incomplete``: execute only ``ready`` calls, with ``parsed``. Once the call is ``ready``
        the preview is ``parsed`` itself. Nothing in toolstitch (the gate, the executor, the
        history) ever reads it.

        Maintained incrementally: each read parses only the text that arrived since the previous
        read (see ``_preview.py``); a call whose preview is never read pays nothing. Each read
        returns a fresh dict. Never raises.
        """
        if self._status == "ready":
            return self._parsed  # type: ignore[no-any-return]
        try:
            state = self._preview
            if state is None or state.consumed > self._chars:
                state = self._preview = Preview()
            return state.read(self._text_from(state.consumed))
        except Exception:  # display only: never raise
            return None

    def _text_from(self, start: int) -> str:
        """The argument text from character ``start`` on, touching only the pieces it needs."""
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
    def sealed(self) -> bool:
        """True once the call can no longer change (``ready``, ``invalid`` or ``incomplete``)."""
        return self._status != "open"

    @property
    def ready(self) -> bool:
        """True when the call is safe to execute."""
        return self._status == "ready"

    def parsed_as(self, model: builtins.type[T]) -> T:
        """The arguments validated as ``model`` (a pydantic model, or any type pydantic validates:
        a dataclass, a ``TypedDict``): a new instance on each call, never the executed one.

        Raises :class:`~toolstitch.errors.CallNotReadyError` when the call has no parsed arguments
        object (still open, cut off, or text that is not a JSON object), and
        :class:`~toolstitch.errors.SchemaViolation` (``errors`` lists every problem, with its path)
        when they do not fit ``model``.
        """
        from pydantic import TypeAdapter, ValidationError

        from ..errors import CallNotReadyError, SchemaViolation

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

    # -- writing (the core only) ------------------------------------------------------------

    def _append(self, text: str, size: int) -> bool:
        """Append an argument fragment of ``size`` UTF-8 bytes (:func:`text_size`). Returns False
        when the text was not kept. Nothing is scanned here (rule 2)."""
        metrics = self._metrics
        metrics.bytes += size
        if self._status != "open":
            if not (self._status == "invalid" and isinstance(self._error, LimitExceeded)):
                self._reject_late(text)
            return False
        if metrics.first_argument_at is None:
            metrics.first_argument_at = self._clock()
        self._bytes_left -= size
        if self._bytes_left < 0:
            self._exceed("max_argument_bytes", self._bytes_left + metrics.bytes, text, self._clock())
            return False
        if size != len(text) and not self._surrogates and has_lone_surrogate(text):
            self._surrogates = True
        parts = self._parts
        parts.append(text)
        if len(parts) >= _BATCH:
            self._done.append("".join(parts))
            parts.clear()
        self._joined = None
        self._chars += len(text)
        return True

    def _replace_arguments(self, text: str) -> None:
        """Replace all argument text (a provider resent the arguments whole)."""
        self._preview = None
        self._parts = []
        self._done = []
        self._joined = ""
        self._chars = 0
        self._scanner = JSONScanner()
        self._bytes_left += self._metrics.bytes
        self._metrics.bytes = 0
        self._surrogates = False
        self._append(text, text_size(text))

    def _exceed(self, limit_name: str, limit: int, text: str, now: float) -> None:
        """A byte bound was exceeded: keep a bounded sample only, refuse the call."""
        self._preview = None
        keep = self._sample_chars
        sample = (self.arguments[:keep] + text[:keep])[:keep]
        self._parts = []
        self._done = [sample] if sample else []
        self._joined = sample
        self._chars = len(sample)
        self._status = "invalid"
        self._metrics.sealed_at = now
        self._scanner = JSONScanner()
        self._error = LimitExceeded(
            f"arguments exceed Limits.{limit_name}={limit}; kept the first {len(sample)} characters",
            raw=sample,
            limit=limit_name,
            value=limit,
        )

    def _exceed_call_limit(self, limit: int, now: float) -> None:
        """Mark this call invalid because its choice already holds ``limit`` calls."""
        self._status = "invalid"
        self._metrics.sealed_at = now
        self._bytes_left = self._sample_chars  # keep no more than a sample of its text
        self._error = LimitExceeded(
            f"more than Limits.max_calls_per_choice={limit} tool calls in one choice",
            limit="max_calls_per_choice",
            value=limit,
        )

    def _reject_late(self, text: str) -> None:
        """A non-empty fragment arrived after sealing: keep the text frozen, refuse the call.

        An ``incomplete`` call stays ``incomplete``: it was already refused, and its status is what
        the stream's end decided (frozen like any sealed call); the accumulator records the anomaly.
        """
        if self._status == "incomplete":
            return
        keep = self._sample_chars
        error = self._error
        if isinstance(error, LateFragment):
            if len(error.raw) < keep:
                error.raw = (error.raw + text[:keep])[:keep]
            return
        self._status = "invalid"
        self._error = LateFragment(
            "a fragment arrived after the call was sealed; the sealed text was kept and the call refused",
            raw=text[:keep],
        )

    def _seal(self, now: float, empty_as_object: bool) -> None:
        """Close the call and parse its arguments. Tool checks are applied by ``_check.py``."""
        if self._status != "open":
            return
        self._metrics.sealed_at = now
        text = self.arguments
        if text == "" and empty_as_object:
            text = "{}"
        parsed, error = parse_arguments(text)
        self._parsed = parsed
        if self._pending_error is not None:
            error = self._pending_error
        if error is None:
            name = self._name
            if not name:
                error = MissingName("the call was sealed without a function name", raw=text)
            elif has_lone_surrogate(name):
                error = MissingName(
                    "the function name is not valid Unicode (it holds a lone surrogate)", raw=text
                )
        if error is not None:
            self._status = "invalid"
            self._error = error
        else:
            self._status = "ready"

    def _invalidate(self, error: ToolCallError) -> None:
        """Turn the call invalid (a failed tool check, a broken contract, an internal fault)."""
        self._status = "invalid"
        self._error = error

    def _mark_incomplete(self, reason: str) -> None:
        """The stream ended (or failed) before this call was sealed."""
        if self._status == "open":
            self._status = "incomplete"
            self._error = CallIncomplete(f"{reason}; the arguments may be truncated", raw=self.arguments)
