"""Any bytes-like read decodes, on both decoders (issue 22, round 2).

``ts.stitch(reads, decode=...)`` takes the raw reads of a response body. A read may be ``bytes``, a
``bytearray``, a ``memoryview`` (of any format, shape or stride: what a socket's ``recv_into`` or a
ring buffer hands out), an ``array``: toolstitch's own decoder once called ``split`` on it and raised
``AttributeError``. Every one of them now gives the chunks the same body gives as ``bytes``, with
``decode="sdk"`` and ``decode="fast"``, sync and async; and toolstitch's SSE decoder, fed a buffer
directly, decodes it exactly as the SDK's decoder does.
"""

from __future__ import annotations

import array
import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder as SDKDecoder

import toolstitch as ts
from tests.client.test_fast_sse import _arun, _run, bodies
from tests.conftest import examples
from toolstitch.client._fast import as_bytes
from toolstitch.client._sse import SAMPLE_BODIES, SSEDecoder
from toolstitch.testing import chunk, tool_call_chunks

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def sse_body(chunks: list[dict[str, Any]], *, crlf: bool = False) -> bytes:
    import json

    end = b"\r\n" if crlf else b"\n"
    events = [b"data: " + json.dumps(c).encode() + end + end for c in chunks]
    return b"".join(events) + b"data: [DONE]" + end + end


BODY = sse_body([*tool_call_chunks([("c1", "f", '{"city": "Zürich"}')])])
CRLF_BODY = sse_body(
    [chunk(delta={"role": "assistant", "content": "hé\r\n"}), chunk(finish_reason="stop")], crlf=True
)


def _strided(piece: bytes) -> memoryview:
    padded = bytes(b for x in piece for b in (x, 0))
    return memoryview(padded)[::2]


def _two_d(piece: bytes) -> memoryview:
    if len(piece) % 2:
        return memoryview(piece)  # an odd length has no two-row shape
    return memoryview(piece).cast("B", shape=[2, len(piece) // 2])


#: Ways to hand over one read, each keeping the bytes of ``piece``.
WRAPS: dict[str, Callable[[bytes], Any]] = {
    "bytes": bytes,
    "bytearray": bytearray,
    "memoryview": memoryview,
    "memoryview of a bytearray": lambda p: memoryview(bytearray(p)),
    "memoryview slice": lambda p: memoryview(b"xx" + p + b"yy")[2 : 2 + len(p)],
    "signed bytes view": lambda p: memoryview(p).cast("b"),
    "char view": lambda p: memoryview(p).cast("c"),
    "array('B')": lambda p: array.array("B", p),
    "strided view": _strided,
    "2-D view": _two_d,
}


def _cut(body: bytes, points: list[int]) -> list[bytes]:
    bounds = sorted({0, len(body), *(p % (len(body) + 1) for p in points)})
    return [body[a:b] for a, b in itertools.pairwise(bounds)]


# ----------------------------------------------------------------------------- the SSE decoder


@settings(max_examples=examples(400))
@given(
    body=bodies,
    points=st.lists(st.integers(0, 10_000), max_size=10),
    wrap=st.sampled_from(["bytearray", "memoryview", "memoryview slice", "signed bytes view", "array('B')"]),
)
def test_a_byte_buffer_decodes_as_its_bytes(body: bytes, points: list[int], wrap: str) -> None:
    reads = _cut(body, points)
    wrapped = [WRAPS[wrap](r) for r in reads]
    expected = _run(SDKDecoder().iter_bytes, reads)
    assert _run(SSEDecoder().iter_bytes, wrapped) == expected
    assert _arun(SSEDecoder(), wrapped) == expected


def _sdk_takes_buffers() -> bool:
    try:
        return bool(list(SDKDecoder().iter_bytes(iter([memoryview(b"data: x\n\n")]))))
    except Exception:
        return False


@pytest.mark.parametrize("wrap", sorted(WRAPS))
def test_the_decoder_does_what_the_sdk_decoder_does_with_any_read(wrap: str) -> None:
    # Whatever the SDK's own decoder makes of a buffer (a char view reads its items as bytes
    # objects, a 2-D view cannot be sliced), toolstitch's does too, error included.
    if not _sdk_takes_buffers():
        pytest.skip("this openai release's decoder reads bytes only")
    for body in (*SAMPLE_BODIES, BODY, CRLF_BODY):
        for size in (1, 2, 3, 7, len(body)):
            reads = [WRAPS[wrap](body[k : k + size]) for k in range(0, len(body), size)]
            assert _run(SSEDecoder().iter_bytes, reads) == _run(SDKDecoder().iter_bytes, reads)
            assert _arun(SSEDecoder(), reads) == _arun(SDKDecoder(), reads)


def test_as_bytes_keeps_every_byte_and_passes_on_what_is_not_bytes_like() -> None:
    for wrap in WRAPS.values():
        assert as_bytes(wrap(b"data: \r\n\x00\xff")) == b"data: \r\n\x00\xff"
    data = b"\x01\x00\x00\x00\x02\x00\x00\x00"
    assert as_bytes(memoryview(data).cast("I")) == data  # raw bytes, not items
    for other in ("text", 7, None):
        assert as_bytes(other) is other


# ----------------------------------------------------------------------------- ts.stitch over bytes


def _summary(stream: Any) -> tuple[list[Any], list[Any], list[Any]]:
    chunks = [c.model_dump() for c in stream]
    calls = [(c.name, c.status, c.parsed) for c in stream.tool_calls]
    return chunks, calls, [a.code for a in stream.anomalies]


async def _asummary(stream: Any) -> tuple[list[Any], list[Any], list[Any]]:
    chunks = [c.model_dump() async for c in stream]
    calls = [(c.name, c.status, c.parsed) for c in stream.tool_calls]
    return chunks, calls, [a.code for a in stream.anomalies]


@pytest.mark.parametrize("decode", ["sdk", "fast"])
@pytest.mark.parametrize("wrap", sorted(WRAPS))
@pytest.mark.parametrize("body", [BODY, CRLF_BODY], ids=["lf", "crlf"])
def test_stitch_reads_any_bytes_like_read_on_both_decoders(decode: str, wrap: str, body: bytes) -> None:
    expected = _summary(ts.stitch([body], tools=TOOLS, decode=decode))  # type: ignore[arg-type]
    assert expected[0]  # the body has chunks
    for size in (1, 5, 64):
        reads = [WRAPS[wrap](body[k : k + size]) for k in range(0, len(body), size)]
        assert _summary(ts.stitch(reads, tools=TOOLS, decode=decode)) == expected  # type: ignore[arg-type]

        async def source(reads: list[Any] = reads) -> AsyncIterator[Any]:
            for r in reads:
                yield r

        stream = ts.stitch(source(), tools=TOOLS, decode=decode)  # type: ignore[arg-type]
        assert asyncio.run(_asummary(stream)) == expected


def test_a_ready_call_from_buffers_is_the_call_from_bytes() -> None:
    reads = [memoryview(BODY[k : k + 3]) for k in range(0, len(BODY), 3)]
    stream = ts.stitch(reads, tools=TOOLS, decode="fast")
    stream.until_done()
    [call] = stream.tool_calls
    assert call.status == "ready" and call.parsed == {"city": "Zürich"}


@pytest.mark.parametrize("whole", [memoryview(BODY), bytearray(BODY), BODY])
def test_one_buffer_is_not_taken_for_an_iterable_of_reads(whole: Any) -> None:
    with pytest.raises(TypeError, match=r"pass \[chunk\]"):
        ts.stitch(whole, decode="fast")
