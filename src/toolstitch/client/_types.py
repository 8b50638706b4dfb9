"""What a type checker sees ``wrap(client)`` return: the client's own type, with the streams stitched.

At run time ``wrap`` returns a :class:`~toolstitch.client.WrappedClient` proxy that answers every
attribute of the client it wraps. These classes exist only for type checkers (everything below is
under ``TYPE_CHECKING``; nothing is defined at run time): ``wrap(OpenAI())`` is a
:class:`StitchedOpenAI`, an ``OpenAI`` whose ``chat.completions.create(..., stream=True)`` returns a
:class:`~toolstitch.StitchedStream` (``AsyncOpenAI``: an :class:`~toolstitch.AsyncStitchedStream`),
``AzureOpenAI`` and ``AsyncAzureOpenAI`` the same; ``chat.completions.stream(...)`` enters to a
:class:`StitchedChatCompletionStream`, the SDK's helper stream with ``toolstitch`` and ``tool_calls``.
Every other attribute keeps the SDK's own type (``with_raw_response`` and
``with_streaming_response`` parse to what the SDK declares, ``openai.Stream[ChatCompletionChunk]``,
which the stitched stream is: narrow with ``isinstance(s, ts.StitchedStream)``).
``responses.create(..., stream=True)`` is a :class:`~toolstitch.StitchedResponseStream` (async: the
async twin) and ``responses.stream(...)`` enters to the SDK's helper stream with ``toolstitch`` and
``tool_calls``.

``create`` and ``stream`` are declared with ``*args``/``**kwargs`` (beside ``stream``): spelling out
the SDK's forty-odd parameters would tie these stubs to one openai release, and the SDK's own
signature is what runs.
Annotate your own code with them under ``if TYPE_CHECKING:``::

    if TYPE_CHECKING:
        from toolstitch.client import StitchedOpenAI
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal, overload

if TYPE_CHECKING:
    from openai import AsyncAzureOpenAI, AsyncOpenAI, AzureOpenAI, OpenAI
    from openai.lib.streaming.chat import (
        AsyncChatCompletionStream,
        AsyncChatCompletionStreamManager,
        ChatCompletionStream,
        ChatCompletionStreamManager,
    )
    from openai.lib.streaming.responses import (
        AsyncResponseStream,
        AsyncResponseStreamManager,
        ResponseStream,
        ResponseStreamManager,
    )
    from openai.resources.chat import AsyncChat, AsyncCompletions, Chat, Completions
    from openai.resources.responses import AsyncResponses, Responses
    from openai.resources.responses.responses import (
        AsyncResponsesConnection,
        AsyncResponsesConnectionManager,
        ResponsesConnection,
        ResponsesConnectionManager,
    )
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response
    from typing_extensions import TypedDict

    from ..core import Anomaly, Limits, ToolCall
    from ..recording import Redact
    from ._responses_stream import AsyncStitchedResponseStream, StitchedResponseStream
    from ._resume import ResumePolicy
    from ._stream import AsyncStitchedStream, StitchedStream

    class WrapOptions(TypedDict, total=False):
        """``wrap``'s keyword options, written once for its four overloads."""

        limits: Limits | None
        empty_arguments: Literal["invalid", "object"]
        record: str | os.PathLike[str] | None
        redact: Redact
        recover_text_tool_calls: bool
        decode: Literal["sdk", "fast"]
        guard: bool
        resume: bool | ResumePolicy

    # Sync and async twins, as in the SDK: a type checker needs each spelled out (``async def``
    # and the awaited stream type differ), so they repeat by shape.
    class StitchedChatCompletionStream(ChatCompletionStream[Any]):
        """The SDK's ``chat.completions.stream(...)`` helper stream of a wrapped client."""

        @property
        def toolstitch(self) -> StitchedStream: ...
        @property
        def tool_calls(self) -> list[ToolCall]: ...
        def calls(self, choice: int | None = None) -> list[ToolCall]: ...
        @property
        def anomalies(self) -> list[Anomaly]: ...

    class AsyncStitchedChatCompletionStream(AsyncChatCompletionStream[Any]):
        """The async twin of :class:`StitchedChatCompletionStream`."""

        @property
        def toolstitch(self) -> AsyncStitchedStream: ...
        @property
        def tool_calls(self) -> list[ToolCall]: ...
        def calls(self, choice: int | None = None) -> list[ToolCall]: ...
        @property
        def anomalies(self) -> list[Anomaly]: ...

    class StitchedChatCompletionStreamManager(ChatCompletionStreamManager[Any]):
        def __enter__(self) -> StitchedChatCompletionStream: ...

    class AsyncStitchedChatCompletionStreamManager(AsyncChatCompletionStreamManager[Any]):
        async def __aenter__(self) -> AsyncStitchedChatCompletionStream: ...

    class StitchedCompletions(Completions):
        """``chat.completions`` of a wrapped sync client."""

        @overload  # type: ignore[override]
        def create(self, *args: Any, stream: Literal[True], **kwargs: Any) -> StitchedStream: ...
        @overload
        def create(
            self, *args: Any, stream: Literal[False] | None = ..., **kwargs: Any
        ) -> ChatCompletion: ...
        @overload
        def create(self, *args: Any, stream: bool, **kwargs: Any) -> ChatCompletion | StitchedStream: ...
        def create(self, *args: Any, **kwargs: Any) -> Any: ...
        def stream(self, *args: Any, **kwargs: Any) -> StitchedChatCompletionStreamManager: ...

    class AsyncStitchedCompletions(AsyncCompletions):
        """``chat.completions`` of a wrapped async client."""

        @overload  # type: ignore[override]
        async def create(self, *args: Any, stream: Literal[True], **kwargs: Any) -> AsyncStitchedStream: ...
        @overload
        async def create(
            self, *args: Any, stream: Literal[False] | None = ..., **kwargs: Any
        ) -> ChatCompletion: ...
        @overload
        async def create(
            self, *args: Any, stream: bool, **kwargs: Any
        ) -> ChatCompletion | AsyncStitchedStream: ...
        async def create(self, *args: Any, **kwargs: Any) -> Any: ...
        def stream(self, *args: Any, **kwargs: Any) -> AsyncStitchedChatCompletionStreamManager: ...

    class StitchedChat(Chat):
        @property
        def completions(self) -> StitchedCompletions: ...

    class AsyncStitchedChat(AsyncChat):
        @property
        def completions(self) -> AsyncStitchedCompletions: ...

    class StitchedResponseHelperStream(ResponseStream[Any]):
        """The SDK's ``responses.stream(...)`` helper stream of a wrapped client."""

        @property
        def toolstitch(self) -> StitchedResponseStream: ...
        @property
        def tool_calls(self) -> list[ToolCall]: ...
        @property
        def anomalies(self) -> list[Anomaly]: ...

    class AsyncStitchedResponseHelperStream(AsyncResponseStream[Any]):
        """The async twin of :class:`StitchedResponseHelperStream`."""

        @property
        def toolstitch(self) -> AsyncStitchedResponseStream: ...
        @property
        def tool_calls(self) -> list[ToolCall]: ...
        @property
        def anomalies(self) -> list[Anomaly]: ...

    class StitchedResponseStreamManager(ResponseStreamManager[Any]):
        def __enter__(self) -> StitchedResponseHelperStream: ...

    class AsyncStitchedResponseStreamManager(AsyncResponseStreamManager[Any]):
        async def __aenter__(self) -> AsyncStitchedResponseHelperStream: ...

    class StitchedResponsesConnection(ResponsesConnection):
        """The connection ``responses.connect()`` of a wrapped client enters (``_websocket``)."""

        def create(self, **params: Any) -> StitchedResponseStream: ...
        @property
        def broken(self) -> bool: ...
        @property
        def age(self) -> float: ...
        @property
        def unwrapped(self) -> ResponsesConnection: ...

    class AsyncStitchedResponsesConnection(AsyncResponsesConnection):
        """The async twin of :class:`StitchedResponsesConnection`."""

        async def create(self, **params: Any) -> AsyncStitchedResponseStream: ...
        @property
        def broken(self) -> bool: ...
        @property
        def age(self) -> float: ...
        @property
        def unwrapped(self) -> AsyncResponsesConnection: ...

    class StitchedResponsesConnectionManager(ResponsesConnectionManager):
        def __enter__(self) -> StitchedResponsesConnection: ...
        def enter(self) -> StitchedResponsesConnection: ...

    class AsyncStitchedResponsesConnectionManager(AsyncResponsesConnectionManager):
        async def __aenter__(self) -> AsyncStitchedResponsesConnection: ...
        async def enter(self) -> AsyncStitchedResponsesConnection: ...

    class StitchedResponses(Responses):
        """``responses`` of a wrapped sync client."""

        def connect(self, *args: Any, **kwargs: Any) -> StitchedResponsesConnectionManager: ...

        @overload  # type: ignore[override]
        def create(self, *args: Any, stream: Literal[True], **kwargs: Any) -> StitchedResponseStream: ...
        @overload
        def create(self, *args: Any, stream: Literal[False] | None = ..., **kwargs: Any) -> Response: ...
        @overload
        def create(self, *args: Any, stream: bool, **kwargs: Any) -> Response | StitchedResponseStream: ...
        def create(self, *args: Any, **kwargs: Any) -> Any: ...
        def stream(self, *args: Any, **kwargs: Any) -> StitchedResponseStreamManager: ...

    class AsyncStitchedResponses(AsyncResponses):
        """``responses`` of a wrapped async client."""

        def connect(self, *args: Any, **kwargs: Any) -> AsyncStitchedResponsesConnectionManager: ...

        @overload  # type: ignore[override]
        async def create(
            self, *args: Any, stream: Literal[True], **kwargs: Any
        ) -> AsyncStitchedResponseStream: ...
        @overload
        async def create(
            self, *args: Any, stream: Literal[False] | None = ..., **kwargs: Any
        ) -> Response: ...
        @overload
        async def create(
            self, *args: Any, stream: bool, **kwargs: Any
        ) -> Response | AsyncStitchedResponseStream: ...
        async def create(self, *args: Any, **kwargs: Any) -> Any: ...
        def stream(self, *args: Any, **kwargs: Any) -> AsyncStitchedResponseStreamManager: ...

    class StitchedOpenAI(OpenAI):
        """``wrap(OpenAI(...))``."""

        @property
        def chat(self) -> StitchedChat: ...
        @property
        def responses(self) -> StitchedResponses: ...

    class AsyncStitchedOpenAI(AsyncOpenAI):
        """``wrap(AsyncOpenAI(...))``."""

        @property
        def chat(self) -> AsyncStitchedChat: ...
        @property
        def responses(self) -> AsyncStitchedResponses: ...

    class StitchedAzureOpenAI(StitchedOpenAI, AzureOpenAI):
        """``wrap(AzureOpenAI(...))``: an ``AzureOpenAI`` and a :class:`StitchedOpenAI`."""

    class AsyncStitchedAzureOpenAI(AsyncStitchedOpenAI, AsyncAzureOpenAI):
        """``wrap(AsyncAzureOpenAI(...))``."""
