"""The two APIs the loop speaks, as adapters: what differs between Chat Completions and the Responses
API, written once each, chosen once when a run starts (``api=`` of ``ts.run``).

The loop (``_run.py``) is one loop for both: stream, seal, gate, execute, append, ask again. Where the
two APIs differ (the history's shape, how a request is built and checked, how results answer the
calls, which stream method gives the finished answer, how a resumed history's unanswered calls are
found) it asks its adapter, and never tests which API it runs. Adding a third API is adding a class
here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import openai
from openai import AsyncOpenAI, OpenAI

from ..client import WrappedClient, wrap
from ..core import valid_unicode
from ..errors import RequestError
from ..history import (
    HistoryProblem,
    assistant_message,
    get_dialect,
    response_items,
    validate_history,
    validate_input,
    validate_request,
)

if TYPE_CHECKING:
    from ..core import ToolCall
    from ..tools import ToolResult
    from ._run import _Loop

__all__ = ["API_ADAPTERS", "ChatAPI", "LoopAPI", "ResponsesAPI", "background_key", "wrapped_client"]


class LoopAPI:
    """What the loop asks of the API it speaks (the base says nothing an API could share wrongly)."""

    name = ""
    own_keys: tuple[str, ...] = ()
    """Request keywords the loop sets itself: a caller passing one is refused."""
    answers_with_output = False
    """A correction joins the last result as ``output`` (Responses) rather than ``content``."""

    def history(self, messages: Any, given_input: Any) -> Any:
        """The run's starting history from ``messages=`` or ``input=`` (one of them is this API's)."""
        raise NotImplementedError

    def request(self, loop: _Loop, kwargs: dict[str, Any], history: list[Any]) -> dict[str, Any]:
        """The next request's keyword arguments, checked before anything is sent."""
        raise NotImplementedError

    def answer(self, loop: _Loop, results: Sequence[ToolResult], keys: Sequence[str]) -> None:
        """The results join the history, answering the ids it carries (``keys``)."""
        raise NotImplementedError

    def adopt(
        self, loop: _Loop, completion: Any, calls: Sequence[ToolCall]
    ) -> tuple[dict[str, Any], list[str]]:
        """The answer joins the history: ``(what the ResponseReceived event carries, each call's id
        as the history carries it)``."""
        raise NotImplementedError

    def pending(self, loop: _Loop) -> list[ToolCall] | None:
        """The unanswered calls a resumed history ends with, sealed and checked (None: none)."""
        raise NotImplementedError

    def history_id(self, loop: _Loop, call: ToolCall) -> str:
        """The id a streamed call will carry in the history unless it is taken there (``adopt``
        then gives it a fresh one): the ledger key of its eager start."""
        raise NotImplementedError

    def duplicate_ids(self, loop: _Loop) -> list[str]:
        """The ids the unanswered calls carry more than once."""
        raise NotImplementedError

    def refuse_duplicates(self, loop: _Loop, duplicates: list[str]) -> None:
        """Raise the request error of a history whose unanswered calls share an id."""
        raise NotImplementedError

    def background(self, model: str, index: int, request: Mapping[str, Any]) -> str | None:
        """The ledger key of a step's background response, or None (the API has none)."""
        return None

    def create(self, wrapped: Any) -> Any:
        """The wrapped client's streaming entry point of this API."""
        raise NotImplementedError

    def final(self, stream: Any) -> Any:
        """The finished answer of a read stream (sync)."""
        raise NotImplementedError

    async def afinal(self, stream: Any) -> Any:
        """The finished answer of a read stream (async)."""
        raise NotImplementedError


class ChatAPI(LoopAPI):
    """Chat Completions: the history is ``messages``; results are tool messages."""

    name = "chat"
    own_keys = ("stream", "tools", "messages", "model", "input")

    def history(self, messages: Any, given_input: Any) -> Any:
        if given_input is not None:
            raise TypeError('run() takes the history as messages=; input= is for api="responses"')
        return messages

    def request(self, loop: _Loop, kwargs: dict[str, Any], history: list[Any]) -> dict[str, Any]:
        kwargs["messages"] = history
        if loop.definitions:  # tools: [] is rejected (H16): omit the key instead
            kwargs["tools"] = loop.definitions
        return _streamed(kwargs, validate_request(kwargs, dialect=loop.dialect))

    def answer(self, loop: _Loop, results: Sequence[ToolResult], keys: Sequence[str]) -> None:
        for r, key in zip(results, keys, strict=True):
            try:
                message = r.to_message(loop.dialect)
                message["tool_call_id"] = loop.renamed.get(message["tool_call_id"], message["tool_call_id"])
            except Exception:  # a call the builders cannot answer (hostile id): answer the history's id
                message = {"role": "tool", "tool_call_id": key, "content": r.content}
            loop.history.append(message)

    def adopt(
        self, loop: _Loop, completion: Any, calls: Sequence[ToolCall]
    ) -> tuple[dict[str, Any], list[str]]:
        message = cast("dict[str, Any]", assistant_message(completion, dialect=loop.dialect))
        keys = loop.adopt_message(message, calls)
        loop.history.append(message)
        return message, keys

    def pending(self, loop: _Loop) -> list[ToolCall] | None:
        return loop.pending_messages()

    def history_id(self, loop: _Loop, call: ToolCall) -> str:
        return get_dialect(loop.dialect).normalize_id(call.id or "")

    def duplicate_ids(self, loop: _Loop) -> list[str]:
        return loop.duplicate_message_ids()

    def refuse_duplicates(self, loop: _Loop, duplicates: list[str]) -> None:
        h06 = [p for p in validate_history(loop.history, dialect=loop.dialect) if p.rule == "H06"]
        said = f"id {duplicates[0]!r} appears twice in one tool_calls list; nothing of it was run"
        raise RequestError(h06 or [HistoryProblem(None, "H06", "error", said)])

    def create(self, wrapped: Any) -> Any:
        return wrapped.chat.completions.create

    def final(self, stream: Any) -> Any:
        return stream.get_final_completion()

    async def afinal(self, stream: Any) -> Any:
        return await stream.get_final_completion()


class ResponsesAPI(LoopAPI):
    """The Responses API, statelessly: the history is ``input`` items; results are
    ``function_call_output`` items (``custom_tool_call_output`` for a custom tool's call); a
    background response can be resumed."""

    name = "responses"
    own_keys = ("stream", "tools", "input", "messages", "model", "previous_response_id")
    answers_with_output = True

    def history(self, messages: Any, given_input: Any) -> Any:
        if messages is not None:
            raise TypeError('run(api="responses") takes the history as input=, not messages=')
        history = [{"role": "user", "content": given_input}] if isinstance(given_input, str) else given_input
        if not isinstance(history, list | tuple):
            try:
                history = list(history)
            except TypeError:
                raise RequestError(validate_input(history)) from None
        return history

    def request(self, loop: _Loop, kwargs: dict[str, Any], history: list[Any]) -> dict[str, Any]:
        kwargs["input"] = history
        if loop.definitions:
            kwargs["tools"] = [flat_tool(t) for t in loop.definitions]
        if kwargs.get("store") is False:
            kwargs["include"] = with_encrypted_reasoning(kwargs.get("include"))
        return _streamed(kwargs, validate_input(kwargs["input"], dialect=loop.dialect))

    def answer(self, loop: _Loop, results: Sequence[ToolResult], keys: Sequence[str]) -> None:
        for r, key in zip(results, keys, strict=True):
            # A custom tool's call is answered with its own item type (the server pairs them).
            kind = "custom_tool_call_output" if r.call.type == "custom" else "function_call_output"
            loop.history.append({"type": kind, "call_id": key, "output": r.content})

    def adopt(
        self, loop: _Loop, completion: Any, calls: Sequence[ToolCall]
    ) -> tuple[dict[str, Any], list[str]]:
        items = cast("list[dict[str, Any]]", response_items(completion))
        keys = loop.adopt_items(items, calls)
        loop.history.extend(items)
        return {"items": items}, keys

    def pending(self, loop: _Loop) -> list[ToolCall] | None:
        return loop.pending_items()

    def history_id(self, loop: _Loop, call: ToolCall) -> str:
        return valid_unicode(call.id or "")  # as ``response_items`` writes the item's call_id

    def duplicate_ids(self, loop: _Loop) -> list[str]:
        return loop.duplicate_item_ids()

    def refuse_duplicates(self, loop: _Loop, duplicates: list[str]) -> None:
        r04 = [p for p in validate_input(loop.history) if p.rule == "R04"]
        said = f"call_id {duplicates[0]!r} appears twice in the input; nothing of it was run"
        raise RequestError(r04 or [HistoryProblem(None, "R04", "error", said)])

    def background(self, model: str, index: int, request: Mapping[str, Any]) -> str | None:
        return background_key(model, index, request)

    def create(self, wrapped: Any) -> Any:
        return wrapped.responses.create

    def final(self, stream: Any) -> Any:
        return stream.get_final_response()

    async def afinal(self, stream: Any) -> Any:
        return await stream.get_final_response()


API_ADAPTERS: dict[str, LoopAPI] = {"chat": ChatAPI(), "responses": ResponsesAPI()}
"""The adapter of each ``api=`` value (the loop picks one when a run starts)."""


def _streamed(kwargs: dict[str, Any], problems: Sequence[HistoryProblem]) -> dict[str, Any]:
    """The request, asking for a stream, once its check found no error: else
    :class:`~toolstitch.errors.RequestError` (with every problem found), before anything is sent."""
    if any(p.severity == "error" for p in problems):
        raise RequestError(problems)
    kwargs["stream"] = True
    return kwargs


def with_encrypted_reasoning(include: Any) -> Any:
    """``include`` with ``"reasoning.encrypted_content"``: with ``store=False`` the server keeps no
    reasoning item, so a reasoning model's reasoning can go back beside its calls (rule R08) only as
    the encrypted content the response carries when asked for it. Anything but a list, a tuple or
    nothing is the caller's to get right, and left as it is for the SDK to judge."""
    wanted = "reasoning.encrypted_content"
    if include is None:
        return [wanted]
    if not isinstance(include, list | tuple):
        return include
    return list(include) if wanted in include else [*include, wanted]


def flat_tool(definition: Mapping[str, Any]) -> dict[str, Any]:
    """A toolbox definition (the Chat Completions shape) in the Responses API's flat shape: a
    function's ``{"type": "function", "name": ..., ...}``, a custom tool's ``{"type": "custom",
    "name": ..., "format": ...}``."""
    kind = definition.get("type")
    body = definition.get(kind) if isinstance(kind, str) else None
    if kind not in ("function", "custom") or not isinstance(body, Mapping):
        return dict(definition)
    return {"type": kind, **body}


def background_key(model: str, index: int, request: Mapping[str, Any]) -> str | None:
    """The ledger key of a step's background response: the step and a digest of what it asks
    (model, input, tools), the same in every process that runs the same step of the same run; None
    when the request is not a background one."""
    if request.get("background") is not True:
        return None
    asked = [model, index, request.get("input"), request.get("tools"), request.get("instructions")]
    text = json.dumps(asked, sort_keys=True, ensure_ascii=True, default=str)
    return "background-response:" + hashlib.sha256(text.encode()).hexdigest()


def wrapped_client(client: Any, want_async: bool, api: str = "chat", transport: str = "http") -> Any:
    """The run's client, ``ts.wrap``-ped unless it is already, after checking it is of the kind the
    twin (``run``: ``openai.OpenAI``, ``arun``: ``openai.AsyncOpenAI``) and the API need."""
    target = client.unwrapped if isinstance(client, WrappedClient) else client
    if want_async and not isinstance(target, AsyncOpenAI):
        raise TypeError("arun() needs an openai.AsyncOpenAI client (use run() for a sync client)")
    if not want_async and not isinstance(target, OpenAI):
        raise TypeError("run() needs an openai.OpenAI client (use arun() for an async client)")
    if api == "responses" and not hasattr(target, "responses"):
        raise TypeError(f'api="responses" needs openai 1.66 or newer (this is {openai.__version__})')
    if transport == "websocket" and not hasattr(getattr(target, "responses", None), "connect"):
        raise TypeError(
            f'transport="websocket" needs an openai release with client.responses.connect() '
            f'(this is {openai.__version__}): pip install -U "toolstitch[websocket]"'
        )
    return client if isinstance(client, WrappedClient) else wrap(client)
