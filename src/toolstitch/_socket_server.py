"""The Responses API's WebSocket mode, served on 127.0.0.1 beside :class:`~toolstitch.testing.LocalServer`.

``LocalServer(websocket=True)`` starts it; ``server.websocket_base_url`` is its address and
``server.client()`` gives the SDK that address (``websocket_base_url``), so
``client.responses.connect()`` reaches it. Replies come from the same queue and handler as the HTTP
requests: a :class:`~toolstitch.testing.StreamScript` of Responses events is sent one event per
WebSocket text message (a ``str`` item verbatim), an :class:`~toolstitch.testing.ErrorReply` as an
``error`` event with its status, as OpenAI's WebSocket mode answers.

What it keeps, as OpenAI's service does: each connection has its own cache of the responses made on
it, so ``previous_response_id`` names one of those, or one made with ``store`` not false (kept by the
server, on any connection or over HTTP); anything else is answered with the ``error`` event
``previous_response_not_found``. Requests on one connection are served one after the other.

The latency model (``LocalServer(item_delay=...)``, the same over HTTP): a request's time to its
first event is the script's ``first_delay`` plus ``item_delay`` for each input item it carries, the
items the server has not already seen (a continuation sends only the new ones; a stateless request
sends the whole history again).

``cut_after=K`` sends K events, then drops the connection without a close frame (the SDK raises
``ConnectionClosedError``); ``LocalServer(websocket_lifetime=S)`` closes each connection S seconds
after it opened (code 1001), between responses, as OpenAI ends a connection after 60 minutes.

A module of its own because ``websockets`` (the ``openai[realtime]`` extra) is imported only when a
server is asked to speak WebSocket.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for annotations only: this module never imports testing (no cycle)
    from .testing import LocalServer, StreamScript

__all__ = ["SocketServer", "error_event", "input_items"]

_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


def input_items(body: Mapping[str, Any]) -> int:
    """How many input items a Responses request carries (a string is one user message)."""
    given = body.get("input")
    if isinstance(given, str):
        return 1
    return len(given) if isinstance(given, list) else 0


def error_event(status: int, code: str | None, message: str, param: str | None = None) -> dict[str, Any]:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    error = {"type": kind, "code": code, "message": message, "param": param}
    return {"type": "error", "status": status, "error": error}


class SocketServer:
    """The WebSocket endpoint ``/v1/responses`` of one :class:`LocalServer`, in a daemon thread."""

    def __init__(self, owner: LocalServer) -> None:
        from websockets.sync.server import serve

        self.owner = owner
        self.connections = 0
        self._server = serve(self._serve, "127.0.0.1", 0, compression=None, max_size=None)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="toolstitch-testing-websocket", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.socket.getsockname()[1])

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(5)

    def _serve(self, connection: Any) -> None:
        """One connection: each ``response.create`` answered in turn, until the client leaves, the
        server stops, or the connection's lifetime ends."""
        from websockets.exceptions import ConnectionClosed

        owner = self.owner
        with owner._lock:
            self.connections += 1
        cache: set[str] = set()  # the responses made on this connection
        lifetime = owner.websocket_lifetime
        deadline = None if lifetime is None else time.monotonic() + lifetime
        try:
            while not owner._stopping.is_set():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    connection.close(1001, "connection lifetime reached")
                    return
                try:
                    message = connection.recv(timeout=min(left, 0.5) if left is not None else 0.5)
                except TimeoutError:
                    continue
                if not self._answer(connection, message, cache):
                    return
        except ConnectionClosed:
            return

    def _answer(self, connection: Any, message: Any, cache: set[str]) -> bool:
        """Answer one client message; False when the connection was dropped."""
        try:
            body = json.loads(message)
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("type") != "response.create":
            kind = body.get("type") if isinstance(body, dict) else None
            connection.send(json.dumps(error_event(400, "unknown_event_type", f"Unknown event {kind!r}.")))
            return True
        request = getattr(connection, "request", None)
        headers = {k.lower(): v for k, v in request.headers.raw_items()} if request is not None else {}
        answer = self.owner._socket_answer(body, cache, headers)
        if isinstance(answer, dict):
            connection.send(json.dumps(answer))
            return True
        return self._stream(connection, answer, body, cache)

    def _stream(self, connection: Any, script: StreamScript, body: dict[str, Any], cache: set[str]) -> bool:
        owner = self.owner
        items = script.items()
        start = time.monotonic() + script.first_delay + owner.item_delay * input_items(body)
        sent = 0
        for n, item in enumerate(items):
            held = script.hold.get(n) if script.hold is not None else None
            if held is not None:
                owner._held(held)
            if script.delays is not None:
                wait = (script.delays[n] if n < len(script.delays) else 0.0) + (
                    start - time.monotonic() if n == 0 else 0.0
                )
            else:
                wait = start + n * script.delay - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            connection.send(item if isinstance(item, str) else json.dumps(item))
            sent += 1
            if isinstance(item, Mapping) and item.get("type") in _TERMINAL:
                self._keep(item, body, cache)
        if script.stall:  # a server that goes silent (a client's read timeout)
            owner._stopping.wait(script.stall)
        owner._wrote(sent, len(script.chunks))
        if script.cut:
            _drop(connection)
            return False
        return True

    def _keep(self, event: Mapping[str, Any], body: Mapping[str, Any], cache: set[str]) -> None:
        """A finished response joins the connection's cache, and the server's store unless the
        request said ``store: false``."""
        response = event.get("response")
        if not isinstance(response, dict) or not isinstance(response.get("id"), str):
            return
        cache.add(response["id"])
        self.owner._store_response(response, kept=body.get("store") is not False)


def _drop(connection: Any) -> None:
    """Drop the connection as a lost network does: no close frame, the socket shut."""
    sock = getattr(connection, "socket", None)
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    connection.close_socket() if hasattr(connection, "close_socket") else connection.close()
