"""Every real provider stream of the corpus assembles as its cassette's ``expected`` says.

The corpus is 40 vcrpy cassettes in ``cassettes/providers`` (:mod:`tests.corpus`). Each is replayed by
vcrpy through the real ``openai`` client (so the SDK's own HTTP client, SSE decoding and chunk types
are part of the test), through ``ts.wrap``, with the request's ``tools`` (as recorded, or the names
the stream calls when the source kept no request). Compared per choice: the content, every
``finish_reason`` in order, and the tool calls (id, or a synthesized non-empty id unique within the
message when the provider sent none; name; parsed arguments; status ``ready``). A stream that ends in
an in-band error must raise from the iteration and leave no ``ready`` call.

Each stream runs three times: whole, re-cut into 7-byte pieces on the way to the SDK's decoder
(inside UTF-8 characters, SSE lines and JSON tokens alike), which must not change anything, and
through the async client in 11-byte pieces. The cassettes are in the repository: nothing here skips.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

import toolstitch as ts
from tests import corpus
from tests.corpus import CORPUS, ProviderStream

PARAMS = [pytest.param(s, id=s.name) for s in CORPUS]


def test_the_corpus_is_there() -> None:
    assert len(CORPUS) == 40, "cassettes/providers must hold the 40 provider streams"


class Run:
    """One provider stream, replayed through the wrapped client."""

    def __init__(self, stream: Any, chunks: list[Any], error: BaseException | None) -> None:
        self.stream = stream
        self.chunks = chunks
        self.error = error


def _run(stream: ProviderStream, recut: int | None) -> Run:
    chunks: list[Any] = []
    error: BaseException | None = None
    with corpus.replay(stream), corpus.client(recut) as raw:
        wrapped = ts.wrap(raw).chat.completions.create(stream=True, **stream.create_kwargs())
        try:
            with wrapped:
                for chunk in wrapped:
                    chunks.append(chunk)
        except openai.APIError as exc:
            error = exc
    return Run(wrapped, chunks, error)


def _check(run: Run, expected: dict[str, Any], tools_known: bool) -> None:
    stream = run.stream
    acc: ts.Accumulator = stream.accumulator
    assert acc.ended
    # Pass-through: the user got the SDK's own chunk objects.
    assert run.chunks
    assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in run.chunks)

    if expected["error"]:
        assert run.error is not None, "an in-band error event must raise from the iteration"
        assert acc.error is run.error
        assert not any(call.ready for call in acc.calls())
        with pytest.raises(ts.IncompleteStreamError) as failed:
            stream.get_final_completion()
        partial = failed.value.partial
        for want in expected["choices"]:
            # What arrived before the error is kept, for diagnosis; nothing of it is executable.
            assert (partial.choices[want["index"]].message.content or "") == want["content"]
            assert acc.finish_reasons.get(want["index"], []) == want["finish_reasons"]
        return

    assert run.error is None
    completion = stream.get_final_completion()
    assert isinstance(completion, openai.types.chat.ChatCompletion)
    assert len(completion.choices) == len(expected["choices"])
    for want in expected["choices"]:
        index = want["index"]
        choice = completion.choices[index]
        assert choice.index == index
        assert (choice.message.content or "") == want["content"]
        assert acc.finish_reasons.get(index, []) == want["finish_reasons"]

        calls = stream.calls(index)
        assert len(calls) == len(want["tool_calls"])
        message_calls = choice.message.tool_calls or []
        assert len(message_calls) == len(calls)
        ids = [call.id for call in calls]
        assert all(isinstance(i, str) and i for i in ids), "every call needs a non-empty id"
        assert len(set(ids)) == len(ids), "ids must be unique within the message"
        for call, sent, want_call in zip(calls, message_calls, want["tool_calls"], strict=True):
            assert call.status == "ready", (call, call.error)
            if want_call["id"] is not None:
                assert call.id == want_call["id"]
            else:
                codes = {a.code for a in call.anomalies}
                assert "id_synthesized" in codes
            assert call.name == want_call["name"]
            assert call.parsed == want_call["arguments"]
            # The finished message says the same as the calls.
            assert sent.id == call.id
            assert sent.function.name == want_call["name"]
            assert json.loads(sent.function.arguments) == want_call["arguments"]
        if tools_known:
            assert all(call.error is None for call in calls)


@pytest.mark.parametrize("stream", PARAMS)
def test_stream_assembles_as_expected(stream: ProviderStream) -> None:
    _check(_run(stream, recut=None), stream.expected, tools_known=stream.tools is not None)


@pytest.mark.parametrize("stream", PARAMS)
def test_stream_recut_into_7_byte_pieces_assembles_the_same(stream: ProviderStream) -> None:
    whole = _run(stream, recut=None)
    recut = _run(stream, recut=7)
    _check(recut, stream.expected, tools_known=stream.tools is not None)
    assert len(recut.chunks) == len(whole.chunks)
    assert [c.model_dump() for c in recut.chunks] == [c.model_dump() for c in whole.chunks]
    assert [(a.code, a.choice, a.call_index) for a in recut.stream.anomalies] == [
        (a.code, a.choice, a.call_index) for a in whole.stream.anomalies
    ]


class _Consumed:
    """A finished async stream seen through the sync checks (its input is over, nothing to await)."""

    def __init__(self, stream: ts.AsyncStitchedStream) -> None:
        self.accumulator = stream.accumulator
        self.calls = stream.calls
        self.anomalies = stream.anomalies
        self.get_final_completion = stream.accumulator.get_final_completion


@pytest.mark.parametrize("stream", PARAMS)
async def test_stream_assembles_through_the_async_client(stream: ProviderStream) -> None:
    chunks: list[Any] = []
    error: BaseException | None = None
    with corpus.replay(stream):
        async with corpus.async_client(recut=11) as raw:
            wrapped = await ts.wrap(raw).chat.completions.create(stream=True, **stream.create_kwargs())
            try:
                async with wrapped:
                    async for chunk in wrapped:
                        chunks.append(chunk)
            except openai.APIError as exc:
                error = exc
    _check(Run(_Consumed(wrapped), chunks, error), stream.expected, tools_known=stream.tools is not None)
