"""``stitch(chunks, tools=...)``: the stream API over chunks that did not come from a wrapped client.

LiteLLM's ``completion(stream=True)``, a gateway, a message queue, a test: anything that yields
chat-completion chunks (the SDK's ``ChatCompletionChunk`` objects, other pydantic models of the same
shape, such as LiteLLM's, whose fields may sit among their extras, or plain dicts) becomes the same
:class:`StitchedStream` (an async iterable: the same
:class:`AsyncStitchedStream`) that ``wrap`` returns, with the same API: iterate for the chunks,
unchanged, or ``events()``; ``tool_calls``, ``get_final_completion()``, ``record()``, a context
manager that closes the source. The core reads each chunk as it is (a dict or any pydantic model,
extras included): nothing is reshaped here.

A source that can be iterated both ways (LiteLLM's ``CustomStreamWrapper``: the same class comes
back from ``completion(stream=True)``, whose chunks only a ``for`` reads, and from ``await
acompletion(stream=True)``, whose chunks only an ``async for`` reads) is read the way the code
around the call runs: asynchronously inside a running event loop (a coroutine), synchronously
otherwise. Pass a generator over it (``(c for c in source)``) to choose the other way.

The request is the contract (rule 10), so pass what the request sent: ``tools`` (when omitted,
names and arguments are not checked against any schema; an empty list offers none, so every call is
``invalid``), ``tool_choice`` (or the legacy ``function_call``) and ``parallel_tool_calls``. They are
read as a wrapped client reads a request (``recording._contract``): a value that cannot be read as
one (``tools`` that are a mapping or hold something that is not a tool, a ``tool_choice`` that is
neither a string nor an object) refuses every call.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

from pydantic import BaseModel

from ..core import Limits, now
from ..recording import given_contract, given_responses_contract, responses_accumulator
from ._fast import Decode, stream_from_bytes
from ._responses_stream import AsyncStitchedResponseStream, StitchedResponseStream
from ._stream import AsyncStitchedStream, StitchedStream

__all__ = ["stitch"]


if TYPE_CHECKING:
    from typing_extensions import TypedDict, Unpack

    class StitchOptions(TypedDict, total=False):
        """``stitch``'s keyword options but ``api``, written once for its four overloads."""

        tools: Iterable[Any] | None
        tool_choice: Any
        parallel_tool_calls: bool | None
        function_call: Any
        limits: Limits | None
        empty_arguments: Literal["invalid", "object"]
        recover_text_tool_calls: bool
        decode: Decode | None
        guard: bool


# api="responses" first: its overloads need the keyword, and yield the SDK's Responses events.
@overload
def stitch(
    chunks: AsyncIterable[Any], *, api: Literal["responses"], **options: Unpack[StitchOptions]
) -> AsyncStitchedResponseStream: ...
@overload
def stitch(
    chunks: Iterable[Any], *, api: Literal["responses"], **options: Unpack[StitchOptions]
) -> StitchedResponseStream: ...
@overload
def stitch(
    chunks: AsyncIterable[Any], *, api: Literal["chat"] = "chat", **options: Unpack[StitchOptions]
) -> AsyncStitchedStream: ...
@overload
def stitch(
    chunks: Iterable[Any], *, api: Literal["chat"] = "chat", **options: Unpack[StitchOptions]
) -> StitchedStream: ...


def stitch(
    chunks: Iterable[Any] | AsyncIterable[Any],
    *,
    tools: Iterable[Any] | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool | None = None,
    function_call: Any = None,
    limits: Limits | None = None,
    empty_arguments: Literal["invalid", "object"] = "invalid",
    recover_text_tool_calls: bool = False,
    decode: Decode | None = None,
    guard: bool = False,
    api: Literal["chat", "responses"] = "chat",
) -> StitchedStream | AsyncStitchedStream | StitchedResponseStream | AsyncStitchedResponseStream:
    """Stitch any iterable (or async iterable) of chunks into a :class:`StitchedStream`
    (:class:`AsyncStitchedStream`), the stream object ``wrap`` returns.

    ``tools``, ``tool_choice`` (or legacy ``function_call``) and ``parallel_tool_calls`` are the
    request's: the calls are held to them as a wrapped client's are. ``limits``,
    ``empty_arguments`` and ``recover_text_tool_calls`` mean what they mean for :func:`wrap`.
    Nothing is read until the stream is iterated. Hostile chunks never raise from toolstitch: what
    cannot be read becomes an anomaly, and the calls it touched become ``invalid``. What the
    source itself raises reaches the caller unchanged, after open calls became ``incomplete``.
    Call ``stream.record(path)`` before iterating to record it.

    ``guard=True`` raises :class:`~toolstitch.errors.UnsafeToolCallError` in place of a chunk that
    finishes a choice holding a call that is not ``ready`` (as ``wrap(client, guard=True)``).

    ``api="responses"`` reads Responses API events instead (the SDK's ``ResponseStreamEvent``
    objects, or dicts): the stream is a :class:`~toolstitch.StitchedResponseStream` (async: its
    twin), with ``get_final_response()``; ``tools`` and ``tool_choice`` in this API's flat shape or
    the chat one (``function_call``, ``recover_text_tool_calls`` and ``decode`` are chat's only).

    ``decode="fast"`` (or ``"sdk"``) reads ``chunks`` as the raw bytes of a streamed response body
    (an iterable or async iterable of ``bytes``, such as ``httpx``'s ``iter_bytes()``), decoded
    exactly as the SDK decodes a response (``[DONE]``, in-band errors raised as
    ``openai.APIError``); ``"fast"`` builds each chunk with pydantic-core, equal to the SDK's.
    """
    if isinstance(chunks, Mapping | BaseModel | str | bytes | bytearray | memoryview):
        raise TypeError(
            f"stitch() takes an iterable of chunks, not a {type(chunks).__name__}: "
            "pass [chunk] to stitch a single one"
        )
    started = now()
    if api == "responses":
        return _responses(chunks, tools, tool_choice, parallel_tool_calls, limits, empty_arguments, guard)
    if api != "chat":
        raise ValueError(f'api must be "chat" or "responses", not {api!r}')
    if decode is not None:
        chunks = stream_from_bytes(chunks, decode=decode)
    contract = given_contract(tools, tool_choice, function_call, parallel_tool_calls)  # tools read once
    request: dict[str, Any] = {}
    for key, value in (
        ("tools", contract.tools if contract.unreadable is None else tools),
        ("tool_choice", tool_choice),
        ("function_call", function_call),
        ("parallel_tool_calls", parallel_tool_calls),
    ):
        if value is not None:
            request[key] = value
    accumulator = contract.accumulator(
        limits=limits,
        empty_arguments=empty_arguments,
        started_at=started,
        recover_text_tool_calls=recover_text_tool_calls,
    )
    if _reads_async(chunks, "chunks"):
        return AsyncStitchedStream(chunks, accumulator, request=request, guard=guard)
    return StitchedStream(chunks, accumulator, request=request, guard=guard)


def _responses(
    events: Iterable[Any] | AsyncIterable[Any],
    tools: Iterable[Any] | None,
    tool_choice: Any,
    parallel_tool_calls: bool | None,
    limits: Limits | None,
    empty_arguments: Literal["invalid", "object"],
    guard: bool,
) -> StitchedResponseStream | AsyncStitchedResponseStream:
    """``stitch(events, api="responses")``: the Responses reader over any (async) iterable."""
    started = now()
    contract = given_responses_contract(tools, tool_choice, parallel_tool_calls)
    request: dict[str, Any] = {}
    for key, value in (
        ("tools", contract.tools if contract.unreadable is None else tools),
        ("tool_choice", tool_choice),
        ("parallel_tool_calls", parallel_tool_calls),
    ):
        if value is not None:
            request[key] = value
    accumulator = responses_accumulator(
        contract, limits=limits, empty_arguments=empty_arguments, started_at=started
    )
    if _reads_async(events, "events"):
        return AsyncStitchedResponseStream(events, accumulator, request=request, guard=guard)
    return StitchedResponseStream(events, accumulator, request=request, guard=guard)


def _reads_async(source: Any, what: str) -> bool:
    """Which twin reads ``source``: the async one for an async iterable, the sync one for an
    iterable, and for what is both, the way the code around this call runs. ``TypeError`` for
    what is neither (``what``: what its items are called in the message)."""
    kind = type(source)
    reads_async, reads_sync = hasattr(kind, "__aiter__"), hasattr(kind, "__iter__")
    if reads_async and reads_sync:
        return _in_event_loop()
    if not reads_async and not reads_sync:
        raise TypeError(
            f"stitch() takes an iterable or async iterable of {what}, got {type(source).__name__}"
        )
    return reads_async


def _in_event_loop() -> bool:
    """Whether this runs inside a running asyncio event loop (a coroutine, or what it calls)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
