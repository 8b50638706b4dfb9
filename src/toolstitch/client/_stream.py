"""``StitchedStream`` and ``AsyncStitchedStream``: thin twins over one :class:`Accumulator`.

They iterate the SDK's own stream, feed each chunk to the accumulator, and yield the chunk object
unchanged (rule 5: pass-through first). Whatever the SDK raises (an in-band error event, a dropped
connection) reaches the caller unchanged, after the accumulator has marked every open call
``incomplete``. Closing the wrapper closes the SDK stream, and with it the HTTP response.

An optional recorder (see ``_recording``) sees each chunk before the caller does and the end of the
stream once; it is off by default, and it never raises into the iteration.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping
from types import TracebackType
from typing import IO, Any, Generic, Protocol, TypeVar

from openai.types.chat import ChatCompletion, ChatCompletionChunk

from ..core._accumulator import Accumulator
from ..core._anomaly import Anomaly
from ..core._call import ToolCall
from ..recording._recorder import Recorder, Redact

__all__ = ["AsyncStitchedStream", "StitchedStream", "StreamRecorder"]

_S = TypeVar("_S")


class StreamRecorder(Protocol):
    """What a stream tells a recorder: each chunk as it arrives, then the end, once."""

    def on_chunk(self, chunk: Any) -> None: ...

    def on_end(self, error: BaseException | None) -> None:
        """``None``: completed; ``GeneratorExit``: closed early; otherwise what the SDK raised."""


class _Base(Generic[_S]):
    """What both twins share: the accumulator and the read-only views over it."""

    def __init__(
        self,
        sdk_stream: _S,
        accumulator: Accumulator,
        *,
        recorder: StreamRecorder | None = None,
        request: Mapping[str, Any] | None = None,
    ) -> None:
        self._sdk_stream = sdk_stream
        self.accumulator = accumulator
        """The sans-I/O core fed by this stream."""
        self.recorder = recorder
        """What records this stream (``None`` unless recording was asked for)."""
        self._request = request
        self._iterator = self._iterate()

    def _iterate(self) -> Any:
        raise NotImplementedError  # each twin iterates its SDK stream its own way (for / async for)

    def _take(self, chunk: Any) -> None:
        """One chunk of the SDK stream, in both twins: the recorder sees it first, then the core."""
        if self.recorder is not None:
            self.recorder.on_chunk(chunk)
        self.accumulator.feed(chunk)

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
        client = getattr(self._sdk_stream, "_client", None)
        recorder = Recorder.for_stream(target, self.accumulator, self._request, redact=redact, client=client)
        self.recorder = recorder
        return recorder

    def _input_over(self, error: BaseException | None) -> None:
        """The SDK stream finished, failed, or was closed (``GeneratorExit``, not a failure): mark
        the accumulator's input over and close the recording with the same outcome."""
        if isinstance(error, GeneratorExit):
            self.accumulator.end(None, closed=True)
        else:
            self.accumulator.end(error)
        if self.recorder is not None:
            self.recorder.on_end(error)

    @property
    def sdk_stream(self) -> _S:
        """The SDK's own stream object (``openai.Stream`` or ``openai.AsyncStream``)."""
        return self._sdk_stream

    @property
    def response(self) -> Any:
        """The HTTP response of the SDK stream."""
        return getattr(self._sdk_stream, "response", None)

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


class StitchedStream(_Base[Any]):
    """Yields the SDK's ``ChatCompletionChunk`` objects unchanged while merging tool calls."""

    _iterator: Generator[ChatCompletionChunk, None, None]

    def _iterate(self) -> Generator[ChatCompletionChunk, None, None]:
        # The twins differ only in ``for``; what happens to a chunk is ``_take``, shared.
        try:
            for chunk in self._sdk_stream:
                self._take(chunk)
                yield chunk
        except BaseException as exc:
            self._input_over(exc)
            raise
        self._input_over(None)

    def __iter__(self) -> Iterator[ChatCompletionChunk]:
        return self._iterator

    def __next__(self) -> ChatCompletionChunk:
        return next(self._iterator)

    # The context-manager protocol, written out as Toolbox and testing.LocalServer write it: three
    # lines each, typed for their own class, which a shared mixin would only hide.
    def __enter__(self) -> StitchedStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP response. Calls not yet sealed become ``incomplete``."""
        self._iterator.close()
        self._sdk_stream.close()
        self._input_over(GeneratorExit())

    def until_done(self) -> StitchedStream:
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
        return self.accumulator.get_final_completion()


class AsyncStitchedStream(_Base[Any]):
    """The async twin of :class:`StitchedStream`."""

    _iterator: AsyncGenerator[ChatCompletionChunk, None]

    async def _iterate(self) -> AsyncGenerator[ChatCompletionChunk, None]:
        # The twins differ only in ``async for``; what happens to a chunk is ``_take``, shared.
        try:
            async for chunk in self._sdk_stream:
                self._take(chunk)
                yield chunk
        except BaseException as exc:
            self._input_over(exc)
            raise
        self._input_over(None)

    def __aiter__(self) -> AsyncIterator[ChatCompletionChunk]:
        return self._iterator

    async def __anext__(self) -> ChatCompletionChunk:
        return await self._iterator.__anext__()

    async def __aenter__(self) -> AsyncStitchedStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP response. Calls not yet sealed become ``incomplete``."""
        await self._iterator.aclose()
        await self._sdk_stream.close()
        self._input_over(GeneratorExit())

    async def until_done(self) -> AsyncStitchedStream:
        """Consume the rest of the stream (chunks are still fed to the accumulator)."""
        async for _ in self._iterator:
            pass
        return self

    async def get_final_completion(self) -> ChatCompletion:
        """Consume what is left, then build the ``ChatCompletion`` (see the sync twin)."""
        if not self.accumulator.ended:
            await self.until_done()
        return self.accumulator.get_final_completion()
