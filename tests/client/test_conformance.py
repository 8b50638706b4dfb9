"""Every real provider stream in ``../shared/transcripts`` assembles as its ``.expected.json`` says.

Each recorded body is served unchanged by :class:`toolstitch.testing.LocalServer` and read by the real
``openai`` client over HTTP (so the SDK's own SSE decoding is part of the test), through ``ts.wrap``,
with the request's ``tools`` when the transcript recorded them. Compared per choice: the content,
every ``finish_reason`` in order, and the tool calls (id, or a synthesized non-empty id unique within
the message when the provider sent none; name; parsed arguments; status ``ready``). A stream that
ends in an in-band error must raise from the iteration and leave no ``ready`` call.

Each transcript runs twice: as recorded, and re-cut into 7-byte writes (inside UTF-8 characters, SSE
lines and JSON tokens alike), which must not change anything.

The corpus is third-party data and is never copied into the repository: without the folder these
tests skip.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import toolstitch as ts
from tests.conftest import TRANSCRIPTS, offered
from toolstitch.testing import LocalServer, StreamScript

FILES = sorted(TRANSCRIPTS.glob("*/*.sse")) if TRANSCRIPTS.is_dir() else []
PARAMS = [pytest.param(p, id=f"{p.parent.name}/{p.stem}") for p in FILES] or [
    pytest.param(None, marks=pytest.mark.skip(reason=f"no transcripts at {TRANSCRIPTS}"))
]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer() as srv:
        yield srv


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name[: -len(".sse")] + suffix)


def _request(path: Path) -> dict[str, Any]:
    """The recorded request's model, messages and tools (or a minimal request offering the tools the
    transcript's calls name)."""
    request_path = _sibling(path, ".request.json")
    body: dict[str, Any] = {}
    if request_path.exists():
        body = json.loads(request_path.read_text(encoding="utf-8"))
    out: dict[str, Any] = {
        "model": body.get("model") or "test-model",
        "messages": body.get("messages") or [{"role": "user", "content": "hi"}],
    }
    if body.get("tools"):
        out["tools"] = body["tools"]
    else:
        # The transcript kept no request: offer the tools its calls name, without schemas (a request
        # offering no tool refuses every call; these tests are about assembling them).
        expected = json.loads(_sibling(path, ".expected.json").read_text(encoding="utf-8"))
        names = {c["name"] for choice in expected["choices"] for c in choice["tool_calls"]}
        if names:
            out["tools"] = offered(names)
    return out


class Run:
    """One transcript streamed through the wrapped client."""

    def __init__(self, stream: Any, chunks: list[Any], error: BaseException | None) -> None:
        self.stream = stream
        self.chunks = chunks
        self.error = error


def _run(server: LocalServer, path: Path, fragment: int | None) -> Run:
    server.enqueue(StreamScript.from_sse(path, fragment=fragment))
    chunks: list[Any] = []
    error: BaseException | None = None
    with server.client() as raw:
        client = ts.wrap(raw)
        stream = client.chat.completions.create(stream=True, **_request(path))
        try:
            with stream:
                for chunk in stream:
                    chunks.append(chunk)
        except openai.APIError as exc:
            error = exc
    return Run(stream, chunks, error)


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


@pytest.mark.parametrize("path", PARAMS)
def test_transcript_assembles_as_expected(server: LocalServer, path: Path) -> None:
    expected = json.loads(_sibling(path, ".expected.json").read_text(encoding="utf-8"))
    run = _run(server, path, fragment=None)
    _check(run, expected, tools_known="tools" in _request(path))


@pytest.mark.parametrize("path", PARAMS)
def test_transcript_recut_into_7_byte_writes_assembles_the_same(server: LocalServer, path: Path) -> None:
    expected = json.loads(_sibling(path, ".expected.json").read_text(encoding="utf-8"))
    whole = _run(server, path, fragment=None)
    recut = _run(server, path, fragment=7)
    _check(recut, expected, tools_known="tools" in _request(path))
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


@pytest.mark.parametrize("path", PARAMS)
async def test_transcript_assembles_through_the_async_client(server: LocalServer, path: Path) -> None:
    expected = json.loads(_sibling(path, ".expected.json").read_text(encoding="utf-8"))
    server.enqueue(StreamScript.from_sse(path, fragment=11))
    chunks: list[Any] = []
    error: BaseException | None = None
    async with server.async_client() as raw:
        stream = await ts.wrap(raw).chat.completions.create(stream=True, **_request(path))
        try:
            async with stream:
                async for chunk in stream:
                    chunks.append(chunk)
        except openai.APIError as exc:
            error = exc
    _check(Run(_Consumed(stream), chunks, error), expected, tools_known="tools" in _request(path))
