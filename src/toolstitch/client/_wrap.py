"""``wrap(client)``: the drop-in proxy.

What it intercepts: every way the SDK streams chat completions, sync and async.

=========================================================================  =========================
``chat.completions.create(..., stream=True)``                              a ``StitchedStream``
``chat.completions.with_raw_response.create(..., stream=True)``            the SDK's raw response;
(also ``client.with_raw_response.chat...``, ``chat.with_raw_response...``)  ``.parse()`` is stitched
``chat.completions.with_streaming_response.create(..., stream=True)``      the SDK's context manager;
(also through ``client.`` and ``chat.with_streaming_response``)             ``.parse()`` is stitched
``chat.completions.stream(...)``, ``beta.chat.completions.stream(...)``    the SDK's helper stream and
                                                                           its events, plus
                                                                           ``.toolstitch`` and
                                                                           ``.tool_calls``
=========================================================================  =========================

Each of them also through ``client.with_options(...)`` and ``client.copy(...)`` (whose clients are
wrapped the same way). Each streamed request is read once by :func:`~._request.read_request`: its ``tools``
(and ``functions``), ``tool_choice`` and ``parallel_tool_calls``, from its keyword arguments or from
``extra_body`` over them, are the contract its calls are checked against (``recording._contract``:
one that cannot be read refuses every call).

What it leaves alone: every request that does not stream (``create()`` without ``stream=True``,
``parse()``, ``retrieve``/``list``/``delete``), other APIs (``completions``, ``embeddings`` ...;
the Responses API's streamed paths are stitched by ``_responses_stream``), and every attribute:
reads and writes go to the client. A streamed path that
cannot be stitched (the SDK returned something that is not an ``openai.Stream``, ``parse(to=...)``,
reading a streamed response's body as bytes or text, a helper stream without ``_raw_stream``) is
returned as it is, with one ``UnstitchedStreamWarning`` per client and path.

The wrapped client and every object on those paths are :class:`~._proxy.Proxy` objects:
``isinstance`` holds for the SDK's classes (and the wrapped client's ``type()`` is a subclass of the
client's class, whose attributes it reads from the client), intercepted methods keep the SDK's name,
docstring and signature, and the client is a context manager (async: an async one) that gives the
wrapper and closes the client.

The client's own low-level ``post(...)`` and ``request(...)`` stitch a streamed chat-completions
call too, and warn once for one they cannot (see ``_lowlevel``).

``wrap(client, record="dir/")`` records every stream to its own JSONL file in ``dir/`` (see
``_recording``); recording is off by default.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import openai
from openai import AsyncOpenAI, OpenAI
from openai._legacy_response import LegacyAPIResponse
from openai._response import BaseAPIResponse

if TYPE_CHECKING:
    from openai import AsyncAzureOpenAI, AzureOpenAI
    from typing_extensions import Unpack

    from ._types import (
        AsyncStitchedAzureOpenAI,
        AsyncStitchedOpenAI,
        StitchedAzureOpenAI,
        StitchedOpenAI,
        WrapOptions,
    )

from ..core import Accumulator, Limits
from ..errors import UnstitchedStreamWarning
from ..recording import Redact, read_contract, recording_path, redact_parts
from . import _lowlevel, _responses_stream, _websocket
from ._fast import Decode, install
from ._proxy import Proxy, Wrapped, like, proxied_stream
from ._request import creator, read_request
from ._responses import (
    AsyncHelperManager,
    AsyncResponseManager,
    HelperManager,
    RawResponse,
    ResponseManager,
)
from ._resume import KnownRequests, ResumePolicy
from ._stream import AsyncStitchedStream, StitchedStream

__all__ = ["WrappedClient", "wrap"]

_Stream = TypeVar("_Stream", StitchedStream, AsyncStitchedStream)


class _Options:
    """What ``wrap`` was told, handed down to every proxy and accumulator."""

    __slots__ = (
        "_warned",
        "decode",
        "empty_arguments",
        "guard",
        "is_async",
        "limits",
        "record",
        "recover_text_tool_calls",
        "redact",
        "requests",
        "resume",
    )

    def __init__(
        self,
        limits: Limits | None,
        empty_arguments: Literal["invalid", "object"],
        record: Path | None = None,
        redact: Redact = False,
        recover_text_tool_calls: bool = False,
        *,
        is_async: bool = False,
        decode: Decode = "fast",
        guard: bool = False,
        resume: bool | ResumePolicy = True,
    ) -> None:
        if not isinstance(resume, bool | ResumePolicy):
            raise TypeError(f"resume must be True, False or a ResumePolicy, not {type(resume).__name__}")
        self.resume: ResumePolicy | None = (
            resume if isinstance(resume, ResumePolicy) else ResumePolicy() if resume else None
        )
        """How a dropped background Responses stream is resumed (None: it is not; see ``_resume``)."""
        self.requests = KnownRequests()
        """The requests of the background responses this client created, by response id: a
        ``responses.retrieve(id, stream=True)`` of one of them is stitched under its contract."""
        if decode not in ("sdk", "fast"):
            raise ValueError(f'decode must be "sdk" or "fast", not {decode!r}')
        self.decode: Decode = decode
        """``"fast"``: streams build their chunks with pydantic-core (see ``_fast``)."""
        self.guard = bool(guard)
        """Streams raise ``UnsafeToolCallError`` in place of the finish of a choice holding a call
        that is not ready (see ``_stream``)."""
        self.is_async = is_async
        """The client is an ``AsyncOpenAI``: its ``create`` methods are awaited."""
        self._warned: set[str] = set()
        self.limits = limits
        self.recover_text_tool_calls = recover_text_tool_calls
        self.empty_arguments: Literal["invalid", "object"] = empty_arguments
        self.record = record
        self.redact = redact
        redact_parts(redact)  # a wrong value fails here, not on the first stream

    def stitch(
        self, cls: type[_Stream], sdk_stream: Any, request: Mapping[str, Any], started: float
    ) -> _Stream:
        """The stitched stream over ``sdk_stream``, with an accumulator that knows ``request``'s
        contract, recorded to a new file when ``wrap(record=...)`` asked for it."""
        stream = cls(sdk_stream, self.accumulator(request, started), request=request, guard=self.guard)
        if self.decode == "fast":
            # Before the first chunk is read, on the SDK's stream itself (inside an instrumentation's
            # proxy, too); the stitched stream keeps the real client.
            install(proxied_stream(sdk_stream))
        if self.record is not None:
            stream.record(recording_path(self.record), redact=self.redact)
        return stream

    def stitched(self, sdk_result: Any, request: Mapping[str, Any], started: float, path: str) -> Any:
        """The stitched stream over the SDK's ``sdk_result`` when it is an ``openai.Stream`` or
        ``openai.AsyncStream``; the SDK's raw response, whose ``parse()`` is stitched, when the
        request asked for one by header (LiteLLM's ``client=`` path posts so); anything else is
        returned as it is, with one warning per path."""
        if isinstance(sdk_result, StitchedStream | AsyncStitchedStream | RawResponse):
            return sdk_result  # already stitched (a client wrapped below the SDK's own methods)
        if isinstance(sdk_result, _RAW_RESPONSES):
            return RawResponse(sdk_result, self, dict(request), started, path)
        # An instrumentation's proxy of the SDK's stream (OpenTelemetry's openai-v2 returns one)
        # is stitched over the proxy, so that the proxy still sees every chunk and its close.
        inner = proxied_stream(sdk_result)
        if isinstance(inner, openai.AsyncStream):
            return self.stitch(AsyncStitchedStream, sdk_result, request, started)
        if isinstance(inner, openai.Stream):
            return self.stitch(StitchedStream, sdk_result, request, started)
        self.unstitched(path, f"the SDK returned a {type(sdk_result).__name__}, not an openai.Stream")
        return sdk_result

    def unstitched(self, path: str, why: str, stacklevel: int = 4) -> None:
        """Warn, once per wrapped client (and its copies) and path, that ``path`` is not stitched
        (``stacklevel``: how far up the caller's frame is, counted from here)."""
        if path in self._warned:
            return
        self._warned.add(path)
        warnings.warn(
            f"toolstitch could not stitch {path}: {why}. The SDK's object is returned as it is: its "
            "tool calls are not merged, checked or given a status.",
            UnstitchedStreamWarning,
            stacklevel=stacklevel,
        )

    def accumulator(self, request: Mapping[str, Any], started_at: float) -> Accumulator:
        """An accumulator for one streamed request (``request`` as :func:`~._request.read_request` made it),
        holding its calls to the request's contract as :func:`read_contract` reads it, wherever the
        SDK sends it from (keyword arguments, ``extra_body``); a contract that cannot be read
        refuses every call."""
        return read_contract(request).accumulator(
            limits=self.limits,
            empty_arguments=self.empty_arguments,
            started_at=started_at,
            recover_text_tool_calls=self.recover_text_tool_calls,
        )


#: The SDK's raw responses: what a streamed request returns when it asks for one by header
#: (``X-Stainless-Raw-Response``), as ``with_raw_response`` and ``with_streaming_response`` do.
_RAW_RESPONSES = (LegacyAPIResponse, BaseAPIResponse)


# The proxies below each stand for one step of an attribute path of the SDK client
# (client -> chat -> completions, and the with_raw_response / with_streaming_response / beta
# paths); their properties look alike because each hands the next step its proxy. A table-driven
# proxy would hide which paths exist.


class _RawCompletions(Proxy):
    """``chat.completions.with_raw_response``: a streamed ``create`` gives the SDK's raw response,
    whose ``parse()`` is a stitched stream."""

    __slots__ = ()

    @property
    def create(self) -> Any:
        opts = self._opts

        def raw(result: Any, request: dict[str, Any], started: float) -> Any:
            return RawResponse(result, opts, request, started, "with_raw_response.create(stream=True)")

        return creator(self._target.create, opts.is_async, raw)


class _StreamingCompletions(Proxy):
    """``chat.completions.with_streaming_response``: a streamed ``create`` gives the SDK's context
    manager; the response it enters to parses to a stitched stream."""

    __slots__ = ()

    @property
    def create(self) -> Any:
        opts = self._opts
        manager = AsyncResponseManager if opts.is_async else ResponseManager

        def managed(result: Any, request: dict[str, Any], started: float) -> Any:
            return manager(result, opts, request, started, "with_streaming_response.create(stream=True)")

        return creator(self._target.create, False, managed)  # the SDK returns the manager unawaited


class _Completions(Proxy):
    """``chat.completions`` (and ``beta.chat.completions``): ``create(stream=True)`` returns a
    stitched stream, ``stream(...)`` the SDK's helper over one; the rest is the SDK's."""

    __slots__ = ()

    @property
    def create(self) -> Any:
        opts = self._opts

        def stitched(result: Any, request: dict[str, Any], started: float) -> Any:
            return opts.stitched(result, request, started, "chat.completions.create(stream=True)")

        return creator(self._target.create, opts.is_async, stitched)

    @property
    def stream(self) -> Any:
        sdk_stream = self._target.stream
        opts = self._opts
        manager = AsyncHelperManager if opts.is_async else HelperManager

        def stream(*args: Any, **kwargs: Any) -> Any:
            sent, request, started = read_request(kwargs)
            return manager(sdk_stream(*args, **sent), opts, request, started, "chat.completions.stream()")

        return like(sdk_stream, stream)

    with_raw_response = Wrapped(_RawCompletions)
    with_streaming_response = Wrapped(_StreamingCompletions)


class _RawChat(Proxy):
    """``chat.with_raw_response`` (and ``client.with_raw_response.chat``)."""

    __slots__ = ()

    completions = Wrapped(_RawCompletions)


class _StreamingChat(Proxy):
    """``chat.with_streaming_response`` (and ``client.with_streaming_response.chat``)."""

    __slots__ = ()

    completions = Wrapped(_StreamingCompletions)


class _Chat(Proxy):
    """``chat`` (and ``beta.chat``)."""

    __slots__ = ()

    completions = Wrapped(_Completions)
    with_raw_response = Wrapped(_RawChat)
    with_streaming_response = Wrapped(_StreamingChat)


class _Beta(Proxy):
    """``client.beta``: its ``chat`` (older releases hold the ``stream()`` helper there)."""

    __slots__ = ()

    chat = Wrapped(_Chat)


class _RawClient(Proxy):
    """``client.with_raw_response``."""

    __slots__ = ()

    chat = Wrapped(_RawChat)

    @property
    def responses(self) -> Any:
        return _responses_stream.responses_of(self._target, self._opts, "raw")


class _StreamingClient(Proxy):
    """``client.with_streaming_response``."""

    __slots__ = ()

    chat = Wrapped(_StreamingChat)

    @property
    def responses(self) -> Any:
        return _responses_stream.responses_of(self._target, self._opts, "streaming")


class WrappedClient(Proxy):
    """The object ``wrap`` returns: the original client, with streamed tool calls stitched.

    ``isinstance(wrapped, type(client))`` holds (see :class:`~._proxy.Proxy`); its sync twin is a
    context manager and its async twin an async context manager, as the SDK's clients are: entering
    gives the wrapper, leaving closes the client.
    """

    __slots__ = ()

    @staticmethod
    def _of(client: Any, opts: _Options) -> WrappedClient:
        """The twin that fits ``client``, as an instance of a subclass of ``type(client)`` too."""
        twin = _AsyncWrappedClient if opts.is_async else _SyncWrappedClient
        cls: type[WrappedClient] = _subclassing(twin, type(client))
        return cls(client, opts)

    def __getattribute__(self, name: str) -> Any:
        # The class also derives from the SDK's client class (see _subclassing), whose methods and
        # properties would otherwise run on the proxy itself: every name toolstitch does not define
        # is the client's own, read from the client (so a method patched on the client, as
        # logfire's instrument_openai patches ``request``, is the one that runs).
        if name in _own_names(type(self)):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, "_target"), name)

    chat = Wrapped(_Chat)
    beta = Wrapped(_Beta)

    @property
    def responses(self) -> Any:
        """The Responses API, its streamed paths stitched (``_responses_stream``), and its WebSocket
        connections (``_websocket``)."""
        return _websocket.ConnectingResponses(self._target.responses, self._opts, self._target)

    @property
    def unwrapped(self) -> Any:
        """The original client."""
        return self._target

    @property
    def guarded(self) -> bool:
        """Wrapped with ``guard=True``: its streams raise ``UnsafeToolCallError`` in place of the
        finish of a choice holding a call that is not ready (``ts.run`` then dispatches nothing early)."""
        return bool(self._opts.guard)

    with_raw_response = Wrapped(_RawClient)
    with_streaming_response = Wrapped(_StreamingClient)

    @property
    def post(self) -> Any:
        return _lowlevel.post(self._opts, self._target)

    @property
    def request(self) -> Any:
        return _lowlevel.request(self._opts, self._target)

    @property
    def with_options(self) -> Any:
        return self._rewrapping(self._target.with_options)

    @property
    def copy(self) -> Any:
        return self._rewrapping(self._target.copy)

    def _rewrapping(self, sdk_method: Any) -> Any:
        """``sdk_method`` (``copy``/``with_options``), whose new client is wrapped the same way."""
        opts = self._opts

        def rewrapped(*args: Any, **kwargs: Any) -> WrappedClient:
            return WrappedClient._of(sdk_method(*args, **kwargs), opts)

        return like(sdk_method, rewrapped)


class _SyncWrappedClient(WrappedClient):
    """``wrap(OpenAI(...))`` (and Azure): ``with ts.wrap(client) as c`` gives the wrapper."""

    __slots__ = ()

    def __enter__(self) -> Any:
        self._target.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        return self._target.__exit__(exc_type, exc, tb)


class _AsyncWrappedClient(WrappedClient):
    """``wrap(AsyncOpenAI(...))`` (and Azure): ``async with ts.wrap(client) as c`` gives the wrapper."""

    __slots__ = ()

    async def __aenter__(self) -> Any:
        await self._target.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        return await self._target.__aexit__(exc_type, exc, tb)


#: Class attributes every class has, which are the client's to answer, not the proxy's.
_NOT_OWN = frozenset({"__doc__", "__module__", "__qualname__", "__dict__", "__weakref__", "__slots__"})


_OWN_NAMES: dict[type, frozenset[str]] = {}
_SUBCLASSES: dict[tuple[type, type], type[WrappedClient]] = {}


def _own_names(cls: type) -> frozenset[str]:
    """The names toolstitch's own classes in ``cls``'s MRO define (the proxy answers them)."""
    own = _OWN_NAMES.get(cls)
    if own is None:
        names: set[str] = set()
        for klass in cls.__mro__:
            if issubclass(klass, Proxy):
                names.update(vars(klass))
        own = _OWN_NAMES[cls] = frozenset(names - _NOT_OWN)
    return own


def _subclassing(twin: type[WrappedClient], sdk_class: type) -> type[WrappedClient]:
    """``twin``, derived from ``sdk_class`` too, so that ``type(wrapped)`` is a subclass of the
    client's class: code that checks the class rather than the instance (logfire's
    ``instrument_openai`` asserts ``issubclass(type(client), openai.OpenAI)``) accepts the wrapper.
    The SDK class's ``__init__`` never runs: the instance holds nothing of its own, and
    :meth:`WrappedClient.__getattribute__` reads every SDK attribute from the wrapped client.

    A client class that cannot be combined with the proxy (a subclass with ``__slots__`` of its
    own, an ``__init_subclass__`` that wants arguments) keeps ``twin`` alone: ``isinstance`` still
    holds through ``__class__``, only ``type()`` checks do not. Made once per pair (a race makes
    two equal classes, both right)."""
    combined = _SUBCLASSES.get((twin, sdk_class))
    if combined is None:
        try:
            combined = type(
                f"Wrapped{sdk_class.__name__}",
                (twin, sdk_class),
                {"__slots__": (), "__module__": __name__, "__doc__": twin.__doc__},
            )
        except Exception:
            combined = twin
        _SUBCLASSES[twin, sdk_class] = combined
    return combined


@overload
def wrap(client: AzureOpenAI, **options: Unpack[WrapOptions]) -> StitchedAzureOpenAI: ...
@overload
def wrap(client: OpenAI, **options: Unpack[WrapOptions]) -> StitchedOpenAI: ...
@overload
def wrap(client: AsyncAzureOpenAI, **options: Unpack[WrapOptions]) -> AsyncStitchedAzureOpenAI: ...
@overload
def wrap(client: AsyncOpenAI, **options: Unpack[WrapOptions]) -> AsyncStitchedOpenAI: ...


def wrap(
    client: OpenAI | AsyncOpenAI,
    *,
    limits: Limits | None = None,
    empty_arguments: Literal["invalid", "object"] = "invalid",
    record: str | os.PathLike[str] | None = None,
    redact: Redact = False,
    recover_text_tool_calls: bool = False,
    decode: Decode = "fast",
    guard: bool = False,
    resume: bool | ResumePolicy = True,
) -> Any:
    """Return a drop-in proxy of ``client`` whose streamed chat completions stitch tool calls.

    Works with ``OpenAI``, ``AsyncOpenAI`` and ``AzureOpenAI`` (and their async twin). A type
    checker sees the result as the client's own type whose ``chat.completions.create(...,
    stream=True)`` returns a :class:`StitchedStream` (async: :class:`AsyncStitchedStream`); see
    :mod:`._types`. At run time it is a :class:`WrappedClient`, which answers every attribute the
    client has.

    ``record="dir/"`` writes each stream to a new JSONL file in that directory (created when
    missing); ``redact`` masks tool-call arguments and/or content text in those files
    (``True``, ``"arguments"`` or ``"content"``). A recording never breaks a stream: failures
    become one ``RecordingWarning`` and ``stream.recorder.error``.

    ``recover_text_tool_calls=True`` turns tool calls that a server wrote as text in ``content``
    (``<tool_call>{...}</tool_call>``) into tool calls, each recorded as an anomaly. Off by default.

    ``decode="fast"`` (the default) builds each chunk with pydantic-core instead of the SDK's
    ``construct_type`` (several times cheaper per chunk, so a wrapped stream costs less CPU than a
    plain one). The chunks and errors are the SDK's own, equal in every field: a chunk that the
    fast builder cannot prove equal is built by the SDK, and an ``openai`` release that fails the
    self-check keeps the SDK's decoding (one ``FastDecodeWarning``). ``decode="sdk"`` keeps the
    SDK's own decoding.

    ``guard=True`` is for code that decides on its own which calls to execute (a framework given
    the wrapped client): every chunk still passes through unchanged until a chunk finishes a choice
    holding a call that is not ``ready``; in its place the stream raises
    :class:`~toolstitch.errors.UnsafeToolCallError`, an ``openai.APIError`` carrying those calls, so
    that code never sees the choice finish and runs none of its calls. Off by default.

    ``resume`` (on by default): when the connection of a ``responses.create(..., background=True,
    stream=True)`` drops, the stream resumes by itself with ``responses.retrieve(id, stream=True,
    starting_after=...)``, under the same contract (``client/_resume.py``; a
    :class:`~toolstitch.client.ResumePolicy` bounds the attempts and the time). ``resume=False``
    reports the cut as the SDK does.
    """
    if isinstance(client, WrappedClient):
        defaults = (
            limits is None
            and empty_arguments == "invalid"
            and record is None
            and redact is False
            and not recover_text_tool_calls
            and decode == "fast"
            and not guard
            and resume is True
        )
        if defaults:
            return client  # wrapping twice changes nothing
        client = client.unwrapped  # new options: a new proxy over the same client
    if not isinstance(client, (OpenAI, AsyncOpenAI)):
        raise TypeError(
            f"wrap() expects an openai.OpenAI or openai.AsyncOpenAI client, got {type(client).__name__}"
        )
    folder = None if record is None else Path(record)
    opts = _Options(
        limits,
        empty_arguments,
        folder,
        redact,
        recover_text_tool_calls,
        is_async=isinstance(client, AsyncOpenAI),
        decode=decode,
        guard=guard,
        resume=resume,
    )
    return WrappedClient._of(client, opts)
