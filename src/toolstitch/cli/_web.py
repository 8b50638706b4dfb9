"""``toolstitch demo --web``: the demo conversation in a browser, streamed as it happens.

A person watching a streamed tool conversation wants to see progress: the text as it is written,
which tool the model is calling with which arguments while they are still arriving, each call turning
ready (or not), the results, then the answer. This module serves that as one small web page, with
the standard library only (``http.server`` and server-sent events; no new dependency, no build step):

* ``GET /`` is the page (``_web_page.html``: one file, inline CSS and JS, ``EventSource``);
* ``GET /run`` runs one conversation against the embedded local server and streams what happens as
  server-sent events, one JSON object per event (:func:`ui_event` says which).

The conversation is the same as ``toolstitch demo``'s (the scripted model of ``_demo_model``, the
tools of ``_demo``), run by :func:`toolstitch.run_events` with the real ``openai`` client over real
HTTP: the page shows each event as the loop hands it out. ``api="responses"`` (``toolstitch demo
--web --api responses``) runs it over the Responses API instead (the scripted model of
``_demo_responses``, the loop's ``api="responses"``): the same events, so the same page. A card's
arguments come from the call's display-only preview, never from anything executed: only a
``ready`` call's result goes back to the model, after the gate.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from .._context_managers import StoppedOnExit
from ..core import (
    ArgumentsDelta,
    ContentDelta,
    Event,
    ToolCall,
    ToolCallIncomplete,
    ToolCallInvalid,
    ToolCallReady,
    ToolCallStarted,
)
from ..history import call_error_text
from ..loop import (
    CallDispatched,
    CallFinished,
    RequestRetried,
    RunEvent,
    RunFinished,
    StepStarted,
    StreamEvent,
    run_events,
)
from ..tools import Toolbox, tool
from ._demo import FUNCTIONS, QUESTION, SYSTEM, TOOLS
from ._demo_model import LOCAL_MODEL, local_model
from ._demo_responses import local_responses_model

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.responses import ResponseInputItemParam

__all__ = ["PAGE", "WebDemo", "conversation", "demo_toolbox", "page_events", "page_html", "ui_event"]

Api = Literal["chat", "responses"]
#: How the page names the API it runs over (the page's ``#api`` element).
API_NAMES: dict[str, str] = {"chat": "Chat Completions", "responses": "the Responses API"}
_API_MARK = b'<span id="api">Chat Completions</span>'

PAGE = "_web_page.html"
#: The longest conversation the page runs (the scripted model needs two steps).
MAX_STEPS = 4


def page_html(api: Api = "chat") -> bytes:
    """The page, as shipped beside this module, naming the API its conversation runs over."""
    page = resources.files(__package__ or "toolstitch.cli").joinpath(PAGE).read_bytes()
    name = API_NAMES[api].encode()
    return page.replace(_API_MARK, b'<span id="api" data-api="' + api.encode() + b'">' + name + b"</span>")


def _card(call: ToolCall, step: int) -> dict[str, Any]:
    """What identifies a call's card on the page: its step, choice and index (never its id: the id
    may come late, or twice)."""
    return {"step": step, "key": f"{step}:{call.choice}:{call.index}", "index": call.index}


def ui_event(event: Event, step: int) -> dict[str, Any] | None:
    """One toolstitch stream event as the page's JSON, or ``None`` when the page shows nothing for it.

    ``text`` (a content delta), ``call`` (a card opens), ``arguments`` (the argument text that
    arrived, and the preview so far), ``status`` (``ready``, ``invalid`` with the reason, or
    ``incomplete``).
    """
    if isinstance(event, ContentDelta):
        return {"type": "text", "step": step, "choice": event.choice, "text": event.text}
    if isinstance(event, ToolCallStarted):
        return {"type": "call", **_card(event.call, step), "id": event.call.id, "name": event.call.name}
    if isinstance(event, ArgumentsDelta):
        call = event.call
        return {
            "type": "arguments",
            **_card(call, step),
            "id": call.id,
            "name": call.name,
            "text": event.text,
            # Display-only (``None`` before the first ``{``): the page shows it, nothing acts on it.
            "preview": call.preview,
        }
    if isinstance(event, (ToolCallReady, ToolCallInvalid, ToolCallIncomplete)):
        call = event.call
        out = {"type": "status", **_card(call, step), "id": call.id, "name": call.name, "status": call.status}
        if call.status == "ready":
            out["arguments"] = call.parsed
        else:
            out["error"] = call_error_text(call)
        return out
    return None


def demo_toolbox() -> Toolbox:
    """The demo's two functions as tools, with the JSON schemas ``toolstitch demo`` offers."""
    tools = []
    for definition in TOOLS:
        function = definition["function"]
        make = tool(
            name=function["name"],
            description=function["description"],
            parameters=function["parameters"],
            read_only=True,
        )
        tools.append(make(FUNCTIONS[function["name"]]))
    return Toolbox(tools)


def page_events(event: RunEvent | RunFinished) -> Iterator[dict[str, Any]]:
    """One event of :func:`toolstitch.run_events` as what the page shows (nothing, or one object)."""
    if isinstance(event, StreamEvent):
        shown = ui_event(event.event, event.step)
        if shown is not None:
            yield shown
    elif isinstance(event, StepStarted):
        yield {"type": "step", "step": event.step}
    elif isinstance(event, RequestRetried):
        yield {"type": "retry", "step": event.step, "error": f"{type(event.error).__name__}: {event.error}"}
    elif isinstance(event, CallDispatched):
        yield {"type": "running", **_card(event.call, event.step)}
    elif isinstance(event, CallFinished):
        result = event.result
        yield {"type": "result", **_card(result.call, event.step), "content": result.content}
    elif isinstance(event, RunFinished):
        completion = event.result.completion
        if event.result.stop_reason == "done" and completion is not None:
            answer = event.result.output_text or ""  # a completion's content, or a Response's text
            yield {"type": "answer", "step": event.result.steps[-1].index, "text": answer}
        else:
            yield {"type": "error", "message": f"the run stopped: {event.result.stop_reason}"}


def conversation(client: Any, model: str, api: Api = "chat") -> Generator[dict[str, Any], None, None]:
    """The demo conversation as the page's events, pulled from :func:`toolstitch.run_events`: each
    step's stream as it arrives, each call run (a read-only one eagerly), its result once it is
    ready, the answer. ``api="responses"``: over the Responses API (the same events)."""
    box = demo_toolbox()
    if api == "responses":
        items: list[ResponseInputItemParam] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
        ]
        run = run_events(client, model=model, input=items, toolbox=box, max_steps=MAX_STEPS, api="responses")
    else:
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
        ]
        run = run_events(client, model=model, messages=messages, toolbox=box, max_steps=MAX_STEPS)
    try:
        for event in run:
            yield from page_events(event)
    finally:
        run.close()  # the page went away: the run stops at its next event


@dataclass
class _Settings:
    events: Callable[[], Generator[dict[str, Any], None, None]]
    page: bytes


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the command prints its URL and nothing per request."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            self._send(200, "text/html; charset=utf-8", self.server.settings.page)
        elif path == "/run":
            self._stream()
        elif path == "/favicon.ico":
            self._send(204, "image/x-icon", b"")
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        events = self.server.settings.events()
        try:
            try:
                for event in events:
                    self._event(event)
                self._event({"type": "done", "ok": True})
            except OSError:
                raise  # the page went away: nothing left to tell it
            except Exception as exc:  # the conversation failed: the page says so, the server goes on
                self._event({"type": "error", "message": f"{type(exc).__name__}: {exc}"[:400]})
                self._event({"type": "done", "ok": False})
        except OSError:
            pass
        finally:
            events.close()  # the page went away (or the run ended): the run stops at its next event

    def _event(self, event: dict[str, Any]) -> None:
        data = json.dumps(event, ensure_ascii=False, default=str)
        self.wfile.write(f"data: {data}\n\n".encode("utf-8", "backslashreplace"))
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    settings: _Settings


class WebDemo(StoppedOnExit):
    """The page's server on 127.0.0.1 (``port=0`` picks a free port), with its own embedded model.

    ``delay`` is the pause between the scripted model's chunks, in seconds: long enough that a person
    (or a browser test) sees each argument arrive. Use it as a context manager, or call
    :meth:`start` and :meth:`stop`; :meth:`serve_forever` serves in the calling thread.
    ``api="responses"``: the conversation runs over the Responses API, against a scripted model that
    answers it (and checks every ``input`` as OpenAI does).
    """

    def __init__(
        self, *, port: int = 0, delay: float = 0.05, host: str = "127.0.0.1", api: Api = "chat"
    ) -> None:
        from ..testing import LocalServer

        if api not in API_NAMES:
            raise ValueError(f'api must be "chat" or "responses", not {api!r}')
        self.delay = delay
        self.api: Api = api
        if api == "responses":
            self._model = LocalServer(handler=local_responses_model(delay), check_history=True)
        else:
            self._model = LocalServer(handler=local_model(delay))
        self._httpd = _Server((host, port), _Handler)
        self._httpd.settings = _Settings(self._events, page_html(api))
        self._thread: threading.Thread | None = None

    def _events(self) -> Generator[dict[str, Any], None, None]:
        with self._model.client() as client:
            yield from conversation(client, LOCAL_MODEL, self.api)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/"

    def start(self) -> WebDemo:
        """Serve in a daemon thread."""
        self._model.start()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, name="toolstitch-web", daemon=True
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`stop` (from another thread) or Ctrl-C."""
        self._model.start()
        self._httpd.serve_forever(poll_interval=0.1)

    def stop(self) -> None:
        """Stop serving and release both ports."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()
        self._model.stop()
