"""``wrap(client)``: the drop-in proxy.

Only ``client.chat.completions.create(..., stream=True)`` is intercepted; its result is a
:class:`StitchedStream` (or :class:`AsyncStitchedStream`) over the SDK's own stream, with an
:class:`Accumulator` that knows the request's ``tools``. Everything else (non-streaming calls,
``models.list()``, ``with_options(...)``, attributes) is the original object's, untouched:
attribute access is forwarded, and methods that return a new client or resource are wrapped again
so the interception survives ``client.with_options(timeout=5).chat.completions.create(...)``.
``with_raw_response`` (on the client, on ``chat`` and on ``chat.completions``) is wrapped the same
way: a streamed ``create`` returns the SDK's raw response, whose ``parse()`` is a stitched stream.

``wrap(client, record="dir/")`` records every stream to its own JSONL file in ``dir/`` (see
``_recording``); recording is off by default.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import openai
from openai import AsyncOpenAI, OpenAI

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

from ..core._accumulator import Accumulator
from ..core._call import now
from ..core._limits import Limits
from ..core._seal import offered_tools, requested_choice
from ..recording._recorder import Redact, recording_path, redact_parts
from ._stream import AsyncStitchedStream, StitchedStream

__all__ = ["WrappedClient", "wrap"]

#: The SDK's sentinels for an argument that is not sent (``Omit`` exists from openai 1.99 on).
_NOT_SENT: tuple[type, ...] = tuple(
    t for t in (getattr(openai, "NotGiven", None), getattr(openai, "Omit", None)) if isinstance(t, type)
)

_Stream = TypeVar("_Stream", StitchedStream, AsyncStitchedStream)


class _Options:
    """What ``wrap`` was told, handed down to every proxy and accumulator."""

    __slots__ = ("empty_arguments", "limits", "record", "recover_text_tool_calls", "redact")

    def __init__(
        self,
        limits: Limits | None,
        empty_arguments: Literal["invalid", "object"],
        record: Path | None = None,
        redact: Redact = False,
        recover_text_tool_calls: bool = False,
    ) -> None:
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
        stream = cls(sdk_stream, self.accumulator(request, started), request=request)
        if self.record is not None:
            stream.record(recording_path(self.record), redact=self.redact)
        return stream

    def accumulator(self, request: Mapping[str, Any], started_at: float) -> Accumulator:
        """An accumulator for one streamed request (``request`` as :func:`_read_request` made it)."""
        return Accumulator(
            _offered(request),
            tool_choice=requested_choice(_sent(request, "tool_choice"), _sent(request, "function_call")),
            parallel_tool_calls=_sent(request, "parallel_tool_calls"),
            limits=self.limits,
            empty_arguments=self.empty_arguments,
            started_at=started_at,
            recover_text_tool_calls=self.recover_text_tool_calls,
        )


def _sent(request: Mapping[str, Any], key: str) -> Any:
    """What the request body carries under ``key``: the SDK merges ``extra_body`` over its own
    fields, so a value there is the one the server reads (and the contract calls are held to)."""
    extra = request.get("extra_body")
    if isinstance(extra, Mapping) and key in extra:
        return _given(extra[key])
    return _given(request.get(key))


def _offered(request: Mapping[str, Any]) -> list[Any] | None:
    """The tools the request offered (rule 10: a request that sends neither ``tools`` nor
    ``functions``, or empty lists, offers none, so every call it gets is ``invalid``)."""
    return offered_tools(_sent(request, "tools"), _sent(request, "functions"))


def _given(value: Any) -> Any:
    """``value``, or ``None`` for the SDK's "not given" sentinels (``NOT_GIVEN``, ``omit``), which
    send nothing: the request then has no ``tool_choice`` (or ``parallel_tool_calls``) to enforce."""
    return None if isinstance(value, _NOT_SENT) else value


def _read_request(kwargs: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The keyword arguments to send, and when the request started.

    The request is the contract (rule 10). ``tools`` given as any iterable (a generator,
    ``dict.values()``, ``map``, a tuple) is read here, once, into a list; that same list goes to the
    SDK and to the accumulator, so every call is checked against exactly the tools the model was
    offered (read twice, a generator would be sent by the SDK and be empty for the check). Its
    ``tool_choice`` (or legacy ``function_call``) and ``parallel_tool_calls`` go to the accumulator
    too, which refuses the calls they forbid (``ContractViolation``).
    """
    started = now()
    tools = kwargs.get("tools")
    if isinstance(tools, Iterable) and not isinstance(tools, list | str | bytes | Mapping):
        kwargs = {**kwargs, "tools": list(tools)}
    return kwargs, started


class _Proxy:
    """Forwards every attribute to the wrapped object; subclasses intercept a few."""

    __slots__ = ("_opts", "_target")

    def __init__(self, target: Any, opts: _Options) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_opts", opts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    def __repr__(self) -> str:
        return f"toolstitch.wrap({self._target!r})"


class _Create(_Proxy):
    """``create``: a streamed request goes through :func:`_read_request` and ``_streamed``; any
    other is the SDK's, untouched. The sync and async twins below differ only in ``await``."""

    __slots__ = ()

    def _streamed(self, sdk_result: Any, request: dict[str, Any], started: float) -> Any:
        raise NotImplementedError

    def create(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("stream") is not True:
            return self._target.create(*args, **kwargs)
        request, started = _read_request(kwargs)
        return self._streamed(self._target.create(*args, **request), request, started)


class _AsyncCreate(_Create):
    __slots__ = ()

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("stream") is not True:
            return await self._target.create(*args, **kwargs)
        request, started = _read_request(kwargs)
        return self._streamed(await self._target.create(*args, **request), request, started)


class _Completions(_Create):
    """``chat.completions``: ``create(stream=True)`` returns a stitched stream."""

    __slots__ = ()

    def _streamed(self, sdk_result: Any, request: dict[str, Any], started: float) -> Any:
        cls = AsyncStitchedStream if isinstance(self, _AsyncCreate) else StitchedStream
        return self._opts.stitch(cls, sdk_result, request, started)

    def with_options(self, *args: Any, **kwargs: Any) -> Any:
        return type(self)(self._target.with_options(*args, **kwargs), self._opts)

    @property
    def with_raw_response(self) -> Any:
        return _raw_completions(self._target.with_raw_response, self._opts)


class _AsyncCompletions(_AsyncCreate, _Completions):
    """The async twin of :class:`_Completions`."""

    __slots__ = ()


class _RawResponse(_Proxy):
    """The SDK's raw response to ``with_raw_response.create(..., stream=True)``: headers and the
    rest are the SDK's; ``parse()`` (the stream) is stitched, once, like the SDK's own cache."""

    __slots__ = ("_request", "_started", "_stitched")

    def __init__(self, target: Any, opts: _Options, request: dict[str, Any], started: float) -> None:
        super().__init__(target, opts)
        object.__setattr__(self, "_request", request)
        object.__setattr__(self, "_started", started)
        object.__setattr__(self, "_stitched", None)

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:  # parse(to=...): the caller asked for a type of their own
            return self._target.parse(*args, **kwargs)
        if self._stitched is None:
            sdk_stream = self._target.parse()
            cls = AsyncStitchedStream if _is_async(sdk_stream) else StitchedStream
            stream = self._opts.stitch(cls, sdk_stream, self._request, self._started)
            object.__setattr__(self, "_stitched", stream)
        return self._stitched


class _RawCompletions(_Create):
    """``chat.completions.with_raw_response``: a streamed ``create`` parses to a stitched stream."""

    __slots__ = ()

    def _streamed(self, sdk_result: Any, request: dict[str, Any], started: float) -> Any:
        return _RawResponse(sdk_result, self._opts, request, started)


class _AsyncRawCompletions(_AsyncCreate, _RawCompletions):
    """The async twin of :class:`_RawCompletions`."""

    __slots__ = ()


def _raw_completions(target: Any, opts: _Options) -> _Proxy:
    """Whichever of the raw twins fits the SDK's ``CompletionsWithRawResponse`` (sync or async)."""
    if inspect.iscoroutinefunction(target.create):
        return _AsyncRawCompletions(target, opts)
    return _RawCompletions(target, opts)


# The proxies below each stand for one step of an attribute path of the SDK client
# (client -> chat -> completions, and the with_raw_response paths); their properties look alike
# because each hands the next step its proxy. A table-driven proxy would hide which paths exist.


class _RawChat(_Proxy):
    """``chat.with_raw_response`` (and ``client.with_raw_response.chat``)."""

    __slots__ = ()

    @property
    def completions(self) -> Any:
        return _raw_completions(self._target.completions, self._opts)


class _RawClient(_Proxy):
    """``client.with_raw_response``."""

    __slots__ = ()

    @property
    def chat(self) -> Any:
        return _RawChat(self._target.chat, self._opts)


class _Chat(_Proxy):
    __slots__ = ()

    @property
    def completions(self) -> Any:
        target = self._target.completions
        if _is_async(target):
            return _AsyncCompletions(target, self._opts)
        return _Completions(target, self._opts)

    @property
    def with_raw_response(self) -> Any:
        return _RawChat(self._target.with_raw_response, self._opts)


def _is_async(resource: Any) -> bool:
    """True for a resource (or an SDK stream) of an ``AsyncOpenAI`` client."""
    client = getattr(resource, "_client", None)
    return isinstance(client, AsyncOpenAI)


class WrappedClient(_Proxy):
    """The object ``wrap`` returns: the original client, with streamed tool calls stitched."""

    __slots__ = ()

    @property
    def chat(self) -> Any:
        return _Chat(self._target.chat, self._opts)

    @property
    def unwrapped(self) -> Any:
        """The original client."""
        return self._target

    @property
    def with_raw_response(self) -> Any:
        return _RawClient(self._target.with_raw_response, self._opts)

    def with_options(self, *args: Any, **kwargs: Any) -> WrappedClient:
        return WrappedClient(self._target.with_options(*args, **kwargs), self._opts)

    def copy(self, *args: Any, **kwargs: Any) -> WrappedClient:
        return WrappedClient(self._target.copy(*args, **kwargs), self._opts)


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
    """
    if isinstance(client, WrappedClient):
        defaults = (
            limits is None
            and empty_arguments == "invalid"
            and record is None
            and redact is False
            and not recover_text_tool_calls
        )
        if defaults:
            return client  # wrapping twice changes nothing
        client = client.unwrapped  # new options: a new proxy over the same client
    if not isinstance(client, (OpenAI, AsyncOpenAI)):
        raise TypeError(
            f"wrap() expects an openai.OpenAI or openai.AsyncOpenAI client, got {type(client).__name__}"
        )
    folder = None if record is None else Path(record)
    return WrappedClient(client, _Options(limits, empty_arguments, folder, redact, recover_text_tool_calls))
