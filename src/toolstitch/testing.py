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
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import re
import ssl
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, TypeAlias

import openai

from ._socket_server import error_event, input_items

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

SSEItem: TypeAlias = Mapping[str, Any] | str
_DONE = b"data: [DONE]\n\n"
# Where one SSE event ends; used only to cut a raw body into items whose concatenation is the body.
# A stored chat completion (OpenAI's `store: true` API): /chat/completions/{id}[/messages].
_STORED_PATH = re.compile(r"/chat/completions/([^/]+)(/messages)?\Z")
# A Responses API response by id (``GET /responses/{id}``: retrieve, or resume a background stream).
_RESPONSE_PATH = re.compile(r"/responses/([^/]+)\Z")
_EVENT_END = re.compile(r"\r\n\r\n|\n\n|\r\r")


# --------------------------------------------------------------------------- chunk builders


def chunk(
    *,
    choices: list[dict[str, Any]] | None = None,
    delta: Mapping[str, Any] | None = None,
    finish_reason: str | None = None,
    index: int = 0,
    usage: Mapping[str, Any] | None = None,
    id: str = "chatcmpl-test",
    model: str = "test-model",
    created: int = 1700000000,
    **extra: Any,
) -> dict[str, Any]:
    """Build one well-formed ``chat.completion.chunk`` dict.

    With ``choices=None`` a single choice is built from ``delta``/``finish_reason``/``index``;
    pass ``choices=[]`` with ``usage`` for the usage-only final chunk OpenAI sends. ``extra`` keys
    are added at the top level (e.g. ``system_fingerprint`` or a provider's unknown field).
    """
    if choices is None:
        choices = [dict(index=index, delta=dict(delta or {}), logprobs=None, finish_reason=finish_reason)]
    out: dict[str, Any] = dict(id=id, object="chat.completion.chunk", created=created, model=model)
    out["choices"] = choices
    if usage is not None:
        out["usage"] = dict(usage)
    out.update(extra)
    return out


def _pieces(text: str, n: int) -> list[str]:
    """Cut ``text`` into at most ``n`` non-empty pieces at even character offsets (inside strings,
    escapes or numbers alike: a realistic stream does not respect JSON tokens)."""
    n = max(1, n)
    bounds = [round(k * len(text) / n) for k in range(n + 1)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def tool_call_chunks(
    calls: Sequence[tuple[str, str, str]],
    *,
    pieces: int = 3,
    interleave: bool = True,
    finish_reason: str | None = "tool_calls",
    content: str | None = None,
    usage: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """A realistic OpenAI-style tool-call stream for ``calls = [(id, name, arguments_text), ...]``.

    Order: a role chunk (plus one content chunk when ``content`` is given); per call a header
    fragment (``index``, ``id``, ``type``, ``function.name``, ``arguments: ""``) then its arguments
    in ``pieces`` pieces; with ``interleave`` the fragments of parallel calls alternate
    round-robin; then a chunk with ``finish_reason``; then a usage chunk with empty ``choices`` when
    ``usage`` is given.
    """
    out = [chunk(delta={"role": "assistant", "content": "" if content else None})]
    if content:
        out.append(chunk(delta={"content": content}))
    per_call: list[list[dict[str, Any]]] = []
    for i, (call_id, name, arguments) in enumerate(calls):
        header = {"index": i, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        parts = [{"index": i, "function": {"arguments": p}} for p in _pieces(arguments, pieces)]
        per_call.append([header, *parts])
    if interleave:
        width = max((len(f) for f in per_call), default=0)
        fragments = [f[k] for k in range(width) for f in per_call if k < len(f)]
    else:
        fragments = [frag for f in per_call for frag in f]
    out.extend(chunk(delta={"tool_calls": [frag]}) for frag in fragments)
    out.append(chunk(delta={}, finish_reason=finish_reason))
    if usage is not None:
        out.append(chunk(choices=[], usage=usage))
    return out


def _encode(item: SSEItem) -> bytes:
    """One item as wire bytes; JSON keeps non-ASCII as UTF-8 so fragmenting can split characters.
    A Responses event (an object with a string ``type``; chat chunks have none) gets its ``event:``
    line first, as OpenAI sends it."""
    if isinstance(item, str):
        return item.encode("utf-8")
    text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    try:
        body = text.encode()
    except UnicodeEncodeError:  # a lone surrogate: JSON can carry it only as an escape (\udc00)
        body = json.dumps(item, separators=(",", ":")).encode()
    data = b"data: " + body + b"\n\n"
    kind = item.get("type")
    if isinstance(kind, str) and kind and "\n" not in kind and "\r" not in kind:
        return b"event: " + kind.encode("utf-8") + b"\n" + data
    return data


# --------------------------------------------------------------------------- Responses API events

_RESPONSE_USAGE = {
    "input_tokens": 12,
    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 32,
}


def response_object(
    *,
    status: str = "completed",
    output: Sequence[Mapping[str, Any]] = (),
    id: str = "resp_test",
    model: str = "test-model",
    created_at: int = 1700000000,
    usage: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``response`` object as OpenAI sends it (in ``response.created`` ... ``response.completed``
    events, and as a non-streamed answer). ``extra`` keys override or add fields (``tools``,
    ``tool_choice``, ``error``, ``incomplete_details`` ...)."""
    out: dict[str, Any] = {
        "id": id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": [dict(item) for item in output],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": dict(usage) if usage is not None else None,
        "user": None,
        "metadata": {},
    }
    out.update(extra)
    return out


def response_events(
    calls: Sequence[tuple[str, str, str]] = (),
    *,
    text: str | None = None,
    reasoning: str | None = None,
    pieces: int = 3,
    status: str = "completed",
    id: str = "resp_test",
    model: str = "test-model",
    usage: Mapping[str, Any] | None = _RESPONSE_USAGE,
    interleave: bool = False,
    custom: bool | Collection[str] = (),
    **extra: Any,
) -> list[dict[str, Any]]:
    """A realistic Responses API stream, as OpenAI sends it, for ``calls = [(call_id, name,
    arguments_text), ...]``.

    ``response.created`` and ``response.in_progress``; a ``reasoning`` item when ``reasoning`` is
    given (its summary text streamed); a ``message`` item when ``text`` is given (its text in
    ``pieces`` deltas); then per call a ``function_call`` item: ``response.output_item.added``
    (``arguments: ""``), its arguments in ``pieces`` deltas, ``function_call_arguments.done`` and
    ``response.output_item.done`` (``status: "completed"``); last ``response.completed`` with the
    whole output (``status="incomplete"``: ``response.incomplete`` with ``incomplete_details``,
    ``"failed"``: ``response.failed`` with an ``error``). Item ids are ``fc_<n>`` (calls),
    ``msg_<n>`` and ``rs_<n>``. ``interleave`` alternates the deltas of the calls (OpenAI streams
    items one after another; this is for hostile orders). ``extra`` goes into every response
    object. Every event carries its ``sequence_number``. ``custom`` (``True``, or a collection of
    call ids) streams those calls as a custom tool's ``custom_tool_call`` items instead: ``input``
    for ``arguments`` (the third member is the input text), ids ``ctc_<n>``, pieces in
    ``response.custom_tool_call_input.delta`` and ``.done`` events.
    """
    events: list[dict[str, Any]] = []
    output: list[dict[str, Any]] = []

    def emit(event: dict[str, Any]) -> None:
        event["sequence_number"] = len(events)
        events.append(event)

    def snapshot(state: str, items: Sequence[Mapping[str, Any]], **more: Any) -> dict[str, Any]:
        return response_object(status=state, output=items, id=id, model=model, **{**extra, **more})

    emit({"type": "response.created", "response": snapshot("in_progress", [])})
    emit({"type": "response.in_progress", "response": snapshot("in_progress", [])})
    if reasoning is not None:
        position = len(output)
        rid = f"rs_{position}"
        emit(
            {
                "type": "response.output_item.added",
                "output_index": position,
                "item": {"id": rid, "type": "reasoning", "summary": []},
            }
        )
        for piece in _pieces(reasoning, pieces):
            emit(
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": rid,
                    "output_index": position,
                    "summary_index": 0,
                    "delta": piece,
                }
            )
        item = {"id": rid, "type": "reasoning", "summary": [{"type": "summary_text", "text": reasoning}]}
        emit({"type": "response.output_item.done", "output_index": position, "item": item})
        output.append(item)
    if text is not None:
        position = len(output)
        mid = f"msg_{position}"
        emit(
            {
                "type": "response.output_item.added",
                "output_index": position,
                "item": {
                    "id": mid,
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                },
            }
        )
        part = {"type": "output_text", "text": "", "annotations": []}
        emit(
            {
                "type": "response.content_part.added",
                "item_id": mid,
                "output_index": position,
                "content_index": 0,
                "part": part,
            }
        )
        for piece in _pieces(text, pieces):
            emit(
                {
                    "type": "response.output_text.delta",
                    "item_id": mid,
                    "output_index": position,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                }
            )
        emit(
            {
                "type": "response.output_text.done",
                "item_id": mid,
                "output_index": position,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            }
        )
        done_part = {"type": "output_text", "text": text, "annotations": []}
        emit(
            {
                "type": "response.content_part.done",
                "item_id": mid,
                "output_index": position,
                "content_index": 0,
                "part": done_part,
            }
        )
        item = {
            "id": mid,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{**done_part, "logprobs": []}],
        }
        emit({"type": "response.output_item.done", "output_index": position, "item": item})
        output.append(item)
    per_call: list[list[dict[str, Any]]] = []
    finished: list[dict[str, Any]] = []
    for call_id, name, arguments in calls:
        position = len(output) + len(per_call)
        is_custom = custom is True or (not isinstance(custom, bool) and call_id in custom)
        kind, key, prefix, stem = (
            ("custom_tool_call", "input", "ctc", "custom_tool_call_input")
            if is_custom
            else ("function_call", "arguments", "fc", "function_call_arguments")
        )
        fid = f"{prefix}_{position}"
        opened = {
            "id": fid,
            "type": kind,
            "status": "in_progress",
            key: "",
            "call_id": call_id,
            "name": name,
        }
        steps: list[dict[str, Any]] = [
            {"type": "response.output_item.added", "output_index": position, "item": opened}
        ]
        steps += [
            {
                "type": f"response.{stem}.delta",
                "item_id": fid,
                "output_index": position,
                "delta": piece,
            }
            for piece in _pieces(arguments, pieces)
        ]
        steps.append(
            {
                "type": f"response.{stem}.done",
                "item_id": fid,
                "output_index": position,
                key: arguments,
            }
        )
        item = {**opened, "status": "completed", key: arguments}
        steps.append({"type": "response.output_item.done", "output_index": position, "item": item})
        per_call.append(steps)
        finished.append(item)
    if interleave:
        width = max((len(steps) for steps in per_call), default=0)
        ordered = [steps[k] for k in range(width) for steps in per_call if k < len(steps)]
    else:
        ordered = [event for steps in per_call for event in steps]
    for event in ordered:
        emit(event)
    output.extend(finished)
    if status == "completed":
        emit({"type": "response.completed", "response": snapshot("completed", output, usage=usage)})
    elif status == "incomplete":
        details = {"reason": "max_output_tokens"}
        final = snapshot("incomplete", output, usage=usage, incomplete_details=details)
        emit({"type": "response.incomplete", "response": final})
    elif status == "failed":
        error = {"code": "server_error", "message": "The model failed to generate a response."}
        emit({"type": "response.failed", "response": snapshot("failed", output, error=error)})
    else:
        raise ValueError('status must be "completed", "incomplete" or "failed"')
    return events


def sse_body(items: Iterable[SSEItem], done: bool = True) -> bytes:
    """The exact bytes a :class:`StreamScript` of ``items`` sends (without HTTP chunk framing)."""
    return b"".join(_encode(i) for i in items) + (_DONE if done else b"")


# --------------------------------------------------------------------------- replies


_HOLD_LIMIT = 10.0
"""Seconds a ``StreamScript.hold`` waits at most: a test whose event never comes fails, not hangs."""


@dataclass
class StreamScript:
    """A streamed reply: ``chunks`` are dicts (sent as ``data: <json>``) or raw strings (verbatim).

    ``fragment=N`` re-cuts the whole body into N-byte writes; ``delay`` sleeps between writes (per
    item when not fragmented); ``done`` appends ``data: [DONE]``; ``cut_after=K`` sends the first K
    items, then drops the connection mid-body (the SDK raises ``openai.APIConnectionError``).
    """

    chunks: Sequence[SSEItem]
    _: KW_ONLY
    fragment: int | None = None
    delay: float = 0.0
    done: bool = True
    cut_after: int | None = None
    status: int = 200
    headers: Mapping[str, str] | None = None
    delays: Sequence[float] | None = None
    """Seconds to wait before each item (instead of ``delay``), e.g. a recording's own timing."""
    first_delay: float = 0.0
    """Seconds to wait, after the response headers, before the first write: a model's time to
    first token (``delay`` then paces the rest: write ``n`` goes ``first_delay + n * delay`` after
    the headers, on one schedule)."""
    cut_after_bytes: int | None = None
    """Send the first N bytes of the body (whatever they cut: an event, a line, a character), then
    drop the connection mid-body, as a proxy's idle timeout or a lost network does."""
    stall: float = 0.0
    """Seconds to hold the connection open after the last write, sending nothing (a stream that
    never ends, for a client's timeouts); ended early when the server stops."""
    hold: Mapping[int, threading.Event] | None = None
    """Before write ``n`` (an item, or a fragment with ``fragment``), wait until ``hold[n]`` is
    set: a model that writes on only once something happened on the client's side (an eager tool
    began, say). It makes an order a test asserts certain rather than likely on a loaded machine.
    Bounded: at most 10 seconds, and ended early when the server stops."""

    def __post_init__(self) -> None:
        if self.fragment is not None and self.fragment < 1:
            raise ValueError("fragment must be >= 1 byte")
        if self.cut_after is not None and self.cut_after < 0:
            raise ValueError("cut_after must be >= 0")
        if self.cut_after_bytes is not None and self.cut_after_bytes < 0:
            raise ValueError("cut_after_bytes must be >= 0")
        if not 0 <= self.stall <= 3600:
            raise ValueError("stall must be seconds from 0 to 3600")
        if self.delays is not None and any(not 0 <= d < 3600 for d in self.delays):
            raise ValueError("delays must be seconds from 0 to 3600")
        if not 0 <= self.first_delay < 3600:
            raise ValueError("first_delay must be seconds from 0 to 3600")
        if self.hold is not None and any(
            type(n) is not int or n < 0 or not isinstance(e, threading.Event) for n, e in self.hold.items()
        ):
            raise ValueError("hold must map write numbers (ints >= 0) to threading.Event")

    @classmethod
    def responses(cls, events: Sequence[SSEItem], **kw: Any) -> StreamScript:
        """A Responses API stream of ``events`` (see :func:`response_events`): it ends without
        ``data: [DONE]``, as OpenAI's does (``done=True`` adds it, as some compatible servers do)."""
        kw.setdefault("done", False)
        return cls(events, **kw)

    @classmethod
    def from_recording(
        cls, source: str | os.PathLike[str], *, timing: bool = False, **kw: Any
    ) -> StreamScript:
        """Serve a toolstitch recording (the JSONL that ``wrap(client, record=...)`` writes) again.

        The recorded chunks are sent as they were received, then the stream ends as it ended: a
        completed stream with ``data: [DONE]``; one that failed in-band (``APIError`` with the
        provider's error object) with that ``error`` event, so the SDK raises it again; any other
        failure, a stream the caller closed early, or a recording without footer by dropping the
        connection mid-body (the SDK raises ``openai.APIConnectionError``). ``timing=True`` waits
        before each chunk as long as the recording says it waited. A file of bare chunk objects,
        one per line, is served as a completed stream. Keyword arguments override what the
        recording implies (``fragment=4``, ``delay=...``).
        """
        items: list[SSEItem] = []
        offsets: list[float] = []
        footer: Mapping[str, Any] | None = None
        header = False
        text = Path(source).read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise ValueError(f"{source}:{number}: not JSON") from None
            if not isinstance(record, dict):
                raise ValueError(f"{source}:{number}: expected a JSON object")
            kind = record.get("type")
            if kind == "header":
                header = True
            elif kind == "chunk" and isinstance(record.get("chunk"), dict):
                items.append(record["chunk"])
                offset = record.get("offset_ms")
                offsets.append(float(offset) if isinstance(offset, (int, float)) else 0.0)
            elif kind == "footer":
                footer = record
                break
            elif kind is None and "choices" in record:
                items.append(record)
            else:
                raise ValueError(f"{source}:{number}: neither a recording record nor a chunk")
        options: dict[str, Any] = {"done": True}
        outcome = footer.get("outcome") if footer is not None else ("truncated" if header else "completed")
        error = footer.get("error") if footer is not None else None
        if outcome != "completed":
            body = error.get("body") if isinstance(error, dict) else None
            if isinstance(error, dict) and error.get("type") == "APIError" and isinstance(body, dict):
                items.append({"error": body})  # the SDK raises an in-band error event as APIError
                options["done"] = False
            else:
                options["cut_after"] = len(items)
        if timing and len(offsets) == len(items):
            previous = 0.0
            waits = []
            for offset in offsets:
                waits.append(min(max(0.0, offset - previous) / 1000.0, 60.0))
                previous = max(previous, offset)
            options["delays"] = waits
        options.update(kw)
        return cls(items, **options)

    @classmethod
    def from_sse(cls, source: str | os.PathLike[str], **kw: Any) -> StreamScript:
        """Serve a raw SSE body unchanged: a path (``Path``, or a ``str`` naming an existing file)
        or the body text itself. The body is split into events (so ``cut_after`` counts events), and
        ``done`` defaults to False: recorded bodies carry their own ``[DONE]`` when they had one.
        """
        if isinstance(source, os.PathLike) or ("\n" not in source and os.path.isfile(source)):
            text = Path(source).read_text(encoding="utf-8")
        else:
            text = source
        kw.setdefault("done", False)
        return cls(_split_events(text), **kw)

    def items(self) -> Sequence[SSEItem]:
        """The items actually sent, after ``cut_after``."""
        return self.chunks if self.cut_after is None else self.chunks[: self.cut_after]

    @property
    def cut(self) -> bool:
        """The connection is dropped mid-body (``cut_after`` or ``cut_after_bytes``)."""
        return self.cut_after is not None or self.cut_after_bytes is not None

    def writes(self) -> list[bytes]:
        """The body as the server writes it, one element per write (= per HTTP chunk)."""
        items = self.items()
        ends_cleanly = self.done and self.cut_after is None
        if self.fragment is None:
            out = [_encode(i) for i in items] + ([_DONE] if ends_cleanly else [])
        else:
            body, n = sse_body(items, done=ends_cleanly), self.fragment
            out = [body[k : k + n] for k in range(0, len(body), n)]
        if self.cut_after_bytes is None:
            return out
        kept, left = [], self.cut_after_bytes
        for data in out:
            if left <= 0:
                break
            kept.append(data[:left])
            left -= len(kept[-1])
        return kept


@dataclass
class ErrorReply:
    """An HTTP error answer; ``body=None`` gives an OpenAI-style error JSON naming the status."""

    status: int
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None

    def payload(self) -> Mapping[str, Any]:
        if self.body is not None:
            return self.body
        kind = "server_error" if self.status >= 500 else "invalid_request_error"
        return _error_json(f"Scripted error reply (HTTP {self.status}).", kind)


@dataclass
class JSONReply:
    """A non-streaming JSON answer (e.g. a ``chat.completion`` for ``stream=False`` calls)."""

    body: Mapping[str, Any]
    status: int = 200


Reply: TypeAlias = StreamScript | ErrorReply | JSONReply
# What LocalServer(examples=True) answers a chat request that nothing was scripted for.
_EXAMPLE_ANSWER = [
    chunk(delta={"role": "assistant", "content": "Hello!"}),
    chunk(delta={}, finish_reason="stop"),
]
Handler: TypeAlias = Callable[[dict[str, Any]], Reply]


def _error_json(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _split_events(text: str) -> list[str]:
    """Cut a raw SSE body after each blank line; the pieces concatenate back to ``text`` exactly."""
    out, start = [], 0
    for m in _EVENT_END.finditer(text):
        out.append(text[start : m.end()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


def _chunk_dicts(items: Iterable[SSEItem]) -> Iterator[Mapping[str, Any]]:
    """Every JSON chunk in ``items``: dicts as they are, ``data:`` lines of raw strings parsed."""
    for item in items:
        if not isinstance(item, str):
            yield item
            continue
        for line in item.splitlines():
            payload = line[5:].strip() if line.startswith("data:") else ""
            if payload and payload != "[DONE]":
                try:
                    parsed = json.loads(payload)
                except ValueError:
                    continue
                if isinstance(parsed, dict):
                    yield parsed


def _completion_from_chunks(items: Iterable[SSEItem]) -> dict[str, Any]:
    """A plain ``chat.completion`` from scripted chunks, for ``stream=False`` requests.

    Deliberately naive (text concatenated, tool calls merged by ``index``): it only serves
    pass-through tests and must not share logic with the package's accumulator.
    """
    head: Mapping[str, Any] = {}
    usage: Any = None
    states: dict[int, dict[str, Any]] = {}
    for c in _chunk_dicts(items):
        head = head or c
        usage = c.get("usage") or usage
        for choice in c.get("choices") or []:
            st = states.setdefault(
                choice.get("index", 0),
                {"content": None, "refusal": None, "calls": {}, "finish_reason": None},
            )
            delta = choice.get("delta") or {}
            for key in ("content", "refusal"):
                if isinstance(delta.get(key), str):
                    st[key] = (st[key] or "") + delta[key]
            for tc in delta.get("tool_calls") or []:
                slot = st["calls"].setdefault(
                    tc.get("index", 0),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                fn = tc.get("function") or {}
                slot["id"] = tc.get("id") or slot["id"]
                slot["function"]["name"] = fn.get("name") or slot["function"]["name"]
                if isinstance(fn.get("arguments"), str):
                    slot["function"]["arguments"] += fn["arguments"]
            st["finish_reason"] = choice.get("finish_reason") or st["finish_reason"]
    choices = []
    for index, st in sorted(states.items()):
        message: dict[str, Any] = {"role": "assistant", "content": st["content"], "refusal": st["refusal"]}
        if st["calls"]:
            message["tool_calls"] = [call for _, call in sorted(st["calls"].items())]
        finish = st["finish_reason"] or "stop"
        choices.append({"index": index, "message": message, "finish_reason": finish, "logprobs": None})
    return {
        "id": head.get("id") or "chatcmpl-test",
        "object": "chat.completion",
        "created": head.get("created") or 1700000000,
        "model": head.get("model") or "test-model",
        "choices": choices,
        "usage": usage,
    }


# ------------------------------------------------------------------------- history check (H01-H04)

_H01 = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message"
    " with 'tool_calls'."
)
_H02 = "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
_H03 = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each"
    " 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
_H07 = "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'."


def _history_violation(messages: Sequence[Any]) -> tuple[str, str] | None:
    """First H01-H04 violation as ``(message, param)``, scanning in order as OpenAI appears to.

    H04 (a foreign message between the calls and their results) has no text of its own: it shows up
    as H03 on the assistant message. Assumptions (not confirmed by a live server): H03's ``param``
    points at the assistant message; several missing ids are joined by ", "; H02's ``param`` is
    ``messages.[N].tool_call_id``; a trailing assistant message with ``tool_calls`` fails H03.
    """
    msgs = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in messages]
    i = 0
    while i < len(msgs):
        calls = msgs[i].get("tool_calls") if msgs[i].get("role") == "assistant" else None
        if calls:
            declared = [c.get("id") for c in calls if isinstance(c, Mapping)]
            pending = list(declared)
            j = i + 1
            while j < len(msgs) and msgs[j].get("role") == "tool":
                call_id = msgs[j].get("tool_call_id")
                if call_id is None:
                    return _H07, f"messages.[{j}].tool_call_id"
                if call_id not in declared:
                    return _H02.format(id=call_id), f"messages.[{j}].tool_call_id"
                if call_id in pending:
                    pending.remove(call_id)
                j += 1
            if pending:
                return _H03.format(ids=", ".join(map(str, pending))), f"messages.[{i}].role"
            i = j
            continue
        if msgs[i].get("role") == "tool":
            return _H01, f"messages.[{i}].role"
        i += 1
    return None


def check_messages_h01_h04(messages: Sequence[Any]) -> str | None:
    """OpenAI's error text for the first H01-H04 violation in ``messages``; None when they pass."""
    found = _history_violation(messages)
    return None if found is None else found[0]


# ------------------------------------------------------------------ Responses input check (R01-R03)

_R01 = "No tool call found for function call output with call_id {id}."
_R02 = "No tool output found for function call {id}."
_R03 = "Missing required parameter: 'input[{n}].call_id'."


def check_response_input(input: Any, previous_calls: Sequence[str] = ()) -> str | None:
    """OpenAI's error text for the first problem it answers a Responses request's ``input`` with
    (400), or None: a ``function_call_output`` whose ``call_id`` no ``function_call`` before it
    (nor the previous response, ``previous_calls``) made; a ``function_call`` (or a previous
    response's call) that no ``function_call_output`` answers; an output without ``call_id``. A
    custom tool's ``custom_tool_call`` and ``custom_tool_call_output`` are held to the same.

    Written independently of the package's validator, from the answers OpenAI gives, so a test can
    hold the two against each other. A string ``input`` is a user message.
    """
    if not isinstance(input, list):
        return None
    items = [i.model_dump() if hasattr(i, "model_dump") else i for i in input]
    made: list[Any] = list(previous_calls)
    answered: set[str] = set()
    for n, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            made.append(item.get("call_id"))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                return _R03.format(n=n)
            if call_id not in made:
                return _R01.format(id=call_id)
            answered.add(call_id)
    for call_id in made:
        if call_id not in answered:
            return _R02.format(id=call_id)
    return None


def _response_from_events(items: Iterable[SSEItem]) -> dict[str, Any]:
    """The response object a scripted Responses stream ends with (its last ``response.*`` final
    event's), for a request that did not stream; naive on purpose, like the chat twin."""
    final: dict[str, Any] | None = None
    for event in _chunk_dicts(items):
        if event.get("type") in ("response.completed", "response.incomplete", "response.failed"):
            response = event.get("response")
            if isinstance(response, dict):
                final = response
    return final if final is not None else response_object(status="in_progress")


# --------------------------------------------------------------------------- HTTP server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: connections the kernel holds until ``serve_forever`` accepts them. The
    # standard library's default is 5, so a burst of concurrent streams (200 clients at once) had
    # most of its connections refused (``APIConnectionError``). The kernel caps it at its own
    # ``somaxconn``; nothing else here limits concurrency (one daemon thread per connection).
    request_queue_size = 1024
    owner: LocalServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up mid-stream: tests close streams early on purpose."""


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # one TCP segment per write, so fragments really travel apart
    server: _Server

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
            self._send_json(400, _error_json("starting_after must be an integer.", "invalid_request_error"))
            return
        background = owner._background_of(response_id)
        if not stream:
            with owner._lock:
                response = owner.responses.get(response_id)
            if response is None:
                self._send_json(
                    404, _error_json(f"No response with id '{response_id}'.", "invalid_request_error")
                )
            else:
                self._send_json(200, response)
            return
        queued = owner._next_retrieve()
        if background is None and queued is None:
            message = f"No background response with id '{response_id}' to stream."
            self._send_json(404, _error_json(message, "invalid_request_error"))
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
            self._send_json(404, _error_json(f"Unknown path {self.path}", "invalid_request_error"))
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
            self._send_json(400, _error_json("Request body is not a JSON object.", "invalid_request_error"))
            return
        owner = self.server.owner
        owner._record(body, {k.lower(): v for k, v in self.headers.items()})
        previous = body.get("previous_response_id") if responses else None
        if previous is not None and not owner._kept(previous):
            text = f"Previous response with id '{previous}' not found."
            error = _error_json(
                text, "invalid_request_error", "previous_response_id", "previous_response_not_found"
            )
            self._send_json(400, error)
            return
        if owner.check_history and responses:
            previous = owner._response_calls(body.get("previous_response_id"))
            problem = check_response_input(body.get("input"), previous)
            if problem is not None:
                self._send_json(400, _error_json(problem, "invalid_request_error", "input"))
                return
        elif owner.check_history:
            found = _history_violation(body.get("messages") or [])
            if found is not None:
                self._send_json(400, _error_json(found[0], "invalid_request_error", found[1]))
                return
        try:
            reply = owner._next_reply(body)
        except Exception as exc:  # a broken test handler must surface as a clear HTTP error
            self._send_json(500, _error_json(f"LocalServer handler raised {exc!r}", "server_error"))
            return
        if reply is None:
            msg = "LocalServer script is empty: no reply queued with enqueue() and no handler set."
            self._send_json(500, _error_json(msg, "server_error"))
        elif isinstance(reply, ErrorReply):
            self._send_json(reply.status, reply.payload(), reply.headers)
        elif isinstance(reply, JSONReply):
            self._send_json(reply.status, reply.body)
        elif body.get("stream") is True:
            if responses:
                owner._store_response(_response_from_events(reply.items()), body.get("store") is not False)
                if body.get("background") is True:
                    owner._store_background(reply)
                if owner.item_delay:
                    late = reply.first_delay + owner.item_delay * input_items(body)
                    reply = dataclasses.replace(reply, first_delay=min(late, 3599.0))
            self._send_stream(reply)
        elif responses:
            response = _response_from_events(reply.items())
            owner._store_response(response, body.get("store") is not False)
            self._send_json(reply.status, response, reply.headers)
        else:
            completion = _completion_from_chunks(reply.items())
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


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One shared TLS context for every client made here. A new httpx2 client otherwise loads the CA
    bundle (~40 ms); suites create a client per test, and this server speaks plain HTTP anyway."""
    return ssl.create_default_context()


class LocalServer:
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
            httpd = _Server(("127.0.0.1", 0), _RequestHandler)
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

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

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
        deadline = time.monotonic() + _HOLD_LIMIT
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
        for event in _chunk_dicts(script.chunks):
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
        return StreamScript(_EXAMPLE_ANSWER) if self.examples else None

    def _store(self, completion: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.completions[completion["id"]] = completion
        return completion

    def _stored(self, completion_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self.completions.get(completion_id)
        if found is None and self.examples:
            found = {**_completion_from_chunks(_EXAMPLE_ANSWER), "id": completion_id}
        return found

    def _stored_list(self) -> list[dict[str, Any]]:
        with self._lock:
            data = list(self.completions.values())
        return data or ([_completion_from_chunks(_EXAMPLE_ANSWER)] if self.examples else [])

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
