"""Resuming a background Responses stream whose connection dropped.

OpenAI's background mode (``responses.create(..., background=True, stream=True)``) keeps generating
on the server when the connection drops; ``responses.retrieve(id, stream=True, starting_after=N)``
streams the rest, from the event after sequence number ``N``. A wrapped stream of such a request
does that by itself: the user's iteration goes on with the SDK's own event objects, under the
original request's contract, and the calls that span the cut end exactly as on an unbroken stream.

What decides, per event (:class:`Resumption`, sans I/O, shared by the twins):

* **Sequence numbers.** After a resume, an event numbered at or below the last one yielded is a
  replay: dropped when it equals the event kept under that number (never yielded twice), and when it
  differs, or can no longer be compared, every open call is refused (``stream_replay_conflict``):
  which text is the model's cannot be told. A number above the next one expected is a gap: the
  events between never arrived, and any open call may have lost a piece (``stream_gap``).
* **The response.** An event whose response has another id than the one resumed ends the resume
  and refuses the open calls (``stream_other_response``); that event is not yielded.
* **Time.** Each cut gets ``ResumePolicy.attempts`` retrieve requests without progress, with
  exponential backoff (tenacity); every resume of one stream together gets ``deadline`` seconds
  (checked before each request and at each event of a resumed stream: one that goes on past it is
  refused and ends); each request its ``timeout`` (a silent stream), by default the client's own
  (``with_options(timeout=)`` copies included) or the number given as ``timeout=`` to the request
  that was cut (:func:`sent_timeout`); a resumed stream is read until its final event, never past
  it. Not bounded: a resumed stream that sends bytes forever without ever completing an event
  (comments only), past the request's own timeout, which such bytes keep resetting.
  When every attempt fails, the error that cut the stream reaches the caller, as without resume.

What decides per cut (whether to resume, when to give up, what each retrieve request is sent with,
what the resume ends in) is :class:`_ResumingBase`, written once; the twins :class:`ResumingSource`
and :class:`AsyncResumingSource` keep only their I/O (``for`` or ``async for``, the retrieve call,
tenacity's waits, closing).

A resume needs the response's id (from ``response.created``) and a sequence number; without them
(or on an ``openai`` release whose ``responses.retrieve`` cannot stream from a sequence number:
openai 1.84 and newer can; the 1.55.3 floor has no Responses API at all) a cut is reported as it
always was. Each resume is a :class:`Resume` on ``stream.resumes`` and a ``stream_resumed``
anomaly. Chat Completions has no such protocol (see docs/responses.md).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import openai
import tenacity

from ..core import Anomaly, AnomalyRecorded, ResponseAccumulator
from ._proxy import proxied_stream
from ._transport import as_sdk_error

__all__ = [
    "AsyncResumingSource",
    "KnownRequests",
    "Resume",
    "ResumePolicy",
    "ResumingSource",
    "Resumption",
    "can_resume",
    "wants_background",
]

STREAM_RESUMED = "stream_resumed"
STREAM_GAP = "stream_gap"
STREAM_REPLAY_CONFLICT = "stream_replay_conflict"
STREAM_OTHER_RESPONSE = "stream_other_response"

_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_WINDOW = 1024
"""How many of the last events are kept (by reference) to compare a replay with."""


@dataclass(frozen=True, slots=True)
class ResumePolicy:
    """How a dropped background stream is resumed (``wrap(client, resume=ResumePolicy(...))``).

    ``attempts`` retrieve requests per cut that bring no event (an attempt that brings events
    starts the count again), waiting from ``initial`` seconds, times ``multiplier``, up to
    ``maximum``; ``deadline`` bounds all the resumes of one stream together (None: no bound but
    the others).

    ``timeout`` is each retrieve request's (the SDK's ``timeout=``, in seconds). None, the default,
    means the client's own: the client's ``timeout`` (or a ``client.with_options(timeout=...)``
    copy's), and the ``timeout=`` passed to that ``create`` when it was a number (the timeout the
    cut request was sent with), so a resumed stream whose server goes silent is given up as soon as
    the original one would have been, never after a longer time of toolstitch's choosing. A number
    replaces it.
    """

    attempts: int = 5
    initial: float = 0.1
    maximum: float = 2.0
    multiplier: float = 2.0
    timeout: float | None = None
    deadline: float | None = 600.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("ResumePolicy.attempts must be at least 1")
        if min(self.initial, self.maximum) < 0 or self.multiplier < 1:
            raise ValueError("ResumePolicy waits must be >= 0 and multiplier >= 1")
        if (self.timeout is not None and self.timeout <= 0) or (
            self.deadline is not None and self.deadline <= 0
        ):
            raise ValueError("ResumePolicy timeout and deadline must be > 0 (or None)")


class KnownRequests:
    """The requests of the background responses a wrapped client created, by response id, the
    latest ``limit`` of them: the contract a later ``responses.retrieve(id, stream=True)`` is held
    to (bounded: a client that lives for days creates many)."""

    __slots__ = ("_by_id", "limit")

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._by_id: dict[str, Mapping[str, Any]] = {}

    def remember(self, response_id: str, request: Mapping[str, Any]) -> None:
        by_id = self._by_id
        by_id.pop(response_id, None)
        by_id[response_id] = request
        while len(by_id) > self.limit:
            del by_id[next(iter(by_id))]

    def get(self, response_id: Any) -> Mapping[str, Any] | None:
        return self._by_id.get(response_id) if type(response_id) is str else None


@dataclass(slots=True)
class Resume:
    """One resume of a stream: the connection dropped after event ``after``; ``requests``
    retrieve requests were sent for it; ``resumed`` says whether one of them brought events."""

    after: int
    error: BaseException
    requests: int = 0
    resumed: bool = False
    replayed: int = 0
    """Replayed events dropped (numbered at or below ``after``, equal to what was yielded)."""
    failure: BaseException | None = None
    """What the last retrieve request raised, when none brought events."""


def _number(event: Any) -> int | None:
    value = (
        event.get("sequence_number")
        if isinstance(event, Mapping)
        else getattr(event, "sequence_number", None)
    )
    return value if type(value) is int else None


def _type(event: Any) -> Any:
    return event.get("type") if isinstance(event, Mapping) else getattr(event, "type", None)


def _response_id(event: Any) -> str | None:
    response = event.get("response") if isinstance(event, Mapping) else getattr(event, "response", None)
    if response is None:
        return None
    value = response.get("id") if isinstance(response, Mapping) else getattr(response, "id", None)
    return value if type(value) is str else ""


def wants_background(request: Mapping[str, Any]) -> bool:
    """The request asked for a background response (``background=True``, or in ``extra_body``)."""
    if request.get("background") is True:
        return True
    extra = request.get("extra_body")
    return isinstance(extra, Mapping) and extra.get("background") is True


def can_resume(retrieve: Any) -> bool:
    """This ``openai`` release's ``responses.retrieve`` streams from a sequence number."""
    try:
        parameters = inspect.signature(retrieve).parameters
    except (TypeError, ValueError):
        return False
    return "stream" in parameters and "starting_after" in parameters


def is_cut(error: BaseException, stream: Any = None) -> bool:
    """A dropped connection (or a read that timed out), as the SDK reports it."""
    return isinstance(as_sdk_error(error, stream), openai.APIConnectionError)


def ended_early() -> ConnectionError:
    """What a :class:`Resume` names when the stream ended without an error before the response's
    final event (never raised to the caller: such a stream, not resumed, ends as it did)."""
    return ConnectionError("the stream ended before the response's final event")


def _worth_another(error: BaseException) -> bool:
    """A retrieve request that failed in a way another one may not: a cut, 408/409/429/5xx."""
    if isinstance(error, openai.APIStatusError):
        return error.status_code in (408, 409, 429) or error.status_code >= 500
    return is_cut(error)


@dataclass
class Resumption:
    """The decisions of a resumable stream, sans I/O: which events to yield, when to resume."""

    accumulator: ResponseAccumulator
    response_id: str | None = None
    last: int | None = None
    """The sequence number of the last event yielded."""
    announced_at: int | None = None
    """The sequence number of the event that carried the response's id: a stream resumed after it
    reads every item whole."""
    resumed: bool = False
    """A resume happened: from now on numbers are held to the last one."""
    resumes: list[Resume] = field(default_factory=list)
    final_seen: bool = False
    """The response's final event arrived (on any of the streams)."""
    finished: bool = False
    """The response's final event was yielded: nothing after it is read."""
    stopped: bool = False
    """Another response's events arrived: the resume ended, the open calls refused."""
    numbered: bool = True
    notes: list[Any] = field(default_factory=list)
    """The events of the refusals this made (``stream.events()`` hands them out)."""
    on_id: Callable[[str], None] | None = None
    """Told the response's id once it is known (the wrapped client remembers the request)."""
    deadline_at: float | None = None
    """When the resumes of this stream must be over (``time.monotonic()``), from the first cut."""
    idle: int = 0
    """Retrieve requests sent since the last new event (bounded by ``ResumePolicy.attempts``)."""
    _kept: dict[int, Any] = field(default_factory=dict)
    _order: deque[int] = field(default_factory=deque)

    def take(self, event: Any) -> bool:
        """True when ``event`` is to be yielded (and fed); False when it is dropped. Sets
        :attr:`stopped` when the stream must not be read further."""
        if self.deadline_at is not None and time.monotonic() > self.deadline_at:
            # A resumed stream that goes on and on (events, replays): its time is up.
            self.stopped = True
            self._refuse("the resumed stream ran past the resume deadline", STREAM_GAP)
            return False
        number = _number(event)
        rid = _response_id(event)
        if rid is not None:
            if self.response_id is None and rid:
                self.response_id = rid
                self.announced_at = number
                if self.on_id is not None:
                    self.on_id(rid)
            elif rid != self.response_id and self.resumed:
                self.stopped = True
                self._refuse(
                    f"the resumed stream carried another response ({rid or 'no id'}, not {self.response_id})",
                    STREAM_OTHER_RESPONSE,
                )
                return False
        if number is None:
            if self.resumed:  # a replay could not be told from new text
                self._refuse("a resumed stream's event had no sequence number", STREAM_GAP)
            else:
                self.numbered = False
        elif self.resumed and self.last is not None:
            if number <= self.last:
                kept = self._kept.get(number)
                if kept is not None and kept == event:
                    if self.resumes:
                        self.resumes[-1].replayed += 1
                    return False
                self._refuse(
                    f"the resumed stream sent event {number} again with other content", STREAM_REPLAY_CONFLICT
                )
                return False
            if number > self.last + 1:
                self._refuse(
                    f"events {self.last + 1} to {number - 1} of the resumed stream never arrived", STREAM_GAP
                )
        if number is not None:
            if self.last is None or number > self.last:
                self.last = number
                self.idle = 0
            self._keep(number, event)
        if _type(event) in _FINAL:
            self.final_seen = True
            self.finished = self.resumed  # a resumed stream is not read past its final event
        return True

    def _refuse(self, reason: str, code: str) -> None:
        self.notes.extend(self.accumulator.refuse_open(reason, code))

    def _keep(self, number: int, event: Any) -> None:
        self._kept[number] = event
        self._order.append(number)
        if len(self._order) > _WINDOW:
            self._kept.pop(self._order.popleft(), None)

    def ended_early(self) -> bool:
        """The stream ended cleanly before the response's final event: a connection closed where
        the body's end cannot be told from a drop (a close-delimited body, a proxy); OpenAI ends
        every stream with a final event, so a resume picks it up as it does a drop."""
        return not self.final_seen and self.resumable(None, None)

    def resumable(self, error: BaseException | None, stream: Any) -> bool:
        """The stream broke (``error``: None for a stream that ended early) where a resume can
        pick it up."""
        return (
            self.numbered
            and not self.stopped
            and bool(self.response_id)
            and self.last is not None
            and self.accumulator.status is None
            and (error is None or is_cut(error, stream))
        )

    def cut(self, error: BaseException) -> Resume:
        """The connection dropped: a new :class:`Resume`, recorded on the stream's anomalies."""
        assert self.last is not None
        record = Resume(self.last, error)
        self.resumes.append(record)
        self.resumed = True
        note = Anomaly(
            STREAM_RESUMED,
            f"the connection dropped after event {self.last} ({type(error).__name__}); the stream "
            f"was resumed with responses.retrieve({self.response_id!r}, stream=True, "
            f"starting_after={self.last})",
        )
        self.accumulator.anomalies.append(note)
        self.notes.append(AnomalyRecorded(note))
        return record


def sent_timeout(stream: Any) -> float | None:
    """The timeout the request of ``stream`` (the SDK's stream, or a proxy of one) was sent with,
    read where the SDK wrote it, on its HTTP request (httpx's ``timeout`` request extension): the
    client's, a ``with_options(timeout=...)`` copy's, or the ``timeout=`` given to that one call.

    Only a timeout that is one number (the same for connecting, reading, writing and the pool) is
    returned, as that number, which the SDK takes back as it took it; anything else (the SDK's
    default, 600 s with 5 s to connect, or a timeout object with parts of their own), or a request
    that cannot be read, is None: a retrieve request is then sent without ``timeout=`` and the SDK
    gives it the client's own.
    """
    sdk_stream = proxied_stream(stream)
    try:
        sent = sdk_stream.response.request.extensions["timeout"]
        parts = {sent[part] for part in ("connect", "read", "write", "pool")}
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    if len(parts) != 1:
        return None
    [seconds] = parts
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        return None  # no timeout, or not a number: the client's own
    return float(seconds)


class _ResumingBase:
    """What both twins share: the state, the policy, and every decision of a resume (whether to
    resume, when to give up, what each retrieve request is sent with, what a resume ends in). The
    twins keep only their I/O: reading the streams, the retrieve call, the waits, closing."""

    def __init__(
        self,
        first: Any,
        retrieve: Callable[..., Any],
        state: Resumption,
        policy: ResumePolicy | None,
        prepare: Callable[[Any], None] | None = None,
    ) -> None:
        self._prepare = prepare
        """Given each retrieve stream before it is read (fast decoding installs itself there)."""
        self._timeout = sent_timeout(first)
        """The timeout the first request was sent with: each retrieve's, unless the policy has one."""
        self._current = first
        self._retrieve = retrieve
        self.state = state
        self.policy = policy
        self._started: float | None = None

    @property
    def resumes(self) -> list[Resume]:
        return self.state.resumes

    @property
    def notes(self) -> list[Any]:
        return self.state.notes

    def _expired(self, policy: ResumePolicy) -> bool:
        deadline = policy.deadline
        return (
            self._started is not None
            and deadline is not None
            and time.monotonic() - self._started >= deadline
        )

    def _policy_after(self, error: BaseException | None) -> ResumePolicy | None:
        """The policy to resume under when the stream broke with ``error`` (None: it ended cleanly
        before the response's final event); None when it is not resumed (the error reaches the
        caller, or the stream ends as it did)."""
        state = self.state
        if self.policy is None or state.stopped:
            return None
        if error is None:
            resumable = not state.finished and state.ended_early()
        else:
            resumable = state.resumable(error, self._current)
        return self.policy if resumable else None

    def _cut(self, error: BaseException, policy: ResumePolicy, quiet: bool) -> Resume | None:
        """Record the cut, and start the resume clock at the first one: the new :class:`Resume`
        when retrieve requests are to be sent. When they are not (no progress since the last
        resume's attempts, or out of time): None if ``quiet``, else ``error`` is raised."""
        state = self.state
        record = state.cut(error)
        if state.idle >= policy.attempts or self._expired(policy):
            if quiet:
                return None
            raise error
        if self._started is None:
            self._started = time.monotonic()
            if policy.deadline is not None:
                state.deadline_at = self._started + policy.deadline
        return record

    def _retrying(self, policy: ResumePolicy) -> dict[str, Any]:
        """tenacity's arguments for this cut (once :meth:`_cut` started the clock): the attempts
        left since the last new event, the time left of the deadline, exponential backoff; the last
        failure is raised to ``_resume``."""
        started = self._started
        assert started is not None
        stop: tenacity.stop.stop_base = tenacity.stop_after_attempt(max(1, policy.attempts - self.state.idle))
        if policy.deadline is not None:
            left = max(0.0, policy.deadline - (time.monotonic() - started))
            stop = stop | tenacity.stop_after_delay(left)
        return {
            "stop": stop,
            "wait": tenacity.wait_exponential(
                multiplier=policy.initial, exp_base=policy.multiplier, max=policy.maximum
            ),
            "retry": tenacity.retry_if_exception(_worth_another),
            "reraise": True,
        }

    def _attempt(self, record: Resume, policy: ResumePolicy) -> dict[str, Any]:
        """One retrieve request is about to be sent: it is counted; its keyword arguments (from
        the last event, with the policy's timeout, else the one the cut request was sent with:
        :func:`sent_timeout`, else none: the client's)."""
        record.requests += 1
        self.state.idle += 1
        kwargs: dict[str, Any] = {"stream": True, "starting_after": self.state.last}
        timeout = policy.timeout if policy.timeout is not None else self._timeout
        if timeout is not None:
            kwargs["timeout"] = timeout
        return kwargs

    def _opened(self, stream: Any) -> Any:
        """A retrieve request returned ``stream``: it is the one read (and closed) from now on."""
        self._current = stream
        if self._prepare is not None:
            self._prepare(stream)
        return stream

    def _outcome(self, record: Resume, error: BaseException, quiet: bool, resumed: Any) -> Any:
        """What a resume ends in: ``resumed`` (the retrieve stream and its first event) when an
        attempt succeeded; else None if ``quiet`` (a stream that ended early ends as it did), or
        the error that cut the stream is raised."""
        if record.failure is not None:
            if quiet:
                return None
            raise error
        record.resumed = True
        return resumed


class ResumingSource(_ResumingBase):
    """What a resumable stitched stream reads: the SDK's stream, then, after each cut, the SDK's
    ``responses.retrieve`` stream from the last sequence number. Yields the SDK's own events.
    (Its decisions are :class:`_ResumingBase`'s and :class:`Resumption`'s; here only the I/O.)"""

    def close(self) -> None:
        close = getattr(self._current, "close", None)
        if callable(close):
            close()

    def __iter__(self) -> Iterator[Any]:
        state = self.state
        source: Any = self._current
        pending: Any = None
        while True:
            try:
                if pending is not None and state.take(pending):  # a retrieve stream's first event
                    yield pending
                if not state.finished and not state.stopped:
                    for event in source:
                        if state.take(event):
                            yield event
                        if state.finished or state.stopped:
                            break
                if state.finished or state.stopped:
                    self.close()
                if state.stopped and state.resumes:
                    raise state.resumes[-1].error  # the cut was not recovered
            except Exception as exc:
                policy = self._policy_after(exc)
                if policy is None:
                    raise
                source, pending = self._resume(exc, policy)
                continue
            policy = self._policy_after(None)
            resumed = None if policy is None else self._resume(ended_early(), policy, quiet=True)
            if resumed is None:
                return  # it ends as it did: without the final event, its calls incomplete
            source, pending = resumed

    def _resume(self, error: BaseException, policy: ResumePolicy, quiet: bool = False) -> Any:
        """Open the retrieve stream and read its first event, with bounded attempts; the error that
        cut the stream when every attempt fails."""
        record = self._cut(error, policy, quiet)
        if record is None:
            return None
        self.close()
        iterator: Any = iter(())
        first: Any = None
        try:
            for attempt in tenacity.Retrying(**self._retrying(policy)):
                with attempt:
                    kwargs = self._attempt(record, policy)
                    iterator = iter(self._opened(self._retrieve(self.state.response_id, **kwargs)))
                    try:
                        first = next(iterator, None)
                    except Exception:
                        self.close()
                        raise
        except Exception as exc:
            record.failure = exc
        return self._outcome(record, error, quiet, (iterator, first))


class AsyncResumingSource(_ResumingBase):
    """The async twin of :class:`ResumingSource`."""

    async def close(self) -> None:
        close = getattr(self._current, "close", None)
        if callable(close):
            done = close()
            if inspect.isawaitable(done):
                await done

    async def __aiter__(self) -> AsyncIterator[Any]:
        state = self.state
        source: Any = self._current
        pending: Any = None
        while True:
            try:
                if pending is not None and state.take(pending):  # a retrieve stream's first event
                    yield pending
                if not state.finished and not state.stopped:
                    async for event in source:
                        if state.take(event):
                            yield event
                        if state.finished or state.stopped:
                            break
                if state.finished or state.stopped:
                    await self.close()
                if state.stopped and state.resumes:
                    raise state.resumes[-1].error  # the cut was not recovered
            except Exception as exc:
                policy = self._policy_after(exc)
                if policy is None:
                    raise
                source, pending = await self._resume(exc, policy)
                continue
            policy = self._policy_after(None)
            resumed = None if policy is None else await self._resume(ended_early(), policy, quiet=True)
            if resumed is None:
                return  # it ends as it did: without the final event, its calls incomplete
            source, pending = resumed

    async def _resume(self, error: BaseException, policy: ResumePolicy, quiet: bool = False) -> Any:
        record = self._cut(error, policy, quiet)
        if record is None:
            return None
        await self.close()
        iterator: Any = None
        first: Any = None
        try:
            async for attempt in tenacity.AsyncRetrying(sleep=asyncio.sleep, **self._retrying(policy)):
                with attempt:
                    kwargs = self._attempt(record, policy)
                    iterator = self._opened(
                        await self._retrieve(self.state.response_id, **kwargs)
                    ).__aiter__()
                    try:
                        first = await anext(iterator, None)
                    except Exception:
                        await self.close()
                        raise
        except Exception as exc:
            record.failure = exc
        return self._outcome(record, error, quiet, (iterator, first))
