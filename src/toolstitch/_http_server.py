"""The local test server's HTTP side: the request handler that answers ``/v1/chat/completions``,
``/v1/responses`` and the stored-completion endpoints for :class:`~toolstitch.testing.LocalServer`
(``testing.py``), which owns the queue of replies, the records and the thread it serves on.

The wire format it writes (chunked framing, a cut stream's missing end, the ``event:`` lines of the
Responses API) is described at the top of ``testing.py``; what it answers with is
``_stream_script.py``. Like the server, it imports nothing of toolstitch.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import urllib.parse
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from ._server_checks import check_response_input, history_violation
from ._socket_server import input_items
from ._stream_script import ErrorReply, JSONReply, Reply, StreamScript, error_json
from ._whole_answers import completion_from_chunks, response_from_events

if TYPE_CHECKING:  # for annotations only: testing imports this module (no cycle)
    from .testing import LocalServer

# A stored chat completion (OpenAI's `store: true` API): /chat/completions/{id}[/messages].
_STORED_PATH = re.compile(r"/chat/completions/([^/]+)(/messages)?\Z")
# A Responses API response by id (``GET /responses/{id}``: retrieve, or resume a background stream).
_RESPONSE_PATH = re.compile(r"/responses/([^/]+)\Z")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: connections the kernel holds until ``serve_forever`` accepts them. The
    # standard library's default is 5, so a burst of concurrent streams (200 clients at once) had
    # most of its connections refused (``APIConnectionError``). The kernel caps it at its own
    # ``somaxconn``; nothing else here limits concurrency (one daemon thread per connection).
    request_queue_size = 1024
    owner: LocalServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up mid-stream: tests close streams early on purpose."""


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # one TCP segment per write, so fragments really travel apart
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines on stderr."""

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def do_GET(self) -> None:
        if self._path().endswith("/models"):
            model = {"id": "test-model", "object": "model", "created": 1700000000, "owned_by": "test"}
            self._send_json(200, {"object": "list", "data": [model]})
        elif self._path().endswith("/chat/completions"):
            data = self.server.owner._stored_list()
            first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
            page = {"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": False}
            self._send_json(200, page)
        elif (found := _RESPONSE_PATH.search(self._path())) is not None:
            self._retrieve_response(found.group(1))
        else:
            self._stored_completion("GET")

    def _retrieve_response(self, response_id: str) -> None:
        """``GET /responses/{id}``: the response as it stands, or with ``stream=true`` the events
        of a background response after ``starting_after`` (OpenAI's way to resume a stream whose
        connection dropped): the next reply queued with :meth:`LocalServer.enqueue_retrieve`, else
        the stored events themselves, paced as the first stream was."""
        owner = self.server.owner
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        stream = query.get("stream", [""])[-1] == "true"
        raw_after = query.get("starting_after", [None])[-1]
        after = int(raw_after) if raw_after is not None and re.fullmatch(r"\d{1,18}", raw_after) else None
        owner._record_retrieve({"id": response_id, "stream": stream, "starting_after": raw_after})
        if raw_after is not None and after is None:
            self._send_json(400, error_json("starting_after must be an integer.", "invalid_request_error"))
            return
        background = owner._background_of(response_id)
        if not stream:
            with owner._lock:
                response = owner.responses.get(response_id)
            if response is None:
                self._send_json(
                    404, error_json(f"No response with id '{response_id}'.", "invalid_request_error")
                )
            else:
                self._send_json(200, response)
            return
        queued = owner._next_retrieve()
        if background is None and queued is None:
            message = f"No background response with id '{response_id}' to stream."
            self._send_json(404, error_json(message, "invalid_request_error"))
            return
        events: list[dict[str, Any]] = []
        if background is not None:
            events = [
                dict(e)
                for e in background.chunks
                if isinstance(e, Mapping)
                and type(e.get("sequence_number")) is int
                and (after is None or e["sequence_number"] > after)
            ]
        if callable(queued):
            reply: Reply = queued(events)
        elif queued is not None:
            reply = queued
        else:
            assert background is not None
            reply = StreamScript.responses(events, fragment=background.fragment, delay=background.delay)
        if isinstance(reply, ErrorReply):
            self._send_json(reply.status, reply.payload(), reply.headers)
        elif isinstance(reply, JSONReply):
            self._send_json(reply.status, reply.body)
        else:
            self._send_stream(reply)

    def do_DELETE(self) -> None:
        self._stored_completion("DELETE")

    def _stored_completion(self, method: str) -> None:
        """The stored-completions endpoints: retrieve, update (metadata), delete, list messages."""
        owner = self.server.owner
        found = _STORED_PATH.search(self._path())
        completion = owner._stored(found.group(1)) if found else None
        if found is None or completion is None or (method != "GET" and found.group(2)):
            self._send_json(404, error_json(f"Unknown path {self.path}", "invalid_request_error"))
        elif method == "DELETE":
            owner._delete_stored(completion["id"])
            deleted = {"id": completion["id"], "object": "chat.completion.deleted", "deleted": True}
            self._send_json(200, deleted)
        elif found.group(2):  # the messages: here those of the answer, with ids as stored messages have
            messages = [
                {**choice["message"], "id": f"{completion['id']}-{n}", "content_parts": None}
                for n, choice in enumerate(completion["choices"])
            ]
            first, last = (messages[0]["id"], messages[-1]["id"]) if messages else (None, None)
            page = {"object": "list", "data": messages, "first_id": first, "last_id": last, "has_more": False}
            self._send_json(200, page)
        elif method == "POST":
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                metadata = json.loads(raw or b"{}").get("metadata")
            except (ValueError, AttributeError):
                metadata = None
            self._send_json(200, owner._store({**completion, "metadata": metadata}))
        else:
            self._send_json(200, completion)

    def do_POST(self) -> None:
        responses = self._path().endswith("/responses")
        if not self._path().endswith("/chat/completions") and not responses:
            self._stored_completion("POST")
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_json(400, error_json("Request body is not a JSON object.", "invalid_request_error"))
            return
        owner = self.server.owner
        owner._record(body, {k.lower(): v for k, v in self.headers.items()})
        previous = body.get("previous_response_id") if responses else None
        if previous is not None and not owner._kept(previous):
            text = f"Previous response with id '{previous}' not found."
            error = error_json(
                text, "invalid_request_error", "previous_response_id", "previous_response_not_found"
            )
            self._send_json(400, error)
            return
        if owner.check_history and responses:
            previous = owner._response_calls(body.get("previous_response_id"))
            problem = check_response_input(body.get("input"), previous)
            if problem is not None:
                self._send_json(400, error_json(problem, "invalid_request_error", "input"))
                return
        elif owner.check_history:
            found = history_violation(body.get("messages") or [])
            if found is not None:
                self._send_json(400, error_json(found[0], "invalid_request_error", found[1]))
                return
        try:
            reply = owner._next_reply(body)
        except Exception as exc:  # a broken test handler must surface as a clear HTTP error
            self._send_json(500, error_json(f"LocalServer handler raised {exc!r}", "server_error"))
            return
        if reply is None:
            msg = "LocalServer script is empty: no reply queued with enqueue() and no handler set."
            self._send_json(500, error_json(msg, "server_error"))
        elif isinstance(reply, ErrorReply):
            self._send_json(reply.status, reply.payload(), reply.headers)
        elif isinstance(reply, JSONReply):
            self._send_json(reply.status, reply.body)
        elif body.get("stream") is True:
            if responses:
                owner._store_response(response_from_events(reply.items()), body.get("store") is not False)
                if body.get("background") is True:
                    owner._store_background(reply)
                if owner.item_delay:
                    late = reply.first_delay + owner.item_delay * input_items(body)
                    reply = dataclasses.replace(reply, first_delay=min(late, 3599.0))
            self._send_stream(reply)
        elif responses:
            response = response_from_events(reply.items())
            owner._store_response(response, body.get("store") is not False)
            self._send_json(reply.status, response, reply.headers)
        else:
            completion = completion_from_chunks(reply.items())
            if reply.status == 200:
                owner._store(completion)
            self._send_json(reply.status, completion, reply.headers)

    def _send_json(
        self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        self.wfile.write(data)

    def _send_stream(self, script: StreamScript) -> None:
        self.send_response(script.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        for name, value in (script.headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        written = 0
        writes = script.writes()
        try:
            delays = script.delays if script.fragment is None else None
            # Writes are paced on one schedule (the first after ``first_delay``, then one every
            # ``delay``), not by sleeping ``delay`` after each: sleeps overshoot, and summed over a
            # long stream the overshoot would add up to a slower model than the one scripted.
            start = time.monotonic() + script.first_delay
            for n, data in enumerate(writes):
                held = script.hold.get(n) if script.hold is not None else None
                if held is not None:
                    self.server.owner._held(held)
                if delays is not None:
                    if n < len(delays) and delays[n]:
                        time.sleep(delays[n])
                elif script.delay or script.first_delay:
                    wait = start + n * script.delay - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                written += 1
            if script.stall:
                self.server.owner._stopping.wait(script.stall)
            if not script.cut:
                self.wfile.write(b"0\r\n\r\n")  # the end of a chunked body; omitted when cut
                self.wfile.flush()
        except OSError:  # the client closed the stream early; nothing left to tell it
            pass
        finally:
            self.server.owner._wrote(written, len(writes))
