"""What a type checker sees ``run``, ``arun``, ``run_events`` and ``arun_events`` take.

The loop's own keywords (``toolbox``, ``max_steps``, ...) and the request's keywords are one
``**options`` each, declared through ``Unpack`` of the TypedDicts below, so a misspelt keyword
(``mesages=``, ``max_step=``, ``eagr=``) is a type error, as it is on the SDK's own ``create``.

The request's keywords are the SDK's own TypedDicts, inherited, never copied:
``openai.types.chat.completion_create_params.CompletionCreateParamsBase`` for Chat Completions and
``openai.types.responses.response_create_params.ResponseCreateParamsBase`` for the Responses API
(the parameters of ``create`` without ``stream``), plus the four request options every SDK method
takes. Each openai release type-checks against its own parameters, so nothing here follows the SDK
by hand. ``api=`` picks the overload: the chat one by default, the Responses one with
``api="responses"``.

Two differences from the SDK's types are the loop's, and raise at run time: the loop sets
``tools`` (from the toolbox) and ``stream`` itself, and over the Responses API it keeps the history
itself, so ``tools=`` and ``previous_response_id=`` are refused (``LoopAPI.own_keys``). A TypedDict
cannot drop an inherited key, so the type checker lets them through.

Everything here exists only for type checkers (under ``TYPE_CHECKING``): the classes name SDK
modules that older openai releases lack, and nothing at run time reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__: list[str] = []

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, Literal

    import httpx
    from openai.types.chat.completion_create_params import CompletionCreateParamsBase
    from openai.types.responses.response_create_params import ResponseCreateParamsBase
    from typing_extensions import Required, TypedDict

    from ..history import Dialect
    from ..tools import Approval, ClaimLedger, ErrorMessage, Tool, Toolbox
    from ._results import EventHook
    from ._retry import RetryPolicy

    class RequestOptions(TypedDict, total=False):
        """The options every SDK method takes beside its parameters (``extra_headers`` ...)."""

        extra_headers: Mapping[str, Any] | None
        extra_query: Mapping[str, object] | None
        extra_body: object | None
        timeout: float | httpx.Timeout | None

    class LoopOptions(TypedDict, total=False):
        """The loop's own keywords (see :func:`toolstitch.run` for each)."""

        toolbox: Required[Toolbox | Sequence[Tool | Callable[..., Any]]]
        max_steps: int
        ledger: ClaimLedger | None
        retry: RetryPolicy | None
        max_corrections: int
        eager: bool
        raise_tool_errors: bool
        dialect: str | Dialect
        approvals: Mapping[str, Approval] | None
        error_message: ErrorMessage | None
        fail_fast: bool

    class HookOption(TypedDict, total=False):
        """``on_event``: ``run`` and ``arun`` take it; the iterator forms hand the events out."""

        on_event: EventHook | None

    class ChatEventsOptions(LoopOptions, CompletionCreateParamsBase, RequestOptions, total=False):
        """``run_events(client, ...)`` over Chat Completions (the default ``api``)."""

        api: Literal["chat"]

    class ResponsesEventsOptions(LoopOptions, ResponseCreateParamsBase, RequestOptions, total=False):
        """``run_events(client, api="responses", ...)``."""

        api: Required[Literal["responses"]]
        transport: Literal["http", "websocket"]
        incremental: bool | None
        connection: Any

    class ChatRunOptions(ChatEventsOptions, HookOption, total=False):
        """``run(client, ...)`` over Chat Completions (the default ``api``)."""

    class ResponsesRunOptions(ResponsesEventsOptions, HookOption, total=False):
        """``run(client, api="responses", ...)``."""
