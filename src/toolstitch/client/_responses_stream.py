"""The Responses API on a wrapped client: the same guarantees as for Chat Completions.

=======================================================================  ==========================
``responses.create(..., stream=True)``                                  a ``StitchedResponseStream``
                                                                         (async: the async twin)
``responses.with_raw_response.create(..., stream=True)``                the SDK's raw response;
(also ``client.with_raw_response.responses``)                           ``.parse()`` is stitched
``responses.with_streaming_response.create(..., stream=True)``          the SDK's context manager;
(also ``client.with_streaming_response.responses``)                     ``.parse()`` is stitched
``responses.stream(...)``                                               the SDK's helper stream and
                                                                         its events, plus
                                                                         ``.toolstitch`` and
                                                                         ``.tool_calls``
=======================================================================  ==========================

A stitched Responses stream is a :class:`~._stream.StitchedStream` (so an ``openai.Stream``) whose
core is a :class:`~toolstitch.core._responses.ResponseAccumulator`: iterating it yields the SDK's
own event objects, unchanged and in order; ``tool_calls``, ``events()``, ``record()``, ``close()``
and the context manager are the chat stream's; :meth:`StitchedResponseStream.get_final_response`
builds the SDK's ``Response``. The request's ``tools``, ``tool_choice`` and
``parallel_tool_calls`` (flat, as this API takes them; from ``extra_body`` too) are the contract
(``recording._responses_contract``).

What stays the SDK's, unstitched: every request that does not stream, ``responses.retrieve(...,
stream=True)`` and ``responses.stream(response_id=...)`` (a stream resumed by id: its request,
hence its contract, is not known here; the latter warns once), ``parse``, and the rest.

:func:`response_tool_calls` is ``ts.calls_of`` for a ``Response`` that was not streamed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import openai

from ..core import Limits, ResponseAccumulator, ToolCall, now
from ..recording import (
    Contract,
    given_responses_contract,
    read_responses_contract,
    recording_path,
    responses_accumulator,
)
from ._fast import install
from ._proxy import Proxy, Wrapped, like, proxied_stream
from ._request import creator, read_request
from ._responses import (
    AsyncHelperManager,
    AsyncResponseManager,
    HelperManager,
    RawResponse,
    ResponseManager,
)
from ._resume import (
    AsyncResumingSource,
    Resume,
    ResumingSource,
    Resumption,
    can_resume,
    wants_background,
)
from ._stream import AsyncStitchedStream, StitchedStream

if TYPE_CHECKING:
    from openai.types.responses import Response, ResponseStreamEvent

    from ._wrap import _Options

if not TYPE_CHECKING:
    # What the streams yield, for type checkers; at run time a subscript only (openai releases
    # before 1.66 have no Responses types, and the floor is older).
    ResponseStreamEvent = Any

__all__ = [
    "AsyncStitchedResponseStream",
    "Responses",
    "StitchedResponseStream",
    "is_response",
    "response_tool_calls",
    "responses_of",
    "stitched_responses",
]


class StitchedResponseStream(StitchedStream[ResponseStreamEvent]):
    """Yields the SDK's Responses stream events unchanged while merging function calls.

    An ``openai.Stream``: iterate it for the SDK's ``ResponseStreamEvent`` objects, or iterate
    :meth:`events` for toolstitch events. ``tool_calls`` are the ``function_call`` items' calls in
    output order (``id`` is the item's ``call_id``); :meth:`get_final_response` is the SDK's
    ``Response``.
    """

    accumulator: ResponseAccumulator

    @property
    def resumes(self) -> list[Resume]:
        """Each time the connection dropped and the stream was resumed (a background response):
        after which event, how many retrieve requests it took, whether one brought events."""
        return list(getattr(self._source, "resumes", ()))

    @property
    def response_id(self) -> str | None:
        """The response's id, once ``response.created`` (or any event with the response) arrived."""
        state = getattr(self._source, "state", None)
        if state is not None:
            return state.response_id  # type: ignore[no-any-return]
        return self.accumulator.response_id

    @property
    def last_sequence_number(self) -> int | None:
        """The sequence number of the last event read: where a resume starts after."""
        state = getattr(self._source, "state", None)
        if state is not None:
            return state.last  # type: ignore[no-any-return]
        return None

    @property
    def resume_point(self) -> int | None:
        """The sequence number of the event that announced the response (``response.created``): a
        stream resumed after it (``ts.resume(..., starting_after=...)``, say in another process)
        reads every item whole. None until it arrived, or for a stream that cannot be resumed."""
        state = getattr(self._source, "state", None)
        return state.announced_at if state is not None else None

    def get_final_response(self) -> Response:
        """Consume what is left, then build the SDK's ``Response``.

        Raises :class:`~toolstitch.errors.IncompleteStreamError` when the stream did not end with
        ``response.completed`` or ``response.incomplete`` (it broke, was closed early, carried an
        ``error`` event or ``response.failed``).
        """
        if not self.accumulator.ended:
            self.until_done()
        response: Response = self.accumulator.get_final_response()
        return response

    def get_final_completion(self) -> Any:
        """A Responses stream has no ``ChatCompletion``: use :meth:`get_final_response`."""
        raise TypeError("a Responses API stream builds a Response: call get_final_response()")


class AsyncStitchedResponseStream(AsyncStitchedStream[ResponseStreamEvent]):
    """The async twin of :class:`StitchedResponseStream`; ``await stream.get_final_response()``."""

    accumulator: ResponseAccumulator

    resumes = StitchedResponseStream.resumes
    response_id = StitchedResponseStream.response_id
    last_sequence_number = StitchedResponseStream.last_sequence_number
    resume_point = StitchedResponseStream.resume_point

    async def get_final_response(self) -> Response:
        """Consume what is left, then build the SDK's ``Response`` (see the sync twin)."""
        if not self.accumulator.ended:
            await self.until_done()
        response: Response = self.accumulator.get_final_response()
        return response

    async def get_final_completion(self) -> Any:
        """A Responses stream has no ``ChatCompletion``: use :meth:`get_final_response`."""
        raise TypeError("a Responses API stream builds a Response: call get_final_response()")


def response_tool_calls(
    response: Any,
    *,
    tools: Iterable[Any] | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool | None = None,
    limits: Limits | None = None,
    empty_arguments: Literal["invalid", "object"] = "invalid",
) -> list[ToolCall]:
    """The calls of a non-streamed ``Response`` (an SDK object or a dict): its ``function_call``
    items, sealed and checked as a stream's are (``ready`` only when the response is
    ``completed``, the arguments parse and fit the offered tool, ``tool_choice`` and
    ``parallel_tool_calls``). Never raises on a hostile response."""
    contract = given_responses_contract(tools, tool_choice, parallel_tool_calls)
    accumulator = responses_accumulator(contract, limits=limits, empty_arguments=empty_arguments)
    accumulator.read_response(response)
    accumulator.end()
    return accumulator.calls(0)


def is_response(value: Any) -> bool:
    """True for a Responses API ``Response`` (the SDK's, or a dict with ``"object": "response"``)."""
    if isinstance(value, Mapping):
        try:
            return value.get("object") == "response"
        except Exception:
            return False
    cls = type(value)
    return cls.__name__ in ("Response", "ParsedResponse") and cls.__module__.startswith("openai.")


def stitched_responses(
    opts: _Options,
    sdk_result: Any,
    request: Mapping[str, Any],
    started: float,
    path: str,
    retrieve: Any = None,
    *,
    contract: Contract | None = None,
    response_id: str | None = None,
    after: int | None = None,
) -> Any:
    """The stitched Responses stream over the SDK's ``sdk_result`` when it is an ``openai.Stream``
    or ``openai.AsyncStream``; anything else is returned as it is, with one warning per path.

    With ``retrieve`` (the SDK's ``responses.retrieve``) and a background request, the stream
    resumes itself when its connection drops (``_resume``), unless ``wrap(resume=False)``;
    ``response_id`` and ``after`` say where a retrieve stream starts (``ts.resume``)."""
    if isinstance(sdk_result, StitchedResponseStream | AsyncStitchedResponseStream):
        return sdk_result
    inner = proxied_stream(sdk_result)
    cls: type[StitchedResponseStream] | type[AsyncStitchedResponseStream]
    if isinstance(inner, openai.AsyncStream):
        cls = AsyncStitchedResponseStream
    elif isinstance(inner, openai.Stream):
        cls = StitchedResponseStream
    else:
        opts.unstitched(path, f"the SDK returned a {type(sdk_result).__name__}, not an openai.Stream")
        return sdk_result
    accumulator = responses_accumulator(
        contract if contract is not None else read_responses_contract(request),
        limits=opts.limits,
        empty_arguments=opts.empty_arguments,
        started_at=started,
    )
    source = None
    prepare = None
    if opts.decode == "fast":
        install(inner)  # before the first event is read, on the SDK's stream itself (rule 7)

        def prepare(resumed: Any) -> None:  # each resumed stream decodes as the first did
            install(proxied_stream(resumed))

    if retrieve is not None and wants_background(request) and can_resume(retrieve):
        # Read through a ResumingSource even with wrap(resume=False): it learns the response's id
        # (so a later retrieve of it is stitched); it resumes only under a policy.
        known = opts.requests
        state = Resumption(
            accumulator,
            response_id=response_id,
            last=after,
            resumed=response_id is not None and after is not None,
            on_id=lambda rid: known.remember(rid, request),
        )
        twin = AsyncResumingSource if cls is AsyncStitchedResponseStream else ResumingSource
        source = twin(sdk_result, retrieve, state, opts.resume, prepare)
    stream = cls(sdk_result, accumulator, request=request, guard=opts.guard, source=source)
    if opts.record is not None:
        stream.record(recording_path(opts.record), redact=opts.redact)
    return stream


class _Stitching:
    """The Responses variants of the chat objects of ``_responses``: their one stitching step."""

    __slots__ = ()

    _opts: _Options
    _request: dict[str, Any]
    _started: float
    _path: str

    def _keep(self, sdk_result: Any) -> Any:
        stitched = stitched_responses(self._opts, sdk_result, self._request, self._started, self._path)
        object.__setattr__(self, "_stitched", stitched)
        return stitched


class _RawResponse(_Stitching, RawResponse):
    __slots__ = ()


class _ResponseManager(_Stitching, ResponseManager):
    __slots__ = ()

    _response_class = _RawResponse


class _AsyncResponseManager(_Stitching, AsyncResponseManager):
    __slots__ = ()

    _response_class = _RawResponse


class _HelperManager(_Stitching, HelperManager):
    __slots__ = ()


class _AsyncHelperManager(_Stitching, AsyncHelperManager):
    __slots__ = ()


def _response_id(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The id a ``retrieve`` call names, given positionally or by keyword (the SDK's call took
    it: it was one of the two)."""
    return args[0] if args else kwargs.get("response_id")


class _RawResponses(Proxy):
    """``responses.with_raw_response``: a streamed ``create`` gives the SDK's raw response, whose
    ``parse()`` is a stitched stream."""

    __slots__ = ()

    @property
    def create(self) -> Any:
        opts = self._opts
        path = "responses.with_raw_response.create(stream=True)"

        def raw(result: Any, request: dict[str, Any], started: float) -> Any:
            return _RawResponse(result, opts, request, started, path)

        return creator(self._target.create, opts.is_async, raw)


class _StreamingResponses(Proxy):
    """``responses.with_streaming_response``: a streamed ``create`` gives the SDK's context
    manager; the response it enters parses to a stitched stream."""

    __slots__ = ()

    @property
    def create(self) -> Any:
        opts = self._opts
        manager = _AsyncResponseManager if opts.is_async else _ResponseManager
        path = "responses.with_streaming_response.create(stream=True)"

        def managed(result: Any, request: dict[str, Any], started: float) -> Any:
            return manager(result, opts, request, started, path)

        return creator(self._target.create, False, managed)


class Responses(Proxy):
    """``client.responses`` of a wrapped client: ``create(stream=True)`` returns a stitched stream,
    ``stream(...)`` the SDK's helper over one; the rest is the SDK's (``connect()``: the subclass
    ``_websocket.ConnectingResponses``)."""

    __slots__ = ()

    @property
    def create(self) -> Any:
        opts = self._opts

        retrieve = self._target.retrieve

        def stitched(result: Any, request: dict[str, Any], started: float) -> Any:
            return stitched_responses(
                opts, result, request, started, "responses.create(stream=True)", retrieve
            )

        return creator(self._target.create, opts.is_async, stitched)

    @property
    def retrieve(self) -> Any:
        """``retrieve(id, stream=True)`` of a background response this client created is stitched
        under that request's contract (and resumes itself too); any other is the SDK's."""
        sdk_retrieve = self._target.retrieve
        opts = self._opts

        def stitch(result: Any, response_id: Any, kwargs: dict[str, Any], started: float) -> Any:
            request = opts.requests.get(response_id)
            if request is None or kwargs.get("stream") is not True:
                return result
            after = kwargs.get("starting_after")
            return stitched_responses(
                opts,
                result,
                request,
                started,
                "responses.retrieve(stream=True)",
                sdk_retrieve,
                response_id=response_id,
                after=after if type(after) is int else None,
            )

        if opts.is_async:

            async def aretrieve(*args: Any, **kwargs: Any) -> Any:
                started = now()
                return stitch(
                    await sdk_retrieve(*args, **kwargs), _response_id(args, kwargs), kwargs, started
                )

            return like(sdk_retrieve, aretrieve)

        def retrieve(*args: Any, **kwargs: Any) -> Any:
            started = now()
            return stitch(sdk_retrieve(*args, **kwargs), _response_id(args, kwargs), kwargs, started)

        return like(sdk_retrieve, retrieve)

    @property
    def stream(self) -> Any:
        sdk_stream = self._target.stream
        opts = self._opts
        manager = _AsyncHelperManager if opts.is_async else _HelperManager
        path = "responses.stream()"

        def stream(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("response_id") is not None:
                opts.unstitched(path + " with response_id", "a stream resumed by id has no request to check")
                return sdk_stream(*args, **kwargs)
            sent, request, started = read_request(kwargs)
            return manager(sdk_stream(*args, **sent), opts, request, started, path)

        return like(sdk_stream, stream)

    with_raw_response = Wrapped(_RawResponses)
    with_streaming_response = Wrapped(_StreamingResponses)


def responses_of(target: Any, opts: _Options, kind: Literal["raw", "streaming"]) -> Any:
    """The hook ``_wrap`` calls for ``responses`` of a client's ``with_raw_response`` or
    ``with_streaming_response`` (the client's own is ``_websocket.ConnectingResponses``). An
    ``openai`` release without the Responses API has no ``responses`` attribute: the
    ``AttributeError`` is the SDK's own."""
    sdk = target.responses
    if kind == "raw":
        return _RawResponses(sdk, opts)
    return _StreamingResponses(sdk, opts)
