"""``StitchedStream`` and ``AsyncStitchedStream``: thin twins over one :class:`Accumulator`.

They iterate a source of chunks (the SDK's own stream, or any iterable for :func:`stitch`), feed
each chunk to the accumulator, and yield the chunk object unchanged (rule 5: pass-through first).
Whatever the source raises (an in-band error event, a dropped connection) reaches the caller
unchanged, after the accumulator has marked every open call ``incomplete``; only a transport error
becomes the SDK's ``openai.APIConnectionError``, as openai >= 3.14 does itself (see ``_transport``).
Closing the wrapper closes the source, and with it the HTTP response.

They *are* ``openai.Stream`` / ``openai.AsyncStream`` instances (subclasses), so code that checks the
type of what ``create(stream=True)`` returned takes the same branch with or without toolstitch.
``Stream.__init__`` is not called (it would build a second SSE decoder over a response the SDK
stream already reads): the attributes the SDK's stream has (``response``, ``_client``,
``_options``, ``_cast_to``, ``_decoder``) are the source's own, or ``None`` for a source that has
none (a list of dicts given to ``stitch``).

Two ways to consume them: iterate for chunks, or :meth:`StitchedStream.events` for toolstitch
events. Either way each chunk is fed once, the recorder sees it, and the final completion is
the same.

An optional recorder (see ``_recording``) sees each chunk before the caller does and the end of the
stream once; it is off by default, and it never raises into the iteration.

``guard=True`` (``wrap(client, guard=True)``, ``stitch(..., guard=True)``) is for code that decides
on its own what to execute (a framework): every chunk still passes through unchanged, until a chunk
finishes a choice that holds a call that is not ``ready``. That chunk is not yielded: the source is
closed (the calls still open become ``incomplete``) and :class:`~toolstitch.errors.UnsafeToolCallError`
(an ``openai.APIError``) is raised in its place, carrying those calls; the same error ends a stream
whose input ended with such a call (no ``finish_reason`` came, or a call opened after it). So the code
reading the stream never sees the finish of a choice whose calls did not arrive whole and valid.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping, Sequence
from typing import IO, Any, Protocol

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from typing_extensions import Self, TypeVar

from .._context_managers import ClosedOnAsyncExit, ClosedOnExit
from ..core import Accumulator, Anomaly, CallStore, Event, ToolCall
from ..errors import UnsafeToolCallError
from ..recording import Recorder, Redact
from ._transport import as_sdk_error

_ChunkT = TypeVar("_ChunkT", default=ChatCompletionChunk)
"""What iterating a stitched stream yields: a chat stream's ``ChatCompletionChunk`` (the default,
so a bare ``StitchedStream`` is one), a Responses stream's ``ResponseStreamEvent``."""

__all__ = ["AsyncStitchedStream", "StitchedStream", "StreamRecorder"]

_NO_EVENTS: Sequence[Event] = ()


class StreamRecorder(Protocol):
    """What a stream tells a recorder: each chunk as it arrives, then the end, once."""

    def on_chunk(self, chunk: Any) -> None: ...

    def on_end(self, error: BaseException | None) -> None:
        """``None``: completed; ``GeneratorExit``: closed early; otherwise what the SDK raised."""


class _Base:
    """What both twins share: the accumulator, the read-only views over it, and the SDK stream's
    attributes (a mixin placed before ``openai.Stream`` / ``openai.AsyncStream`` in each twin)."""

    response: Any
    """The HTTP response of the SDK stream (``None`` for a source without one)."""

    def __init__(
        self,
        sdk_stream: Any,
        accumulator: CallStore,
        *,
        recorder: StreamRecorder | None = None,
        request: Mapping[str, Any] | None = None,
        guard: bool = False,
        source: Any = None,
    ) -> None:
        self._sdk_stream = sdk_stream
        self._source: Any = sdk_stream if source is None else source
        """What is iterated and closed: the SDK stream, or what reads it and more (a resumable
        Responses stream's ``_resume.ResumingSource``)."""
        self.guard = bool(guard)
        """Raise :class:`~toolstitch.errors.UnsafeToolCallError` in place of a chunk that finishes a
        choice holding a call that is not ``ready`` (see the module docstring)."""
        self.accumulator = accumulator
        """The sans-I/O core fed by this stream."""
        self.recorder = recorder
        """What records this stream (``None`` unless recording was asked for)."""
        self._request = request
        # What openai.Stream.__init__ would have set, taken from the stream we read instead.
        self.response = getattr(sdk_stream, "response", None)
        self._client: Any = getattr(sdk_stream, "_client", None)
        self._options: Any = getattr(sdk_stream, "_options", None)
        self._cast_to: Any = getattr(sdk_stream, "_cast_to", ChatCompletionChunk)
        self._decoder: Any = getattr(sdk_stream, "_decoder", None)
        self._pending: Sequence[Event] = _NO_EVENTS
        """The events of the last chunk fed (read by ``events()``; chunk iteration ignores them)."""
        self._events = False
        """Whether each chunk's events are read (the core's ``feed(..., events=...)``): set by
        ``events()``, from then on each chunk's events are built and handed out."""
        self._guarded = 0
        """How many of ``accumulator.finished`` the guard has checked."""
        self._core_only = False
        """Nothing but the core takes each chunk: no events are read (``_events``), nothing
        records and no guard watches, so the iteration feeds the core's quiet entry directly (one
        call less per chunk). It follows from those three: :meth:`_set_core_only` sets it
        whenever one of them changes."""
        self._set_core_only()
        self._ending: Sequence[Event] = _NO_EVENTS
        """The events of the end of the input (calls sealed or made incomplete, ``StreamEnded``)."""
        self._over = False
        self._iterator: Any = self._iterate()

    def _iterate(self) -> Any:
        # Each twin iterates (for / async for) and closes its source its own way, and does nothing
        # else: what happens to a chunk is ``_take`` (or the core's quiet ``feed``), what happens
        # at the end ``_failed`` / ``_completed``, shared.
        raise NotImplementedError

    def _set_core_only(self) -> None:
        """Set :attr:`_core_only` from what takes each chunk (called whenever that changes)."""
        self._core_only = self.recorder is None and not self.guard and not self._events

    def _take(self, chunk: Any) -> UnsafeToolCallError | None:
        """One chunk of the source, in both twins: the recorder sees it first, then the core; with
        the guard on, the refusal of a choice this chunk finished with a call that is not ready."""
        if self.recorder is not None:
            self.recorder.on_chunk(chunk)
        accumulator = self.accumulator
        if self._events:
            self._pending = accumulator.feed(chunk)
            if self._source is not self._sdk_stream:
                self._pending = self._source_events(self._pending)
        else:  # nobody reads the events: the core's entry that builds none (same state, metrics)
            accumulator.feed(chunk, events=False)
        if self.guard:
            # The choices this chunk finished (``Accumulator.finished``), without reading events.
            finished = accumulator.finished
            while self._guarded < len(finished):
                choice = finished[self._guarded]
                self._guarded += 1
                refused = self._refusal(accumulator.calls(choice), choice)
                if refused is not None:
                    return refused
        return None

    def _refusal(self, calls: list[ToolCall], choice: int | None) -> UnsafeToolCallError | None:
        """The guard's error when one of ``calls`` (those of the ``choice`` that just finished, or
        every call at the end of the input: ``choice`` None) is not ``ready``; else None."""
        unsafe = [call for call in calls if call.status != "ready"]
        if not unsafe:
            return None
        try:  # the HTTP request of the SDK's stream, for the APIError; none for stitch()'s sources
            request = self.response.request if self.response is not None else None
        except Exception:
            request = None
        return UnsafeToolCallError.of(unsafe, choice, request=request)

    def _failed(self, exc: BaseException) -> BaseException:
        """The source raised ``exc`` (or the iteration was closed: ``GeneratorExit``): the input is
        over, with the error the caller gets (``exc`` itself, or a transport error as the SDK's
        own)."""
        error = as_sdk_error(exc, self._sdk_stream)
        self._input_over(error)
        return error

    def _completed(self) -> None:
        """The source ended: the input is over. With the guard on, a call that is not ``ready``
        at the end of the input (no ``finish_reason`` came, or it opened after one) is refused:
        :class:`~toolstitch.errors.UnsafeToolCallError` is raised."""
        self._input_over(None)
        if self.guard:
            refused = self._refusal(self.accumulator.calls(), None)
            if refused is not None:
                raise refused

    def record(self, target: str | os.PathLike[str] | IO[str], *, redact: Redact = False) -> Recorder:
        """Record this stream to ``target`` (a path, or an open text file) as JSONL.

        Call it before iterating: a recording that misses chunks could not be replayed into the
        same calls. Writing failures are reported once as a ``RecordingWarning`` (and in
        ``recorder.error``); they never reach the iteration.
        """
        if self.recorder is not None:
            raise RuntimeError(f"this stream is already recorded by {self.recorder!r}")
        if self.accumulator.metrics.chunks or self.accumulator.ended:
            raise RuntimeError("record() must be called before the stream is iterated")
        # The SDK stream knows the client that sent it (with_options copies included): its API key
        # must never reach the file, not even echoed in an error text.
        recorder = Recorder.for_stream(
            target, self.accumulator, self._request, redact=redact, client=self._client
        )
        self.recorder = recorder
        self._set_core_only()
        return recorder

    def _source_events(self, events: Sequence[Event]) -> Sequence[Event]:
        """``events``, after what the source itself did to the calls since (a resumed stream that
        refused the open calls: ``_resume``), so ``events()`` tells every change of a call."""
        notes = getattr(self._source, "notes", None)
        if not notes:
            return events
        taken = [*notes, *events]
        notes.clear()
        return taken

    def _input_over(self, error: BaseException | None) -> None:
        """The source finished, failed, or was closed (``GeneratorExit``, not a failure): mark the
        accumulator's input over and close the recording with the same outcome."""
        if self._over:
            return
        self._over = True
        if isinstance(error, GeneratorExit):
            self._ending = self.accumulator.end(None, closed=True)
        else:
            self._ending = self.accumulator.end(error)
        if self._source is not self._sdk_stream:
            self._ending = self._source_events(self._ending)
        if self.recorder is not None:
            self.recorder.on_end(error)

    @property
    def sdk_stream(self) -> Any:
        """What this stream reads: the SDK's own stream (``openai.Stream`` or
        ``openai.AsyncStream``), or the iterable given to :func:`~toolstitch.stitch`."""
        return self._sdk_stream

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of choice 0, in index order (live: check ``status``)."""
        return self.accumulator.tool_calls

    def calls(self, choice: int | None = None) -> list[ToolCall]:
        """The tool calls of one choice, or of all choices."""
        return self.accumulator.calls(choice)

    @property
    def anomalies(self) -> list[Anomaly]:
        """What the provider did differently in this stream."""
        return self.accumulator.anomalies


class StitchedStream(_Base, ClosedOnExit, openai.Stream[_ChunkT]):
    """Yields the SDK's ``ChatCompletionChunk`` objects unchanged while merging tool calls.

    An ``openai.Stream[ChatCompletionChunk]``. Iterate it for chunks, or iterate
    :meth:`events` for toolstitch events; not both at once (they share one pass over the source).
    """

    _iterator: Generator[_ChunkT, None, None]

    def _iterate(self) -> Generator[_ChunkT, None, None]:
        # Only ``for`` and closing are this twin's own; every decision is ``_Base``'s.
        refused = None
        try:
            feed = self.accumulator.feed
            for chunk in self._source:
                if self._core_only:
                    feed(chunk, events=False)
                elif (refused := self._take(chunk)) is not None:
                    break  # the guard: this chunk is not yielded
                yield chunk
        except BaseException as exc:
            error = self._failed(exc)
            if error is exc:
                raise
            raise error from exc
        if refused is not None:
            try:
                self._close_source()
            finally:
                self._input_over(GeneratorExit())  # closed by the guard: open calls incomplete
            raise refused
        self._completed()

    def __iter__(self) -> Iterator[_ChunkT]:
        return self._iterator

    def __next__(self) -> _ChunkT:
        return next(self._iterator)

    def events(self) -> Iterator[Event]:
        """Iterate the rest of the stream as toolstitch events instead of chunks.

        Content and reasoning deltas, calls started, argument deltas (``event.call.preview`` is the
        display-only value so far), arguments complete, calls ready / invalid / incomplete, choices
        finished, anomalies, and last ``StreamEnded``. Recording, metrics and the final completion
        are exactly those of iterating chunks. An error from the SDK is raised after the events of
        the end (open calls ``incomplete``, ``StreamEnded`` with the error) were yielded.
        """
        self._events = True
        self._set_core_only()
        try:
            for _chunk in self._iterator:
                yield from self._pending
        except GeneratorExit:
            # Closed or finalised early (a ``break``, ``close()``): nothing more may be yielded,
            # and what it read is released at once, as leaving ``with stream:`` would.
            self.close()
            raise
        except BaseException:
            yield from self._ending
            raise
        yield from self._ending
        self._ending = _NO_EVENTS

    def close(self) -> None:
        """Close the HTTP response. Calls not yet sealed become ``incomplete``."""
        self._iterator.close()
        self._close_source()
        self._input_over(GeneratorExit())

    def _close_source(self) -> None:
        close = getattr(self._source, "close", None)
        if callable(close):
            close()

    def until_done(self) -> Self:
        """Consume the rest of the stream (chunks are still fed to the accumulator)."""
        for _ in self._iterator:
            pass
        return self

    def get_final_completion(self) -> ChatCompletion:
        """Consume what is left, then build the ``ChatCompletion``.

        Raises ``IncompleteStreamError`` when a choice never received a ``finish_reason``
        (including when the stream was closed early).
        """
        if not self.accumulator.ended:
            self.until_done()
        accumulator = self.accumulator
        if not isinstance(accumulator, Accumulator):
            raise TypeError("a Responses API stream builds a Response: call get_final_response()")
        return accumulator.get_final_completion()


class AsyncStitchedStream(_Base, ClosedOnAsyncExit, openai.AsyncStream[_ChunkT]):
    """The async twin of :class:`StitchedStream`; an ``openai.AsyncStream[ChatCompletionChunk]``."""

    _iterator: AsyncGenerator[_ChunkT, None]

    async def _iterate(self) -> AsyncGenerator[_ChunkT, None]:
        # Only ``async for`` and closing are this twin's own; every decision is ``_Base``'s.
        refused = None
        try:
            feed = self.accumulator.feed
            async for chunk in self._source:
                if self._core_only:
                    feed(chunk, events=False)
                elif (refused := self._take(chunk)) is not None:
                    break  # the guard: this chunk is not yielded
                yield chunk
        except BaseException as exc:
            error = self._failed(exc)
            if error is exc:
                raise
            raise error from exc
        if refused is not None:
            try:
                await self._close_source()
            finally:
                self._input_over(GeneratorExit())  # closed by the guard: open calls incomplete
            raise refused
        self._completed()

    def __aiter__(self) -> AsyncIterator[_ChunkT]:
        # openai.AsyncStream declares ``async def __aiter__`` (an async generator); the iterator
        # itself is the same thing without a second generator around it.
        return self._iterator

    async def __anext__(self) -> _ChunkT:
        return await self._iterator.__anext__()

    async def events(self) -> AsyncIterator[Event]:
        """The async twin of :meth:`StitchedStream.events`: ``async for event in stream.events()``."""
        self._events = True
        self._set_core_only()
        try:
            async for _chunk in self._iterator:
                for event in self._pending:
                    yield event
        except GeneratorExit:
            await self.close()  # as the sync twin: closed early, released at once
            raise
        except BaseException:
            for event in self._ending:
                yield event
            raise
        for event in self._ending:
            yield event
        self._ending = _NO_EVENTS

    async def close(self) -> None:
        """Close the HTTP response. Calls not yet sealed become ``incomplete``."""
        await self._iterator.aclose()
        await self._close_source()
        self._input_over(GeneratorExit())

    async def _close_source(self) -> None:
        source = self._source
        close = getattr(source, "aclose", None) if not isinstance(source, openai.AsyncStream) else None
        close = close or getattr(source, "close", None)
        if callable(close):
            done = close()
            if inspect.isawaitable(done):
                await done

    async def until_done(self) -> Self:
        """Consume the rest of the stream (chunks are still fed to the accumulator)."""
        async for _ in self._iterator:
            pass
        return self

    async def get_final_completion(self) -> ChatCompletion:
        """Consume what is left, then build the ``ChatCompletion`` (see the sync twin)."""
        if not self.accumulator.ended:
            await self.until_done()
        accumulator = self.accumulator
        if not isinstance(accumulator, Accumulator):
            raise TypeError("a Responses API stream builds a Response: call get_final_response()")
        return accumulator.get_final_completion()
