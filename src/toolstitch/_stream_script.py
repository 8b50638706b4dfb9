"""What the local test server (``testing.py``) answers with, and the bytes it writes:
:class:`~toolstitch.testing.StreamScript`, :class:`~toolstitch.testing.ErrorReply`,
:class:`~toolstitch.testing.JSONReply` and :func:`~toolstitch.testing.sse_body`, re-exported by
``toolstitch.testing``, with the SSE encoding both ways (an item to its bytes, a raw body back to
its events and chunks).

A test script is data: nothing here opens a socket, so a script can be built, checked and turned
into bytes without a server. Like the server, it imports nothing of toolstitch.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, TypeAlias

SSEItem: TypeAlias = Mapping[str, Any] | str
DONE = b"data: [DONE]\n\n"
# Where one SSE event ends; used only to cut a raw body into items whose concatenation is the body.
_EVENT_END = re.compile(r"\r\n\r\n|\n\n|\r\r")

HOLD_LIMIT = 10.0
"""Seconds a ``StreamScript.hold`` waits at most: a test whose event never comes fails, not hangs."""


def encode(item: SSEItem) -> bytes:
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


def sse_body(items: Iterable[SSEItem], done: bool = True) -> bytes:
    """The exact bytes a :class:`StreamScript` of ``items`` sends (without HTTP chunk framing)."""
    return b"".join(encode(i) for i in items) + (DONE if done else b"")


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
        return cls(split_events(text), **kw)

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
            out = [encode(i) for i in items] + ([DONE] if ends_cleanly else [])
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
        return error_json(f"Scripted error reply (HTTP {self.status}).", kind)


@dataclass
class JSONReply:
    """A non-streaming JSON answer (e.g. a ``chat.completion`` for ``stream=False`` calls)."""

    body: Mapping[str, Any]
    status: int = 200


Reply: TypeAlias = StreamScript | ErrorReply | JSONReply
Handler: TypeAlias = Callable[[dict[str, Any]], Reply]


def error_json(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def split_events(text: str) -> list[str]:
    """Cut a raw SSE body after each blank line; the pieces concatenate back to ``text`` exactly."""
    out, start = [], 0
    for m in _EVENT_END.finditer(text):
        out.append(text[start : m.end()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


def chunk_dicts(items: Iterable[SSEItem]) -> Iterator[Mapping[str, Any]]:
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
