"""The SDK's ``Stream.__stream__`` loop for a fast-decoded Responses stream, without its per-event detours.

Per event, the SDK's loop (openai 3.x) re-reads the stream's options, asks ``is_mapping`` (an ABC
check) of every payload and calls the client's ``_process_response_data`` by keyword: for a 5-byte
argument delta, a tenth of what the event costs once decoding is fast. :func:`iterate` is that loop
with those steps taken once per stream or by type; its rules, in the SDK's order:

* reading stops at a ``data:`` that starts with ``[DONE]``, and the response is closed whenever the
  loop ends (the end, ``[DONE]``, an error, or the consumer closing the stream);
* an ``event:`` that starts with ``thread.`` is handed on as ``{"data": ..., "event": ...}``;
* any other payload (``json.loads``'s value, by :func:`._json.loads`) that is a mapping with a
  truthy ``error`` raises the SDK's ``openai.APIError`` (its ``message`` when that is a non-empty
  string, else "An error occurred during streaming"; the error as ``body``);
* everything else is the client's ``_process_response_data``'s value for the payload (:mod:`._fast`'s
  stand-in: the fast builder, the SDK's own construction for what it declines).

Events are read through the stream's own ``_iter_events()`` (its decoder, its transport error
translation). That these are the installed release's rules is not assumed: :mod:`._fast` runs both
loops over :data:`SAMPLE_BODIES` at first use (every rule above, and the cases where releases
differ: events after ``[DONE]``, ``event: error``, an error that is not a mapping ...) and compares
what they yield, what they raise, how much of the body they read and whether the response ends
closed; and it refuses a release whose ``__stream__`` reads any name :data:`KNOWN_NAMES` lacks (a
new option, a new step). Either way, such a release keeps the SDK's own loop. So does a stream
whose options ask for something else than the plain loop (``stream_mode`` other than ``"legacy"``,
``synthesize_event_and_data``), and every async stream (the SDK's async loop drains the body
differently per HTTP version; it stays the SDK's).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import openai

__all__ = ["KNOWN_NAMES", "SAMPLE_BODIES", "iterate", "plain_options"]

_FALLBACK_MESSAGE = "An error occurred during streaming"

#: Every name the known releases' sync ``Stream.__stream__`` reads (its ``co_names``).
KNOWN_NAMES = frozenset(
    {
        "APIError",
        "Any",
        "_cast_to",
        "_client",
        "_iter_events",
        "_options",
        "_process_response_data",
        "cast",
        "close",
        "data",
        "event",
        "get",
        "is_mapping",
        "isinstance",
        "json",
        "request",
        "response",
        "startswith",
        "str",
        "stream_mode",
        "synthesize_event_and_data",
    }
)


def plain_options(options: Any) -> bool:
    """Whether a stream with these request options runs the SDK's plain loop (the one
    :func:`iterate` is): no options, or ``stream_mode`` ``"legacy"`` (or none) without
    ``synthesize_event_and_data``."""
    if options is None:
        return True
    return getattr(options, "stream_mode", "legacy") == "legacy" and not getattr(
        options, "synthesize_event_and_data", False
    )


def _in_band(data: Any, request: Any) -> openai.APIError:
    """The SDK's error for a payload that carries ``error``."""
    error = data.get("error")
    message = error.get("message") if isinstance(error, Mapping) else None
    if not message or not isinstance(message, str):
        message = _FALLBACK_MESSAGE
    return openai.APIError(message=message, request=request, body=data["error"])


def iterate(sdk_stream: Any) -> Iterator[Any]:
    """What ``sdk_stream``'s own ``__stream__`` yields (see the module), one event at a time."""
    response = sdk_stream.response
    process = sdk_stream._client._process_response_data
    cast_to = sdk_stream._cast_to
    try:
        for sse in sdk_stream._iter_events():
            if sse.data.startswith("[DONE]"):
                break
            event = sse.event
            if event and event.startswith("thread."):
                yield process(data={"data": sse.json(), "event": event}, cast_to=cast_to, response=response)
                continue
            data = sse.json()
            if (type(data) is dict or isinstance(data, Mapping)) and data.get("error"):
                raise _in_band(data, response.request)
            yield process(data=data, cast_to=cast_to, response=response)
    finally:
        response.close()


def _sse(event: str | None, data: str) -> bytes:
    head = b"" if event is None else b"event: " + event.encode() + b"\n"
    return head + b"data: " + data.encode() + b"\n\n"


_DELTA = (
    '{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,'
    '"delta":"h","sequence_number":%d}'
)

#: Bodies (as lists of reads) on which the installed release's loop and :func:`iterate` must agree.
SAMPLE_BODIES: tuple[tuple[bytes, ...], ...] = (
    (_sse("response.output_text.delta", _DELTA % 1), _sse(None, _DELTA % 2), b"data: [DONE]\n\n"),
    (_sse(None, _DELTA % 1), b"data: [DONE] and more\n\n", _sse(None, _DELTA % 2), b": tail\n\n"),
    (_sse("response.output_text.delta", _DELTA % 1), _sse(None, _DELTA % 2)),
    (_sse("thread.run.created", '{"id":"run_1","object":"thread.run"}'), _sse(None, _DELTA % 1)),
    (_sse("thread.message.delta", '{"error":{"message":"no"}}'),),
    (_sse(None, _DELTA % 1), _sse("error", '{"type":"error","code":"x","message":"m","param":null}')),
    (_sse("error", '{"error":{"message":"boom","type":"server_error"}}'), _sse(None, _DELTA % 1)),
    (_sse(None, '{"error":{"message":""}}'),),
    (_sse(None, '{"error":{"message":7}}'),),
    (_sse(None, '{"error":"text"}'),),
    (_sse("response.failed", '{"error":["a"],"type":"response.failed"}'),),
    (_sse(None, '{"error":0,"type":"response.output_text.delta"}'), _sse(None, '{"error":{}}')),
    (_sse(None, '{"error":null}'), _sse(None, '{"error":false}'), _sse(None, '{"error":[]}')),
    (_sse(None, "[1, 2]"), _sse(None, '"text"'), _sse(None, "3"), _sse(None, "null")),
    (_sse("response.unknown", '{"type":"response.unknown","x":1}'), _sse("other", "{}")),
    (_sse(None, _DELTA % 1), _sse(None, "{not json")),
    (_sse(None, _DELTA % 1), b"data: \xff\n\n"),
    (b"", _sse(None, _DELTA % 1), b"id: 7\nretry: 5\n\n", _sse(None, _DELTA % 2)),
)
