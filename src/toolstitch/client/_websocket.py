"""The Responses API's WebSocket mode on a wrapped client: each response on the connection, checked.

``ts.wrap(client).responses.connect()`` is the SDK's ``connect()``; the connection it enters is the
SDK's own (``send``, ``recv``, iteration, ``response.create``, ``on``, the session helpers of
``openai.lib.responses_websocket`` all work unchanged: a proxy passes them through) with one call
more, :meth:`StitchedConnection.create`. It sends ``response.create`` and returns the same
:class:`StitchedResponseStream` that ``responses.create(stream=True)`` returns over HTTP, reading
that response's events off the connection until the event that ends it: the SDK's event objects,
unchanged, fed to the same reader, so the calls are merged, sealed and checked as over HTTP, and
``get_final_response()`` is the SDK's ``Response``.

The boundary, written here so that nobody writes it again: a response's events are those read after
its ``response.create`` until ``response.completed``, ``.incomplete``, ``.failed`` or an ``error``
event (requests on one connection are answered in order). A stream closed before its end leaves the
rest of its response on the connection; the next response's stream reads past it first. Over HTTP the
SDK raises an ``error`` event as ``openai.APIError``; here it is raised the same way (an
``openai.APIStatusError`` of the status's class when the event carries one, so a 400 is a
``BadRequestError``), a connection that drops as ``openai.APIConnectionError``, one that sends
nothing for the client's read timeout as ``openai.APITimeoutError``, and a message that is not JSON
as ``openai.APIError``: whatever ends a response early, no call of it is ``ready``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import openai

from .._sdk import http_module
from ..recording import read_responses_contract, recording_path, responses_accumulator
from ._proxy import Proxy, like
from ._request import read_request
from ._responses_stream import AsyncStitchedResponseStream, Responses, StitchedResponseStream

if TYPE_CHECKING:
    from ._wrap import _Options

__all__ = [
    "AsyncStitchedConnection",
    "ConnectingResponses",
    "StitchedConnection",
    "aopen_connection",
    "is_not_found",
    "open_connection",
    "socket_stream",
    "stitched_connection",
]

_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
_DEFAULT_READ_TIMEOUT = 600.0  # the SDK's default timeout, when the client's cannot be read
_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


def _read_timeout(client: Any) -> float:
    """The client's read timeout in seconds (``timeout=`` of ``OpenAI(...)``), the longest a
    response may send nothing; the SDK's 600 s when it cannot be read."""
    timeout = getattr(client, "timeout", None)
    value = getattr(timeout, "read", timeout)
    return float(value) if isinstance(value, int | float) and value > 0 else _DEFAULT_READ_TIMEOUT


def _field(event: Any, name: str) -> Any:
    return event.get(name) if isinstance(event, dict) else getattr(event, name, None)


def is_not_found(error: BaseException) -> bool:
    """The server does not know the ``previous_response_id`` it was sent (a new connection, state
    it dropped): over HTTP a 400 ``BadRequestError``, here an ``error`` event, both with the code
    ``previous_response_not_found``."""
    body = getattr(error, "body", None)
    code = getattr(error, "code", None)
    if code is None and isinstance(body, Mapping):
        inner = body.get("error")
        code = body.get("code") if not isinstance(inner, Mapping) else inner.get("code")
    return isinstance(error, openai.APIError) and code == "previous_response_not_found"


class _Closed(Exception):
    """The connection is gone (raised by the readers; ``ConnectionClosed`` of websockets)."""


def _event_error(event: Any, request: Any) -> openai.APIError:
    """An ``error`` event as the SDK raises one over HTTP: ``APIError`` with the error object as
    ``body``, or the ``APIStatusError`` of its ``status``."""
    error = _field(event, "error")
    body = error.to_dict(warnings=False) if hasattr(error, "to_dict") else error  # as the server sent it
    if not isinstance(body, dict):
        body = {"message": str(body)[:2000]} if body is not None else {}
    said = body.get("message")
    message = said[:2000] if isinstance(said, str) else "An error occurred"
    status = _field(event, "status")
    if type(status) is int and 400 <= status < 600:
        cls = _STATUS_ERRORS.get(
            status, openai.InternalServerError if status >= 500 else openai.APIStatusError
        )
        response = http_module().Response(status, request=request)
        return cls(message, response=response, body=body)
    return openai.APIError(message, request, body=body)


class _Socket:
    """What both connection twins keep: the SDK connection, the options of the wrapped client, how
    many responses closed early still have events on the wire, and whether the connection broke."""

    def __init__(self, connection: Any, opts: _Options, client: Any) -> None:
        self.connection = connection
        self.opts = opts
        self.timeout = _read_timeout(client)
        self.request = http_module().Request("GET", _url(client))
        self.asked = 0
        """``response.create`` requests sent on the connection."""
        self.answered = 0
        """Of those, how many ended (their last event read, or skipped by a later stream): the
        events of request ``n`` come after the ends of the ``n - 1`` before it."""
        self.last_id: Any = None
        """The id of the last response that started (its late end is not the next one's)."""
        self.busy = False
        """A read is under way: the events of one connection are read by one reader at a time."""
        self.broken = False
        """The connection dropped, or a read timed out: a new one is needed."""
        self.opened_at = time.monotonic()

    def lost(self, exc: BaseException) -> openai.APIError:
        self.broken = True
        if isinstance(exc, TimeoutError | asyncio.TimeoutError):
            error: openai.APIError = openai.APITimeoutError(self.request)
        else:
            error = openai.APIConnectionError(
                message=f"the WebSocket connection closed: {exc}", request=self.request
            )
        error.__cause__ = exc
        return error

    def begin_read(self) -> None:
        """Refuse a second reader: two runs or threads reading one connection would take each
        other's events (each opens its own connection unless given one, ``connection=``)."""
        if self.busy:
            raise RuntimeError(
                "another stream is reading this WebSocket connection: read one response at a time, "
                "or give each concurrent run its own connection"
            )
        self.busy = True

    def parsed(self, data: bytes) -> Any:
        try:
            return self.connection.parse_event(data)
        except (ValueError, RecursionError, TypeError) as exc:  # not JSON, or nested past reading
            raise openai.APIError("a WebSocket message that is not JSON", self.request, body=None) from exc


def _url(client: Any) -> str:
    base = getattr(client, "websocket_base_url", None) or str(getattr(client, "base_url", ""))
    return str(base).rstrip("/") + "/responses"


def _closed_errors() -> tuple[type[BaseException], ...]:
    from websockets.exceptions import ConnectionClosed

    return (ConnectionClosed,)


class _Watchdog:
    """The sync reader's timeout: a daemon thread that closes the connection when a read has waited
    longer than the read timeout (the SDK's blocking ``recv`` takes none). Arming it is one store per
    event, never a wake-up: the thread looks at the deadline at least once per read timeout (at most
    a minute), so a read that hangs ends between one and two timeouts after it began. The thread
    ends after a period with no read, and the next read starts another: a connection left open, or
    closed by its owner, keeps no thread."""

    def __init__(self, socket: _Socket) -> None:
        self.socket = socket
        self.deadline: float | None = None
        self.fired = False
        self._lock = threading.Lock()
        self._alive = False
        self._stop = threading.Event()

    def arm(self) -> None:
        self.deadline = time.monotonic() + self.socket.timeout
        if not self._alive:
            with self._lock:
                if not self._alive and not self._stop.is_set():
                    self._alive = True
                    threading.Thread(
                        target=self._watch, name="toolstitch-websocket-timeout", daemon=True
                    ).start()

    def disarm(self) -> None:
        self.deadline = None

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        period = min(self.socket.timeout, 60.0)
        idle = False
        while not self._stop.is_set():
            deadline = self.deadline
            if deadline is None:
                with self._lock:
                    if idle and self.deadline is None:
                        self._alive = False  # no read for a whole period: the next one restarts it
                        return
                idle = True
                self._stop.wait(period)
                continue
            idle = False
            left = deadline - time.monotonic()
            if left > 0:
                self._stop.wait(min(left, period))
                continue
            self.fired = True
            self.deadline = None
            self._stop.set()
            with contextlib.suppress(Exception):  # already closed: the reader ends either way
                self.socket.connection.close()
        self._alive = False


_SKIP, _YIELD, _LAST, _RESEND = range(4)


class _Source:
    """The events of one response on a sync connection (see the module docstring). Every decision
    is :meth:`verdict`'s, shared with the async twin, which differs only in how it waits."""

    def __init__(self, socket: _Socket, watchdog: _Watchdog | None, fallback: dict[str, Any] | None) -> None:
        self.socket = socket
        self.watchdog = watchdog
        self.fallback = fallback
        self.number = 0
        """Which request of the connection this response answers (``_Socket.asked`` once sent)."""
        self.started = False  # its ``response.created`` (or any event of its own) arrived
        self.ended = False
        self.resent = False
        """The server had forgotten the previous response: the request went again, whole."""

    def verdict(self, event: Any) -> int:
        """What to do with ``event``: skip it (an earlier response's), yield it, yield it as the
        last, or send the request again whole; an ``error`` event is raised here."""
        socket = self.socket
        kind = _field(event, "type")
        if socket.answered < self.number - 1:  # an earlier response, closed or never read
            if kind in _TERMINAL:
                socket.answered += 1
            return _SKIP
        if not self.started and kind in _TERMINAL and kind != "error":
            said = _field(_field(event, "response"), "id")
            if said is not None and said == socket.last_id:
                return _SKIP  # the end of an earlier response an ``error`` event already ended
        if kind == "error":
            socket.answered += 1
            error = _event_error(event, socket.request)
            if not self.started and self.fallback is not None and is_not_found(error):
                return _RESEND
            self.ended = True
            raise error
        if kind == "response.created":
            socket.last_id = _field(_field(event, "response"), "id")
        self.started = True
        if kind in _TERMINAL:
            socket.answered += 1
            self.ended = True
            return _LAST
        return _YIELD

    def whole(self) -> dict[str, Any]:
        """The request to send again (the whole history), once."""
        fallback, self.fallback = self.fallback, None
        assert fallback is not None
        self.resent = True
        return fallback

    def _recv(self) -> Any:
        socket, watchdog = self.socket, self.watchdog
        assert watchdog is not None
        socket.begin_read()
        watchdog.arm()
        try:
            data = socket.connection.recv_bytes()
        except _closed_errors() as exc:
            raise socket.lost(TimeoutError() if watchdog.fired else exc) from exc
        finally:
            watchdog.disarm()
            socket.busy = False
        return socket.parsed(data)

    def __iter__(self) -> Iterator[Any]:
        while True:
            event = self._recv()
            verdict = self.verdict(event)
            if verdict == _RESEND:
                self.number = _send(self.socket, self.whole())
            elif verdict != _SKIP:
                yield event
                if verdict == _LAST:
                    return

    def close(self) -> None:
        """Nothing to release: the rest of the response, if any, is skipped by the next stream."""
        self.ended = True


class _AsyncSource(_Source):
    """The async twin of :class:`_Source`; its timeout is ``asyncio.wait_for``."""

    async def _arecv(self) -> Any:
        socket = self.socket
        socket.begin_read()
        try:
            data = await asyncio.wait_for(socket.connection.recv_bytes(), socket.timeout)
        except (*_closed_errors(), asyncio.TimeoutError) as exc:  # type: ignore[misc]
            raise socket.lost(exc) from exc
        finally:
            socket.busy = False
        return socket.parsed(data)

    async def __aiter__(self) -> AsyncIterator[Any]:
        while True:
            event = await self._arecv()
            verdict = self.verdict(event)
            if verdict == _RESEND:
                self.number = await _asend(self.socket, self.whole())
            elif verdict != _SKIP:
                yield event
                if verdict == _LAST:
                    return


def _event(request: Mapping[str, Any]) -> dict[str, Any]:
    """``response.create`` for ``request``: WebSocket mode takes the HTTP fields but ``stream``
    (every response streams) and has no background responses."""
    if request.get("background") is True:
        raise ValueError("WebSocket mode has no background responses: send background=True over HTTP")
    return {"type": "response.create", **{k: v for k, v in request.items() if k != "stream"}}


def _send(socket: _Socket, request: Mapping[str, Any]) -> int:
    """Send one ``response.create``; which request of the connection it is."""
    try:
        socket.connection.send(_event(request))
    except _closed_errors() as exc:
        raise socket.lost(exc) from exc
    socket.asked += 1
    return socket.asked


async def _asend(socket: _Socket, request: Mapping[str, Any]) -> int:
    try:
        await socket.connection.send(_event(request))
    except _closed_errors() as exc:
        raise socket.lost(exc) from exc
    socket.asked += 1
    return socket.asked


def _stream(socket: _Socket, source: Any, request: dict[str, Any], started: float) -> Any:
    opts = socket.opts
    accumulator = responses_accumulator(
        read_responses_contract(request),
        limits=opts.limits,
        empty_arguments=opts.empty_arguments,
        started_at=started,
    )
    cls = AsyncStitchedResponseStream if isinstance(source, _AsyncSource) else StitchedResponseStream
    stream = cls(source, accumulator, request=request, guard=opts.guard)
    if opts.record is not None:
        stream.record(recording_path(opts.record), redact=opts.redact)
    return stream


class StitchedConnection(Proxy):
    """The SDK's ``ResponsesConnection``, with :meth:`create`: one response, checked."""

    __slots__ = ("__weakref__", "_socket", "_watchdog")  # weakly held by the SDK's session helpers

    _socket: _Socket
    _watchdog: _Watchdog | None

    def __init__(self, target: Any, opts: _Options, client: Any) -> None:
        super().__init__(target, opts)
        object.__setattr__(self, "_socket", _Socket(target, opts, client))
        object.__setattr__(self, "_watchdog", None)

    def create(self, **params: Any) -> StitchedResponseStream:
        """Send ``response.create`` with ``params`` (those of ``responses.create``, without
        ``stream``) and return the stitched stream of that response's events: iterate it for the
        SDK's events, read ``tool_calls``, call ``get_final_response()``."""
        return socket_stream(self, params, None)  # type: ignore[no-any-return]

    @property
    def unwrapped(self) -> Any:
        """The SDK's own connection."""
        return self._target

    @property
    def broken(self) -> bool:
        """The connection dropped or timed out: open another one."""
        return self._socket.broken

    @property
    def age(self) -> float:
        """Seconds since the connection was opened (OpenAI ends one after 60 minutes)."""
        return time.monotonic() - self._socket.opened_at

    def __iter__(self) -> Iterator[Any]:
        return iter(self._target)

    def __enter__(self) -> StitchedConnection:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self, **kwargs: Any) -> None:
        """Close the connection (the SDK's ``close``)."""
        if self._watchdog is not None:
            self._watchdog.stop()
        self._target.close(**kwargs)


class AsyncStitchedConnection(StitchedConnection):
    """The SDK's ``AsyncResponsesConnection``, with ``await connection.create(...)``."""

    __slots__ = ()

    async def create(self, **params: Any) -> AsyncStitchedResponseStream:  # type: ignore[override]
        """The async twin of :meth:`StitchedConnection.create`."""
        return await socket_stream(self, params, None)  # type: ignore[no-any-return]

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._target.__aiter__()  # type: ignore[no-any-return]

    async def __aenter__(self) -> AsyncStitchedConnection:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._target.close()

    async def close(self, **kwargs: Any) -> None:  # type: ignore[override]
        await self._target.close(**kwargs)


def socket_stream(connection: StitchedConnection, params: Mapping[str, Any], fallback: Any) -> Any:
    """Send one response's request on ``connection`` and return its stitched stream (a coroutine of
    it on an async connection). ``fallback``: the request to send instead, once, when the server
    answers ``previous_response_not_found`` before anything else (the loop's whole history)."""
    socket = connection._socket
    sent, request, started = read_request(dict(params))
    if isinstance(connection, AsyncStitchedConnection):

        async def acreate() -> Any:
            source = _AsyncSource(socket, None, fallback)
            source.number = await _asend(socket, sent)
            return _stream(socket, source, request, started)

        return acreate()
    watchdog = connection._watchdog
    if watchdog is None:
        watchdog = _Watchdog(socket)
        object.__setattr__(connection, "_watchdog", watchdog)
    source = _Source(socket, watchdog, fallback)
    source.number = _send(socket, sent)
    return _stream(socket, source, request, started)


def stitched_connection(wrapped: Any, connection: Any) -> StitchedConnection:
    """``connection`` (the SDK's, entered from ``client.responses.connect()``, or already
    stitched) with :meth:`StitchedConnection.create`, under the options of ``wrapped`` (a
    ``ts.wrap``-ped client). A ``TypeError`` that says what to pass when it is no connection of
    the client's kind (sync or async)."""
    is_async = wrapped._opts.is_async
    send = getattr(connection, "send", None)
    if not callable(send) or not callable(getattr(connection, "recv_bytes", None)):
        raise TypeError(
            "connection= takes what `with client.responses.connect() as connection:` gives, "
            f"not a {type(connection).__name__}"
        )
    if inspect.iscoroutinefunction(send) != is_async:
        twin = "an AsyncOpenAI" if is_async else "an OpenAI"
        raise TypeError(f"connection= must be a connection of {twin} client, like the client the run uses")
    if isinstance(connection, StitchedConnection):
        return connection
    cls = AsyncStitchedConnection if is_async else StitchedConnection
    return cls(connection, wrapped._opts, wrapped.unwrapped)


def _connect_error(client: Any, exc: BaseException) -> openai.APIConnectionError:
    error = openai.APIConnectionError(
        message=f"could not open the WebSocket connection: {exc}",
        request=http_module().Request("GET", _url(client)),
    )
    error.__cause__ = exc
    return error


def open_connection(wrapped: Any) -> tuple[Any, StitchedConnection]:
    """Open a connection on ``wrapped`` (``responses.connect()``, entered): its manager (to leave
    it) and the connection. A connection that cannot be opened is ``openai.APIConnectionError``, as
    a request that cannot connect is over HTTP (the retry policy treats them alike)."""
    manager = wrapped.responses.connect()
    try:
        return manager, manager.__enter__()
    except openai.OpenAIError:
        raise
    except Exception as exc:
        raise _connect_error(wrapped.unwrapped, exc) from exc


async def aopen_connection(wrapped: Any) -> tuple[Any, AsyncStitchedConnection]:
    """The async twin of :func:`open_connection`."""
    manager = wrapped.responses.connect()
    try:
        return manager, await manager.__aenter__()
    except openai.OpenAIError:
        raise
    except Exception as exc:
        raise _connect_error(wrapped.unwrapped, exc) from exc


class _Manager(Proxy):
    """``responses.connect(...)`` of a wrapped client: the SDK's manager, entering a stitched
    connection (leaving it stops that connection's read timeout at once)."""

    __slots__ = ("_client", "_entered")

    _client: Any
    _entered: StitchedConnection | None

    def __init__(self, target: Any, opts: _Options, client: Any) -> None:
        super().__init__(target, opts)
        object.__setattr__(self, "_client", client)
        object.__setattr__(self, "_entered", None)

    def __enter__(self) -> StitchedConnection:
        entered = StitchedConnection(self._target.__enter__(), self._opts, self._client)
        object.__setattr__(self, "_entered", entered)
        return entered

    def enter(self) -> StitchedConnection:
        return self.__enter__()

    def _left(self) -> None:
        entered = self._entered
        if entered is not None and entered._watchdog is not None:
            entered._watchdog.stop()

    def __exit__(self, *exc_info: Any) -> None:
        self._left()
        self._target.__exit__(*exc_info)

    async def __aenter__(self) -> AsyncStitchedConnection:
        entered = AsyncStitchedConnection(await self._target.__aenter__(), self._opts, self._client)
        object.__setattr__(self, "_entered", entered)
        return entered

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._target.__aexit__(*exc_info)


class _AsyncManager(_Manager):
    __slots__ = ()

    async def enter(self) -> AsyncStitchedConnection:  # type: ignore[override]
        return await self.__aenter__()


class ConnectingResponses(Responses):
    """``client.responses`` of a wrapped client (``_responses_stream.Responses``), whose
    ``connect(...)`` is the SDK's, entering a :class:`StitchedConnection`."""

    __slots__ = ("_client",)

    _client: Any

    def __init__(self, target: Any, opts: _Options, client: Any) -> None:
        super().__init__(target, opts)
        object.__setattr__(self, "_client", client)

    @property
    def connect(self) -> Any:
        sdk_connect, opts, client = self._target.connect, self._opts, self._client

        def connect(*args: Any, **kwargs: Any) -> Any:
            manager = _AsyncManager if opts.is_async else _Manager
            return manager(sdk_connect(*args, **kwargs), opts, client)

        return like(sdk_connect, connect)
