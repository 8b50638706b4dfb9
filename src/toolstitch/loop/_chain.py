"""How a run's requests reach the model: the whole history each step, or only what is new.

A run over the Responses API is stateless by default: each step sends the whole history over HTTP.
It can instead continue the response before (``incremental``): the step names that response
(``previous_response_id``) and sends only the items after it (the tool outputs, a correction), so the
server reads only what it has not seen. That is the default of ``transport="websocket"``, where every
step goes over one connection (``client.responses.connect()``, OpenAI's WebSocket mode), and an
opt-in over HTTP (``incremental=True``; the server then finds the response only if it was stored,
so ``store=False`` is refused).

The rules, the same over both transports, written once here:

* The run keeps the whole history itself (``result.input``); the chain is only an index into it:
  the id of the last response and how many history items the server holds under it.
* A step continues only from the response the step before received, as the history holds it. A
  call id the loop renamed in that response (a provider that reused one), a response without an id,
  or a history whose held part changed (a correction rewrote an item the server has) breaks the chain,
  and the step sends the whole history.
* When the server answers ``previous_response_not_found`` (a new connection, a server that dropped
  the state, a run resumed in another process), the step is sent once more with the whole history
  and no ``previous_response_id``, and the run goes on (over HTTP: a 400; over WebSocket: an
  ``error`` event before the response starts, handled by ``client/_websocket.py``).
* The connection is opened at the first step (or is the caller's, ``connection=``), reopened when it
  dropped, timed out, or is older than 55 minutes (OpenAI ends one after 60), and closed when the run
  ends (never the caller's). A send into a connection that closed while the run was elsewhere sent
  nothing: it goes once more, at once, on a new connection. A drop while a response streamed fails
  that attempt (``openai.APIConnectionError``) and the step is retried as over HTTP: calls whose
  arguments closed before the drop were claimed in the ledger and run once.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import openai

from ..client import aopen_connection, is_not_found, open_connection, socket_stream, stitched_connection

if TYPE_CHECKING:
    from ..client import StitchedConnection
    from ._run import _Loop

__all__ = ["MAX_AGE", "Chain"]

logger = logging.getLogger("toolstitch")

MAX_AGE = 55 * 60.0
"""Seconds after which the run opens a new connection before its next step (OpenAI: 60 minutes)."""
TRANSPORTS = ("http", "websocket")


class Chain:
    """One run's way to the model (see the module docstring)."""

    def __init__(
        self,
        api: str,
        transport: str,
        incremental: bool | None,
        connection: Any,
        create_kwargs: Mapping[str, Any],
    ) -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f'transport must be "http" or "websocket", not {transport!r}')
        if transport == "websocket" and api != "responses":
            raise ValueError(
                'transport="websocket" is the Responses API\'s WebSocket mode: pass api="responses"'
            )
        if connection is not None and transport != "websocket":
            raise ValueError('connection= is a WebSocket connection: pass transport="websocket" with it')
        if incremental is None:
            incremental = transport == "websocket"
        if incremental and api != "responses":
            raise ValueError(
                'incremental=True continues a response (previous_response_id): pass api="responses"'
            )
        if incremental and transport == "http" and create_kwargs.get("store") is False:
            raise ValueError(
                "incremental=True over HTTP needs the server to keep each response: drop store=False, "
                'or pass transport="websocket" (its connection keeps them even with store=False)'
            )
        if transport == "websocket" and create_kwargs.get("background") is True:
            raise ValueError(
                'WebSocket mode has no background responses: pass transport="http" with background=True'
            )
        if transport == "websocket" and importlib.util.find_spec("websockets") is None:
            raise TypeError(
                'transport="websocket" needs the SDK\'s WebSocket dependency (websockets): '
                'pip install "toolstitch[websocket]"'
            )
        self.transport = transport
        self.incremental = bool(incremental)
        self.given = connection
        """The caller's connection (``connection=``): used, never closed."""
        self.connection: StitchedConnection | None = None
        self.manager: Any = None
        """What opened the run's own connection (None: the caller's, or none yet)."""
        self.response_id: str | None = None
        self.known = 0
        """How many items of the history the server holds under ``response_id``."""

    # -- the request ---------------------------------------------------------------------------

    def split(self, loop: _Loop, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The request to send, and the whole one to send instead when the server has forgotten
        the response it continues (None: the request is already whole)."""
        if not self.incremental or self.response_id is None:
            return request, None
        whole, history, known = request.get("input"), loop.history, self.known
        if not isinstance(whole, list) or len(whole) < known or len(history) < known:
            return request, None
        if any(whole[i] is not history[i] for i in range(known)):
            return request, None  # the part the server holds was rewritten (a correction)
        return {**request, "input": whole[known:], "previous_response_id": self.response_id}, request

    def received(self, loop: _Loop, completion: Any, stream: Any) -> None:
        """The step's response joined the history: the next step continues from it, when it can."""
        if not self.incremental:
            return
        if getattr(getattr(stream, "sdk_stream", None), "resent", False):
            self._forgotten()  # over WebSocket the source sent it whole (client/_websocket.py)
        response_id = getattr(completion, "id", None)
        if loop.renamed or type(response_id) is not str or not response_id:
            self.response_id = None  # the server's items differ from the history's: send it whole
            return
        self.response_id, self.known = response_id, len(loop.history)

    def send(self, loop: _Loop, wrapped: Any, model: str, request: dict[str, Any], aio: bool) -> Any:
        """What the step's attempt reads (a coroutine of it for ``arun``)."""
        sent, whole = self.split(loop, request)
        if self.transport == "websocket":
            return (self._asocket if aio else self._socket)(wrapped, model, sent, whole)
        create = loop.api.create(wrapped)
        if whole is None:
            return create(model=model, **sent)
        return (self._ahttp if aio else self._http)(create, model, sent, whole)

    def _forgotten(self) -> None:
        logger.info("the server had forgotten the previous response; the step was sent whole")

    def _http(
        self, create: Callable[..., Any], model: str, sent: dict[str, Any], whole: dict[str, Any]
    ) -> Any:
        try:
            return create(model=model, **sent)
        except openai.BadRequestError as exc:
            if not is_not_found(exc):
                raise
        self._forgotten()
        return create(model=model, **whole)

    async def _ahttp(
        self, create: Callable[..., Awaitable[Any]], model: str, sent: dict[str, Any], whole: dict[str, Any]
    ) -> Any:
        try:
            return await create(model=model, **sent)
        except openai.BadRequestError as exc:
            if not is_not_found(exc):
                raise
        self._forgotten()
        return await create(model=model, **whole)

    # -- the connection ------------------------------------------------------------------------

    def _usable(self, wrapped: Any) -> StitchedConnection | None:
        """The connection to send on, if it still serves (the caller's, at first)."""
        if self.given is not None:
            self.connection, self.given = stitched_connection(wrapped, self.given), None
        connection = self.connection
        if connection is not None and not connection.broken and connection.age < MAX_AGE:
            return connection
        return None

    def _socket(self, wrapped: Any, model: str, sent: dict[str, Any], whole: dict[str, Any] | None) -> Any:
        for again in (False, True):
            connection = self._usable(wrapped)
            if connection is None:
                self.close()
                self.manager, connection = open_connection(wrapped)
                self.connection = connection
            try:
                return socket_stream(connection, {"model": model, **sent}, whole)
            except openai.APIConnectionError:
                if again or not connection.broken:
                    raise  # the send itself failed twice: the step's retry policy decides
        raise AssertionError("unreachable")  # pragma: no cover

    async def _asocket(
        self, wrapped: Any, model: str, sent: dict[str, Any], whole: dict[str, Any] | None
    ) -> Any:
        for again in (False, True):
            connection = self._usable(wrapped)
            if connection is None:
                await self.aclose()
                self.manager, connection = await aopen_connection(wrapped)
                self.connection = connection
            try:
                return await socket_stream(connection, {"model": model, **sent}, whole)
            except openai.APIConnectionError:
                if again or not connection.broken:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the run's own connection (never the caller's)."""
        manager, self.manager = self.manager, None
        if manager is not None:
            self.connection = None
            with contextlib.suppress(Exception):  # closing a connection that already dropped
                manager.__exit__(None, None, None)

    async def aclose(self) -> None:
        manager, self.manager = self.manager, None
        if manager is not None:
            self.connection = None
            with contextlib.suppress(Exception):
                await manager.__aexit__(None, None, None)
