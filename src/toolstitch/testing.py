"""A local OpenAI-compatible server that streams scripted chunks over real HTTP.

Why a real server rather than a mocked transport: the SDK's own SSE decoder, httpx2's body reader
and the SDK's mapping of HTTP failures to exceptions are all part of what a stream wrapper must
survive. Only a real socket exercises them, so tests and the demo point the real ``openai`` client
(sync and async) at :class:`LocalServer` and script what the "model" sends.

Wire format, chosen on purpose:

* Streams use ``Transfer-Encoding: chunked`` and ``Connection: close``. Every write is one HTTP
  chunk, so ``fragment=N`` reaches the SDK's SSE decoder as N-byte pieces even when TCP coalesces
  packets.
* A cut stream (``cut_after=K``) stops without the terminating zero-length chunk and closes the
  socket. httpx2 then raises ``RemoteProtocolError`` ("incomplete chunked read"), which the SDK
  re-raises while iterating as ``openai.APIConnectionError`` (sync and async). A close-delimited
  body could not tell a dropped stream from a finished one; chunked framing can, as HTTP/1.1
  proxies in front of real providers do.
* A ``str`` item is sent verbatim, so tests can send ``event: error`` events, ``: keep-alive``
  comments or a whole recorded ``.sse`` body (:meth:`StreamScript.from_sse`).
* A Responses API event (a dict with a ``type``, as :func:`response_events` builds them) is sent
  as OpenAI sends it: an ``event: <type>`` line, then its ``data:`` line. ``POST /v1/responses``
  is served from the same queue and handler as chat completions; a Responses stream ends without
  ``data: [DONE]`` (:meth:`StreamScript.responses`), as OpenAI's does.
* Background responses (``background: true, stream: true``) are kept whole, even when the stream
  that carried them is cut (``cut_after_bytes=N`` drops it after byte N): ``GET
  /v1/responses/{id}?stream=true&starting_after=N`` streams the events after number N again, as
  OpenAI resumes a background stream; :meth:`LocalServer.enqueue_retrieve` scripts other answers.

The history check (``check_history=True``) mimics OpenAI's 400 answers for rules H01-H04 of
``docs/history-rules.md``. It is written independently of the package's own validator, so that a real-SDK
test can hold the two against each other.

This module holds :class:`LocalServer` (the queue, the records, the threads) and is the one to
import; what it serves is built and written in modules of their own, each re-exported here: the
chat chunks (``_chat_chunks.py``), the Responses API events (``_response_events.py``), the replies
and their bytes (``_stream_script.py``), the non-streamed answers (``_whole_answers.py``), the
history checks (``_server_checks.py``), the HTTP handler (``_http_server.py``) and the WebSocket
mode (``_socket_server.py``).
"""

from __future__ import annotations

import functools
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import openai

from ._chat_chunks import chunk, tool_call_chunks
from ._context_managers import StoppedOnExit
from ._http_server import RequestHandler
from ._http_server import Server as _Server  # the name benchmarks/workloads.py sets the backlog on
from ._response_events import response_events, response_object
from ._server_checks import check_messages_h01_h04, check_response_input
from ._socket_server import error_event
from ._stream_script import (
    HOLD_LIMIT,
    ErrorReply,
    Handler,
    JSONReply,
    Reply,
    StreamScript,
    chunk_dicts,
    sse_body,
)
from ._stream_script import SSEItem as SSEItem  # importable from here, as it always was
from ._whole_answers import EXAMPLE_ANSWER, completion_from_chunks

__all__ = [
    "ErrorReply",
    "Handler",
    "JSONReply",
    "LocalServer",
    "Reply",
    "StreamScript",
    "check_messages_h01_h04",
    "check_response_input",
    "chunk",
    "response_events",
    "response_object",
    "sse_body",
    "tool_call_chunks",
]


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One shared TLS context for every client made here. A new httpx2 client otherwise loads the CA
    bundle (~40 ms); suites create a client per test, and this server speaks plain HTTP anyway."""
    return ssl.create_default_context()


class LocalServer(StoppedOnExit):
    """An OpenAI-compatible server on 127.0.0.1 (ephemeral port) in a daemon thread.

    ``enqueue`` replies (FIFO) for ``POST /v1/chat/completions`` and ``POST /v1/responses``; when
    the queue is empty,
    ``handler`` (``fn(request_body) -> reply``) is asked; with neither, the server answers 500.
    ``requests`` and ``request_headers`` (lower-case names) record every chat request in order,
    including those rejected by the history check. A request rejected by ``check_history`` does not
    consume a queued reply: the "model" never saw it.

    Non-streamed completions it answers are kept (``completions``, by id) and served by the
    stored-completions endpoints (``GET``/``POST``/``DELETE /v1/chat/completions/{id}``, ``GET
    /v1/chat/completions``, ``GET .../{id}/messages``), as OpenAI serves completions made with
    ``store: true``. ``examples=True`` answers as the SDK's own mock server does, so the SDK's tests can
    run against it: a chat request with nothing queued and no handler gets a short text answer, and
    an unknown stored-completion id gets an example completion under that id.
    """

    def __init__(
        self,
        *,
        check_history: bool = False,
        handler: Handler | None = None,
        examples: bool = False,
        websocket: bool = False,
        item_delay: float = 0.0,
        websocket_lifetime: float | None = None,
    ) -> None:
        if not 0 <= item_delay < 60:
            raise ValueError("item_delay must be seconds from 0 to 60")
        if websocket_lifetime is not None and not 0 < websocket_lifetime <= 3600:
            raise ValueError("websocket_lifetime must be seconds from 0 to 3600")
        self.check_history = check_history
        self.websocket = websocket
        """Serve the Responses API's WebSocket mode too (``websocket_base_url``; the
        ``openai[realtime]`` extra): ``toolstitch/_socket_server.py``."""
        self.item_delay = item_delay
        """The latency model: seconds added to a Responses request's time to its first event per
        input item it carries (the items the server has not already seen), over HTTP and WebSocket."""
        self.websocket_lifetime = websocket_lifetime
        """Seconds after which the server closes a WebSocket connection (OpenAI's: 60 minutes)."""
        self._socket: Any = None
        self._stored_ids: set[str] = set()  # responses made with ``store`` not false
        self._caches: list[set[str]] = []  # each WebSocket connection's responses (``forget``)
        self.handler: Handler | None = handler
        self.examples = examples
        self.completions: dict[str, dict[str, Any]] = {}
        self.responses: dict[str, dict[str, Any]] = {}
        """The Responses API answers served (streamed or not), by id: ``previous_response_id``
        reads the function calls of one from here."""
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.streamed: list[tuple[int, int]] = []
        """Per stream served, in order: ``(writes sent, writes scripted)``; fewer were sent when the
        client closed the stream early (what a closed stream saved the "model")."""
        self.retrieves: list[dict[str, Any]] = []
        """Every ``GET /responses/{id}`` in order: ``id``, ``stream`` and ``starting_after`` (the
        query's text, or None)."""
        self._queue: deque[Reply] = deque()
        self._retrieve_queue: deque[Reply | Callable[[list[dict[str, Any]]], Reply]] = deque()
        self._background: dict[str, StreamScript] = {}
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> LocalServer:
        """Bind and serve; idempotent."""
        if self._httpd is None:
            self._stopping.clear()
            httpd = _Server(("127.0.0.1", 0), RequestHandler)
            httpd.owner = self
            self._thread = threading.Thread(
                target=httpd.serve_forever,
                kwargs={"poll_interval": 0.01},  # stop() waits up to one poll
                name="toolstitch-testing-server",
                daemon=True,
            )
            self._httpd = httpd
            self._thread.start()
        if self.websocket and self._socket is None:
            from ._socket_server import SocketServer

            self._socket = SocketServer(self)
        return self

    def stop(self) -> None:
        """Stop serving and release the port; streams still being written die with their daemon
        threads."""
        httpd, self._httpd = self._httpd, None
        self._stopping.set()  # a stalled stream ends now
        socket_server, self._socket = self._socket, None
        if socket_server is not None:
            socket_server.stop()
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("LocalServer is not running; call start() or use it as a context manager")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def websocket_base_url(self) -> str:
        """The WebSocket mode's base URL (``LocalServer(websocket=True)``): the SDK's
        ``client.responses.connect()`` opens ``{websocket_base_url}/responses``."""
        if self._socket is None:
            raise RuntimeError("LocalServer serves WebSocket mode only with LocalServer(websocket=True)")
        return f"ws://127.0.0.1:{self._socket.port}/v1"

    @property
    def websocket_connections(self) -> int:
        """How many WebSocket connections the server accepted so far."""
        return self._socket.connections if self._socket is not None else 0

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"base_url": self.base_url, "api_key": "test", "max_retries": 0}
        if self._socket is not None:
            options["websocket_base_url"] = self.websocket_base_url
        return options

    def client(self, **kwargs: Any) -> openai.OpenAI:
        """A real sync client for this server; ``max_retries=0`` so errors surface at once. With
        ``websocket=True`` it reaches the WebSocket mode too (``websocket_base_url``)."""
        options = self._options()
        if "http_client" not in kwargs:
            options["http_client"] = openai.DefaultHttpxClient(verify=_tls_context())
        return openai.OpenAI(**{**options, **kwargs})

    def async_client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        """A real async client for this server, configured like :meth:`client`."""
        options = self._options()
        if "http_client" not in kwargs:
            options["http_client"] = openai.DefaultAsyncHttpxClient(verify=_tls_context())
        return openai.AsyncOpenAI(**{**options, **kwargs})

    def _held(self, event: threading.Event) -> None:
        """A stream's ``hold``: until ``event`` is set, the server stops, or 10 seconds passed."""
        deadline = time.monotonic() + HOLD_LIMIT
        while not event.is_set() and not self._stopping.is_set() and time.monotonic() < deadline:
            event.wait(0.01)

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies, served in order to the next chat-completion requests."""
        with self._lock:
            self._queue.extend(replies)

    def enqueue_retrieve(self, *replies: Reply | Callable[[list[dict[str, Any]]], Reply]) -> None:
        """Queue answers for the next ``GET /responses/{id}?stream=true`` requests (a resumed
        stream), in order. A callable is given the events the server holds after the requested
        ``starting_after`` and returns the reply: ``lambda events: StreamScript.responses(events,
        cut_after_bytes=200)`` drops the resumed stream too; a plain reply is sent as it is (another
        response's events, a replay, a stream that never ends). With nothing queued, the stored
        events of the background response are sent, after ``starting_after``."""
        with self._lock:
            self._retrieve_queue.extend(replies)

    def background_events(self, response_id: str) -> list[dict[str, Any]]:
        """Every event of a background response served so far (``POST /responses`` with
        ``background: true, stream: true``), whether the stream that carried them was cut or not."""
        script = self._background_of(response_id)
        return [dict(e) for e in script.chunks if isinstance(e, Mapping)] if script is not None else []

    def _store_background(self, script: StreamScript) -> None:
        """Keep a background response's whole script: a resume streams its events again."""
        for event in chunk_dicts(script.chunks):
            response = event.get("response")
            if isinstance(response, Mapping) and isinstance(response.get("id"), str):
                with self._lock:
                    self._background[response["id"]] = script
                return

    def _background_of(self, response_id: str) -> StreamScript | None:
        with self._lock:
            return self._background.get(response_id)

    def _next_retrieve(self) -> Reply | Callable[[list[dict[str, Any]]], Reply] | None:
        with self._lock:
            return self._retrieve_queue.popleft() if self._retrieve_queue else None

    def _record_retrieve(self, request: dict[str, Any]) -> None:
        with self._lock:
            self.retrieves.append(request)

    def _wrote(self, sent: int, scripted: int) -> None:
        with self._lock:
            self.streamed.append((sent, scripted))

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.handler is not None:
            return self.handler(body)
        return StreamScript(EXAMPLE_ANSWER) if self.examples else None

    def _store(self, completion: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.completions[completion["id"]] = completion
        return completion

    def _stored(self, completion_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self.completions.get(completion_id)
        if found is None and self.examples:
            found = {**completion_from_chunks(EXAMPLE_ANSWER), "id": completion_id}
        return found

    def _stored_list(self) -> list[dict[str, Any]]:
        with self._lock:
            data = list(self.completions.values())
        return data or ([completion_from_chunks(EXAMPLE_ANSWER)] if self.examples else [])

    def _store_response(self, response: dict[str, Any], kept: bool = True) -> None:
        """A response served; ``kept``: made with ``store`` not false, so ``previous_response_id``
        finds it on any connection (else only on the WebSocket connection that made it)."""
        if isinstance(response.get("id"), str):
            with self._lock:
                self.responses[response["id"]] = response
                if kept:
                    self._stored_ids.add(response["id"])

    def forget(self) -> None:
        """Drop every response the server keeps, stored or in a connection's cache, as a server that
        lost its state: a ``previous_response_id`` then gets ``previous_response_not_found``."""
        with self._lock:
            self._stored_ids.clear()
            for cache in self._caches:
                cache.clear()

    def _socket_answer(
        self, body: dict[str, Any], cache: set[str], headers: dict[str, str]
    ) -> StreamScript | dict[str, Any]:
        """What a WebSocket ``response.create`` is answered with: the script to stream, or the
        ``error`` event to send (``cache``: the responses made on that connection; ``headers``:
        its handshake's, recorded with the request)."""
        self._record(body, headers)
        with self._lock:
            if not any(c is cache for c in self._caches):
                self._caches.append(cache)
        previous = body.get("previous_response_id")
        if previous is not None and not (previous in cache or self._kept(previous)):
            text = f"Previous response with id '{previous}' not found."
            return error_event(400, "previous_response_not_found", text, "previous_response_id")
        if self.check_history:
            problem = check_response_input(body.get("input"), self._response_calls(previous))
            if problem is not None:
                return error_event(400, None, problem, "input")
        try:
            reply = self._next_reply(body)
        except Exception as exc:
            return error_event(500, "server_error", f"LocalServer handler raised {exc!r}")
        if isinstance(reply, ErrorReply):
            payload = dict(reply.payload().get("error") or {})
            return error_event(reply.status, payload.get("code"), str(payload.get("message") or ""))
        if not isinstance(reply, StreamScript):
            text = "LocalServer script is empty: no stream queued with enqueue() and no handler set."
            return error_event(500, "server_error", text)
        return reply

    def _kept(self, response_id: Any) -> bool:
        with self._lock:
            return isinstance(response_id, str) and response_id in self._stored_ids

    def _response_calls(self, response_id: Any) -> list[str]:
        """The call ids of the function calls of a response served before (``previous_response_id``)."""
        with self._lock:
            found = self.responses.get(response_id) if isinstance(response_id, str) else None
        output = found.get("output") if found else None
        return [
            item["call_id"]
            for item in output or ()
            if isinstance(item, Mapping)
            and item.get("type") in ("function_call", "custom_tool_call")
            and "call_id" in item
        ]

    def _delete_stored(self, completion_id: str) -> None:
        with self._lock:
            self.completions.pop(completion_id, None)
