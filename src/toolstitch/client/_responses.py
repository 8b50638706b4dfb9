"""What the wrapped client's other streaming paths return: the SDK's objects, with the stream stitched.

* :class:`RawResponse`: the SDK's response to ``with_raw_response.create(stream=True)`` (and, once
  entered, to ``with_streaming_response.create(stream=True)``). Headers, status and the rest are the
  SDK's; ``parse()`` (the stream) is stitched, once, as the SDK caches its own parse.
* :class:`ResponseManager` / :class:`AsyncResponseManager`: the context manager that
  ``with_streaming_response.create(stream=True)`` returns; entering it gives a ``RawResponse``.
* :class:`HelperManager` / :class:`AsyncHelperManager`: the SDK's ``chat.completions.stream(...)``
  helper (also ``beta.chat.completions.stream``). Entering it gives the SDK's own
  ``ChatCompletionStream``, whose events are the SDK's, unchanged, but whose chunks are read
  through a stitched stream: ``stream.toolstitch`` is that stitched stream, ``stream.tool_calls``
  its calls. This needs the helper's ``_raw_stream`` (every release since the helper exists has
  it); a release without one gets the SDK's stream as it is, and an ``UnstitchedStreamWarning``.

Every one of them is a :class:`~._proxy.Proxy`: ``isinstance`` holds for the SDK class, and every
attribute not named here is the SDK object's own.
"""

from __future__ import annotations

import inspect
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

import openai

from .._context_managers import ClosedOnAsyncExit, ClosedOnExit
from ..core import Anomaly, ToolCall
from ._proxy import Proxy, like, proxied_stream
from ._stream import AsyncStitchedStream, StitchedStream

if TYPE_CHECKING:
    from ._wrap import _Options

__all__ = [
    "AsyncHelperManager",
    "AsyncHelperStream",
    "AsyncResponseManager",
    "HelperManager",
    "HelperStream",
    "RawResponse",
    "ResponseManager",
]

#: Methods of a streamed response that read its body as bytes or text, around the stream parser.
_BODY_READERS = frozenset(
    {
        "iter_bytes",
        "iter_text",
        "iter_lines",
        "iter_raw",
        "aiter_bytes",
        "aiter_text",
        "aiter_lines",
        "aiter_raw",
        "read",
        "aread",
        "text",
        "atext",
        "json",
        "ajson",
    }
)


class _Request(Proxy):
    """A proxy that carries one streamed request: its keyword arguments, when it started, and the
    path it came by (for the warning of a path that could not be stitched)."""

    __slots__ = ("_path", "_request", "_started", "_stitched")

    _request: dict[str, Any]
    _started: float
    _path: str
    _stitched: Any

    def __init__(
        self, target: Any, opts: _Options, request: dict[str, Any], started: float, path: str
    ) -> None:
        super().__init__(target, opts)
        object.__setattr__(self, "_request", request)
        object.__setattr__(self, "_started", started)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_stitched", None)

    def _keep(self, sdk_result: Any) -> Any:
        """Stitch the SDK's stream (once) and remember it."""
        stitched = self._opts.stitched(sdk_result, self._request, self._started, self._path)
        object.__setattr__(self, "_stitched", stitched)
        return stitched

    def _close_sync(self) -> None:
        """The stream's response was closed by the SDK: calls not yet sealed become incomplete
        (this one's stitched stream, or that of the response a manager's entering gave)."""
        stitched = self._stitched
        if isinstance(stitched, _Request):
            stitched._close_sync()
        elif isinstance(stitched, StitchedStream):
            stitched.close()

    async def _close_async(self) -> None:
        stitched = self._stitched
        if isinstance(stitched, _Request):
            await stitched._close_async()
        elif isinstance(stitched, AsyncStitchedStream):
            await stitched.close()

    _response_class: ClassVar[type[RawResponse]]
    """What entering a ``with_streaming_response`` manager gives (the Responses API's own class
    stitches its way: ``_responses_stream``)."""

    def _entered(self, sdk_response: Any) -> RawResponse:
        """A ``with_streaming_response`` manager was entered: the SDK's response, proxied, and
        remembered (leaving the manager closes its stream)."""
        response = self._response_class(sdk_response, self._opts, self._request, self._started, self._path)
        object.__setattr__(self, "_stitched", response)
        return response


class RawResponse(_Request):
    """The SDK's raw (or streaming) response to a streamed ``create``; ``parse()`` is stitched."""

    __slots__ = ()

    @property
    def parse(self) -> Any:
        sdk_parse = self._target.parse
        if inspect.iscoroutinefunction(sdk_parse):  # AsyncAPIResponse.parse

            async def aparse(*args: Any, **kwargs: Any) -> Any:
                if args or kwargs:
                    return self._own_type(await sdk_parse(*args, **kwargs))
                if self._stitched is None:
                    return self._keep(await sdk_parse())
                return self._stitched

            return like(sdk_parse, aparse)

        def parse(*args: Any, **kwargs: Any) -> Any:
            if args or kwargs:
                return self._own_type(sdk_parse(*args, **kwargs))
            if self._stitched is None:
                return self._keep(sdk_parse())
            return self._stitched

        return like(sdk_parse, parse)

    def _own_type(self, result: Any) -> Any:
        """``parse(to=...)``: the caller asked for a type of their own; it is theirs, unstitched."""
        self._opts.unstitched(f"{self._path}(...).parse(to=...)", "parse(to=...) returns the type asked for")
        return result

    def __getattr__(self, name: str) -> Any:
        if name in _BODY_READERS and self._stitched is None:
            self._opts.unstitched(f"{self._path}(...).{name}()", "the body is read around the stream parser")
        return getattr(self._target, name)


class _StreamManager(_Request):
    """A context manager of the SDK's whose entering streams (sync): leaving it is the SDK's, then
    what entering stitched is closed."""

    __slots__ = ()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return self._target.__exit__(exc_type, exc, tb)
        finally:
            self._close_sync()


class _AsyncStreamManager(_Request):
    """The async twin of :class:`_StreamManager`."""

    __slots__ = ()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return await self._target.__aexit__(exc_type, exc, tb)
        finally:
            await self._close_async()


class ResponseManager(_StreamManager):
    """``with_streaming_response.create(stream=True)`` of a sync client: a context manager."""

    __slots__ = ()

    _response_class = RawResponse

    def __enter__(self) -> RawResponse:
        return self._entered(self._target.__enter__())


class AsyncResponseManager(_AsyncStreamManager):
    """``with_streaming_response.create(stream=True)`` of an async client: an async context manager."""

    __slots__ = ()

    _response_class = RawResponse

    async def __aenter__(self) -> RawResponse:
        return self._entered(await self._target.__aenter__())


def _raw_stream(sdk_stream: Any, kind: type) -> Any:
    """The SDK stream a ``ChatCompletionStream`` reads, when it can be swapped: an instance
    attribute ``_raw_stream`` holding an ``openai.Stream`` (or ``AsyncStream``), or an
    instrumentation's proxy of one (OpenTelemetry's openai-v2 wraps it), else None."""
    try:
        raw = vars(sdk_stream).get("_raw_stream")
    except TypeError:  # no __dict__
        return None
    return raw if isinstance(proxied_stream(raw), kind) else None


class HelperManager(_StreamManager):
    """The SDK's ``chat.completions.stream(...)`` manager (sync): entering it stitches the stream."""

    __slots__ = ()

    def __enter__(self) -> Any:
        sdk_stream = self._target.__enter__()
        raw = _raw_stream(sdk_stream, openai.Stream)
        if raw is None:
            self._opts.unstitched(self._path, "this openai release's helper stream has no _raw_stream")
            return sdk_stream
        stitched = self._keep(raw)
        sdk_stream._raw_stream = stitched  # the SDK's events now read the chunks through toolstitch
        return HelperStream(sdk_stream, self._opts, stitched)


class AsyncHelperManager(_AsyncStreamManager):
    """The async twin of :class:`HelperManager`."""

    __slots__ = ()

    async def __aenter__(self) -> Any:
        sdk_stream = await self._target.__aenter__()
        raw = _raw_stream(sdk_stream, openai.AsyncStream)
        if raw is None:
            self._opts.unstitched(self._path, "this openai release's helper stream has no _raw_stream")
            return sdk_stream
        stitched = self._keep(raw)
        sdk_stream._raw_stream = stitched
        return AsyncHelperStream(sdk_stream, self._opts, stitched)


class _Helper(Proxy):
    """What both helper-stream twins add to the SDK's ``ChatCompletionStream``."""

    __slots__ = ("_stitched",)

    _stitched: Any

    def __init__(self, target: Any, opts: _Options, stitched: Any) -> None:
        super().__init__(target, opts)
        object.__setattr__(self, "_stitched", stitched)

    @property
    def toolstitch(self) -> Any:
        """The stitched stream the SDK's events are read from: its calls, statuses, anomalies,
        metrics and its own ``get_final_completion()``."""
        return self._stitched

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of choice 0, in index order (live: check ``status``)."""
        calls: list[ToolCall] = self._stitched.tool_calls
        return calls

    def calls(self, choice: int | None = None) -> list[ToolCall]:
        """The tool calls of one choice, or of all choices."""
        calls: list[ToolCall] = self._stitched.calls(choice)
        return calls

    @property
    def anomalies(self) -> list[Anomaly]:
        """What the provider did differently in this stream."""
        anomalies: list[Anomaly] = self._stitched.anomalies
        return anomalies


class HelperStream(_Helper, ClosedOnExit):
    """The SDK's ``ChatCompletionStream`` (its events, its ``get_final_completion``), plus
    ``toolstitch`` and ``tool_calls``."""

    __slots__ = ()

    def __iter__(self) -> Any:
        return iter(self._target)

    def __next__(self) -> Any:
        return next(self._target)

    def close(self) -> None:
        """Close the response; calls not yet sealed become ``incomplete``."""
        try:
            self._target.close()
        finally:
            self._stitched.close()

    def until_done(self) -> HelperStream:
        self._target.until_done()
        return self


class AsyncHelperStream(_Helper, ClosedOnAsyncExit):
    """The async twin of :class:`HelperStream`."""

    __slots__ = ()

    def __aiter__(self) -> Any:
        return self._target.__aiter__()

    async def __anext__(self) -> Any:
        return await self._target.__anext__()

    async def close(self) -> None:
        """Close the response; calls not yet sealed become ``incomplete``."""
        try:
            await self._target.close()
        finally:
            await self._stitched.close()

    async def until_done(self) -> AsyncHelperStream:
        await self._target.until_done()
        return self
