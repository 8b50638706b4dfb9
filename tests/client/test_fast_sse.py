"""toolstitch's SSE decoder against the installed SDK's ``SSEDecoder``: same events, same errors.

Hypothesis writes bodies from the pieces that matter (every field name with and without its space,
the three line ends, comments, NUL in an id, ``retry`` values ``int()`` reads oddly, UTF-8 that is
invalid or cut, separators that ``str.splitlines`` would split on) and cuts them into reads at
random places; both decoders, sync and async, must produce identical event lists (instances of the
SDK's ``ServerSentEvent``, with the same fields and the same ``json()``, value or error) and then
the same exception (type and message), if any.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import ServerSentEvent
from openai._streaming import SSEDecoder as SDKDecoder

from tests.conftest import examples
from toolstitch.client import _sse
from toolstitch.client._sse import SAMPLE_BODIES, SSEDecoder

FIELDS = [
    b"data: ",
    b"data:",
    b"data",
    b"event: ",
    b"event:",
    b"id: ",
    b"id:",
    b"retry: ",
    b":",
    b": ",
    b"foo: ",
]
VALUES = [
    b"", b"x", b"[DONE]", b'{"a": 1}', b"12", b" 7", b"+3", b"1_0", b"\xd9\xa1", b"a\x00b", b"\xc3\xa9",
    b"\xff", b"\xe2\x82", b" ", b"\x0b\x0c\x1c\x1d\x1e\x85", b"\xe2\x80\xa8", b"error", b"thread.run",
]  # fmt: skip
ENDS = [b"\n", b"\r", b"\r\n", b"\n\n", b"\r\n\r\n", b"\r\r", b""]

lines = st.tuples(st.sampled_from(FIELDS), st.sampled_from(VALUES), st.sampled_from(ENDS)).map(b"".join)
bodies = st.lists(st.one_of(lines, lines, lines, st.binary(max_size=6)), max_size=25).map(b"".join)


def _cut(body: bytes, points: list[int]) -> list[bytes]:
    bounds = sorted({0, len(body), *(p % (len(body) + 1) for p in points)})
    return [body[a:b] for a, b in itertools.pairwise(bounds)]


def _parsed(sse: Any) -> Any:
    try:
        return ("value", repr(sse.json()))
    except Exception as exc:
        return (type(exc), str(exc))


def _seen(sse: Any) -> tuple[Any, ...]:
    return (isinstance(sse, ServerSentEvent), sse.event, sse.data, sse.id, sse.retry, repr(sse), _parsed(sse))


def _run(decode: Callable[[Iterator[bytes]], Iterable[Any]], reads: list[bytes]) -> list[Any]:
    out: list[Any] = []
    try:
        for sse in decode(iter(reads)):
            out.append(_seen(sse))
    except Exception as exc:
        out.append((type(exc), str(exc)))
    return out


def _arun(decoder: Any, reads: list[bytes]) -> list[Any]:
    async def source() -> AsyncIterator[bytes]:
        for r in reads:
            yield r

    async def main() -> list[Any]:
        out: list[Any] = []
        try:
            async for sse in decoder.aiter_bytes(source()):
                out.append(_seen(sse))
        except Exception as exc:
            out.append((type(exc), str(exc)))
        return out

    return asyncio.run(main())


def _same_on(body: bytes, reads: list[bytes]) -> None:
    assert b"".join(reads) == body
    expected = _run(SDKDecoder().iter_bytes, reads)
    assert _run(SSEDecoder().iter_bytes, reads) == expected
    assert _arun(SSEDecoder(), reads) == _arun(SDKDecoder(), reads) == expected


@settings(max_examples=examples(1200))
@given(body=bodies, points=st.lists(st.integers(0, 10_000), max_size=12))
def test_decodes_like_the_sdk_however_the_body_is_cut(body: bytes, points: list[int]) -> None:
    _same_on(body, _cut(body, points))


@settings(max_examples=examples(200))
@given(body=st.binary(max_size=200), points=st.lists(st.integers(0, 10_000), max_size=12))
def test_decodes_arbitrary_bytes_like_the_sdk(body: bytes, points: list[int]) -> None:
    _same_on(body, _cut(body, points))


def test_sample_bodies_decode_like_the_sdk_at_every_read_size() -> None:
    for body in SAMPLE_BODIES:
        for size in range(1, len(body) + 1):
            _same_on(body, [body[k : k + size] for k in range(0, len(body), size)])


def test_every_rule_is_in_the_sample_bodies() -> None:
    """The self-check's bodies cover what the module's rules list (a release that differs there
    falls back to its own decoder)."""
    joined = b"".join(SAMPLE_BODIES)
    for piece in [
        b"\r\n",
        b"\r\r",
        b"\n\n",
        b"data:{",
        b"event: ",
        b"id: ",
        b"\x00",
        b"retry: ",
        b"\xff",
        b":",
    ]:
        assert piece in joined
    assert any(not body.endswith(b"\n") for body in SAMPLE_BODIES)  # a body cut mid-event


def test_a_crlf_split_across_reads_is_one_line_end() -> None:
    reads = [b"data: a\r", b"\n\r", b"\ndata: b\r", b"\r"]
    events = [(e.event, e.data) for e in SSEDecoder().iter_bytes(iter(reads))]
    assert events == [(None, "a"), (None, "b")]
    assert _run(SSEDecoder().iter_bytes, reads) == _run(SDKDecoder().iter_bytes, reads)


def test_events_before_invalid_utf8_are_yielded_then_the_sdk_error_is_raised() -> None:
    reads = [b"data: 1\n\ndata: 2\n\n: \xff\n\ndata: 3\n\n"]
    out = _run(SSEDecoder().iter_bytes, reads)
    assert [o[2] for o in out[:2]] == ["1", "2"]
    assert out[2][0] is UnicodeDecodeError
    assert out == _run(SDKDecoder().iter_bytes, reads)


def test_module_documents_its_rules() -> None:
    assert _sse.__doc__ is not None and "SSEDecoder" in _sse.__doc__


PENDING = [
    b"",
    b"id: 7\n\n",
    b"data: a\n",
    b"event: e\n",
    b"retry: 5\n",
    b"data: a\r",
    b"da",
    b"data: \xe2\x82",
]


@settings(max_examples=examples(600))
@given(
    before=st.sampled_from(PENDING),
    event=st.none() | st.sampled_from(VALUES),
    data=st.sampled_from(VALUES),
    after=st.sampled_from([b"", b"data: z\n\n", b"\n"]),
)
def test_a_read_that_is_one_whole_event_decodes_like_the_sdk(
    before: bytes, event: bytes | None, data: bytes, after: bytes
) -> None:
    """The read servers write most (``event:``, ``data:``, empty line: one read, one event), which
    the decoder takes whole, after whatever state earlier reads left pending."""
    whole = (b"" if event is None else b"event: " + event + b"\n") + b"data: " + data + b"\n\n"
    reads = [r for r in (before, whole, after) if r]
    _same_on(b"".join(reads), reads)


def test_the_common_read_is_taken_whole() -> None:
    decoder = SSEDecoder()
    event = decoder._whole(b'event: response.x\ndata: {"a": 1}\n\n')
    assert event is not None and (event.event, event.data) == ("response.x", '{"a": 1}')
    assert decoder._whole(b"data: a\ndata: b\n\n") is None  # two data lines: the rules join them
