"""Transport replays: ``Accumulator.feed(chunk, seq=...)`` drops chunks it has already seen.

A proxy that loses its upstream connection and replays the stream from the start, or a client
library that retries a read and hands the same chunk over twice, would otherwise append the same
argument text again: ``{"city": "Par`` + ``{"city": "Paris"}``. With a monotonic sequence number
(the SSE event ``id:``, a recording's line number, a broker's offset) every number not above the
last one seen is a replay: the chunk is dropped and a ``replayed_chunk`` anomaly says so.

Without ``seq`` every chunk is new (the documented behaviour): toolstitch cannot tell a replayed
piece from a legitimately repeated one, so a replay shows up as doubled text, which the strict parse
at seal usually refuses. Pass ``seq`` whenever the transport can resend.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from openai._streaming import SSEDecoder

import toolstitch as ts
from toolstitch.testing import chunk, tool_call_chunks

CALLS = [
    ("call_a", "get_weather", '{"city": "Paris", "unit": "c"}'),
    ("call_b", "get_time", '{"tz": "Europe/Paris"}'),
]
STREAM = tool_call_chunks(CALLS, pieces=4, content="Checking.")


def _result(acc: ts.Accumulator) -> Any:
    completion = acc.get_final_completion()
    message = completion.choices[0].message
    return (
        message.content,
        [(c.id, c.name, c.status, c.arguments) for c in acc.tool_calls],
        [c.finish_reason for c in completion.choices],
    )


def _reference() -> Any:
    acc = ts.Accumulator()
    for c in STREAM:
        acc.feed(c)
    return _result(acc)


def test_the_same_chunk_fed_twice_is_dropped() -> None:
    acc = ts.Accumulator()
    for seq, c in enumerate(STREAM):
        acc.feed(c, seq=seq)
        if seq == 3:
            events = acc.feed(c, seq=seq)  # handed over twice
            assert [type(e) for e in events] == [ts.events.AnomalyRecorded]
    assert _result(acc) == _reference()
    [note] = [a for a in acc.anomalies if a.code == "replayed_chunk"]
    assert note.raw is STREAM[3]
    assert acc.metrics.chunks == len(STREAM)  # the dropped chunk is not counted


def test_a_proxy_replay_from_the_start_does_not_duplicate_arguments() -> None:
    cut = 7  # the upstream connection drops after 7 chunks, mid-arguments
    delivered = list(enumerate(STREAM[:cut])) + list(enumerate(STREAM))
    acc = ts.Accumulator()
    for seq, c in delivered:
        acc.feed(c, seq=seq)
    assert _result(acc) == _reference()
    assert sum(a.code == "replayed_chunk" for a in acc.anomalies) == 1  # recorded once per stream
    assert all(c.ready for c in acc.tool_calls)


def _sse_with_ids(chunks: list[dict[str, Any]], first_id: int = 1) -> bytes:
    return (
        b"".join(f"id: {first_id + n}\ndata: {json.dumps(c)}\n\n".encode() for n, c in enumerate(chunks))
        + b"data: [DONE]\n\n"
    )


def _events(body: bytes, size: int) -> Iterator[Any]:
    """The SDK's own SSE decoder over ``body`` cut into ``size``-byte reads."""
    return SSEDecoder().iter_bytes(iter([body[k : k + size] for k in range(0, len(body), size)]))


def test_sse_event_ids_as_sequence_numbers_across_a_reconnect() -> None:
    # What a resuming proxy sends: the first connection's events, then (after a reconnect that did
    # not honour Last-Event-ID) the whole stream again, ids and all.
    body = _sse_with_ids(STREAM[:9])[: -len(b"data: [DONE]\n\n")] + _sse_with_ids(STREAM)
    acc = ts.Accumulator()
    for event in _events(body, size=11):
        if event.data == "[DONE]":
            break
        acc.feed(event.json(), seq=int(event.id or 0))
    assert _result(acc) == _reference()
    assert "replayed_chunk" in {a.code for a in acc.anomalies}


def test_a_number_not_above_the_last_one_is_a_replay() -> None:
    acc = ts.Accumulator()
    acc.feed(chunk(delta={"content": "a"}), seq=10)
    acc.feed(chunk(delta={"content": "b"}), seq=5)  # late, out of order: already superseded
    acc.feed(chunk(delta={"content": "c"}), seq=11)
    acc.feed(chunk(delta={}, finish_reason="stop"), seq=12)
    assert acc.get_final_completion().choices[0].message.content == "ac"


def test_chunks_without_seq_are_all_taken_as_new() -> None:
    acc = ts.Accumulator()
    piece = chunk(delta={"content": "ab"})
    acc.feed(piece)
    acc.feed(piece)
    acc.feed(chunk(delta={}, finish_reason="stop"))
    assert acc.get_final_completion().choices[0].message.content == "abab"
    assert "replayed_chunk" not in {a.code for a in acc.anomalies}


def test_without_seq_a_replay_from_the_start_is_not_run_with_doubled_arguments() -> None:
    acc = ts.Accumulator()
    for c in STREAM[:5] + STREAM:
        acc.feed(c)
    acc.end()
    # The doubled text no longer parses: the call is refused instead of run with garbage.
    first = acc.tool_calls[0]
    assert first.status == "invalid"
    assert isinstance(first.error, ts.errors.MalformedArguments)
