"""``StreamScript.from_recording``: any recording served again by the local server, round trip.

Record a stream through ``wrap(record=...)`` against the local server, serve that recording back,
record it again, and compare: the chunks must be the same, the stream must end the same way (a
completed stream completes, a dropped one drops, an in-band error is raised again), and the calls
must come out the same. This is what makes a production recording a regression test.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
import pytest

import toolstitch as ts
from tests.conftest import WEATHER_TOOLS as TOOLS
from toolstitch.cli._demo import QUESTION
from toolstitch.cli._demo import TOOLS as DEMO_TOOLS
from toolstitch.cli._demo_model import local_model
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

CALLS = [
    ("call_a", "get_weather", '{"city": "Zürich", "unit": "c\\"x"}'),
    ("call_b", "get_weather", '{"city": "東京"}'),
]
USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
MESSAGES = [{"role": "user", "content": "Weather in Zürich and Tokyo?"}]
SCRIPT = [chunk(delta={"role": "assistant", "content": "Looking "}), *tool_call_chunks(CALLS, usage=USAGE)]
IN_BAND = 'data: {"error": {"message": "overloaded", "type": "server_error", "code": "busy"}}\n\n'


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def record_once(server: LocalServer, folder: Path, tools: Any = TOOLS) -> tuple[Path, BaseException | None]:
    """One streamed request through ``wrap(record=folder)``; the recording and what was raised."""
    client = ts.wrap(server.client(), record=folder)
    raised: BaseException | None = None
    try:
        with client.chat.completions.create(model="m", messages=MESSAGES, tools=tools, stream=True) as stream:
            for _ in stream:
                pass
    except openai.APIError as exc:
        raised = exc
    files = sorted(folder.glob("*.jsonl"))
    assert len(files) == 1, files
    return files[0], raised


def round_trip(server: LocalServer, tmp_path: Path, script: StreamScript) -> tuple[Path, Path, Any, Any]:
    server.enqueue(script)
    first, first_error = record_once(server, tmp_path / "first")
    server.enqueue(StreamScript.from_recording(first))
    second, second_error = record_once(server, tmp_path / "second")
    return first, second, first_error, second_error


def chunks_of(path: Path) -> list[Any]:
    return [r["chunk"] for r in records(path) if r["type"] == "chunk"]


def footer_of(path: Path) -> dict[str, Any]:
    footer = records(path)[-1]
    assert footer["type"] == "footer"
    return footer


def facts(path: Path) -> list[tuple[Any, ...]]:
    return [(c.index, c.id, c.name, c.arguments, c.status, c.parsed) for c in ts.replay(path).tool_calls]


def test_a_completed_stream_is_served_back_chunk_for_chunk(server: LocalServer, tmp_path: Path) -> None:
    first, second, e1, e2 = round_trip(server, tmp_path, StreamScript(SCRIPT, fragment=7))
    assert e1 is None and e2 is None
    assert chunks_of(second) == chunks_of(first) and len(chunks_of(first)) == len(SCRIPT)
    assert footer_of(second)["outcome"] == footer_of(first)["outcome"] == "completed"
    assert facts(second) == facts(first)
    assert [c[4] for c in facts(first)] == ["ready", "ready"]


def test_a_dropped_stream_drops_again_its_calls_incomplete(server: LocalServer, tmp_path: Path) -> None:
    first, second, e1, e2 = round_trip(server, tmp_path, StreamScript(SCRIPT, cut_after=5))
    assert isinstance(e1, openai.APIConnectionError) and isinstance(e2, openai.APIConnectionError)
    assert chunks_of(second) == chunks_of(first) and len(chunks_of(first)) == 5
    assert footer_of(second)["error"]["type"] == footer_of(first)["error"]["type"] == "APIConnectionError"
    assert facts(second) == facts(first)
    assert {c[4] for c in facts(first)} == {"incomplete"}


def test_an_in_band_error_is_raised_again(server: LocalServer, tmp_path: Path) -> None:
    first, second, e1, e2 = round_trip(server, tmp_path, StreamScript([*SCRIPT[:4], IN_BAND], done=False))
    assert type(e1) is type(e2) is openai.APIError
    assert str(e2) == str(e1) == "overloaded"
    assert chunks_of(second) == chunks_of(first) and len(chunks_of(first)) == 4
    assert footer_of(second)["error"] == footer_of(first)["error"]


def test_a_stream_closed_early_or_without_footer_is_served_as_a_drop(tmp_path: Path) -> None:
    body = [{"type": "header", "format": "toolstitch.recording", "version": 1, "request": {}}]
    body += [{"type": "chunk", "offset_ms": 10.0 * n, "chunk": c} for n, c in enumerate(SCRIPT[:3])]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in body) + "\n", encoding="utf-8")
    script = StreamScript.from_recording(path)
    assert script.cut_after == 3 and list(script.items()) == SCRIPT[:3]
    closed = [*body, {"type": "footer", "offset_ms": 40.0, "outcome": "closed", "chunks": 3, "error": None}]
    path.write_text("\n".join(json.dumps(r) for r in closed) + "\n", encoding="utf-8")
    assert StreamScript.from_recording(path).cut_after == 3


def test_timing_waits_as_the_recording_did(tmp_path: Path) -> None:
    body = [{"type": "header", "format": "toolstitch.recording", "version": 1, "request": {}}]
    body += [
        {"type": "chunk", "offset_ms": at, "chunk": c}
        for at, c in zip([100.0, 150.0, 150.0], SCRIPT, strict=False)
    ]
    body.append({"type": "footer", "offset_ms": 160.0, "outcome": "completed", "chunks": 3, "error": None})
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in body) + "\n", encoding="utf-8")
    assert StreamScript.from_recording(path).delays is None
    assert StreamScript.from_recording(path, timing=True).delays == pytest.approx([0.1, 0.05, 0.0])
    assert StreamScript.from_recording(path, done=False).done is False  # keywords override


def test_bare_chunk_lines_are_a_completed_stream(tmp_path: Path) -> None:
    path = tmp_path / "chunks.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in SCRIPT) + "\n", encoding="utf-8")
    script = StreamScript.from_recording(path)
    assert list(script.items()) == SCRIPT and script.done and script.cut_after is None


@pytest.mark.parametrize(
    "text", ["not json\n", "[1, 2]\n", '{"type": "surprise"}\n', '{"type": "chunk", "chunk": 3}\n']
)
def test_a_file_that_is_no_recording_is_refused_with_a_line_number(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:1"):
        StreamScript.from_recording(path)


def test_the_demo_conversation_round_trips_over_the_async_client(tmp_path: Path) -> None:
    """Both steps of the demo's scripted model (non-ASCII split mid-character, interleaved calls,
    usage-only chunks) survive record → serve → record with the async client."""

    async def record(server: LocalServer, folder: Path, messages: list[Any]) -> Path:
        client = ts.wrap(server.async_client(), record=folder)
        stream = await client.chat.completions.create(
            model="m", messages=messages, tools=DEMO_TOOLS, stream=True
        )
        async with stream:
            async for _ in stream:
                pass
        return max(folder.glob("*.jsonl"))

    answer_messages = [
        {"role": "user", "content": QUESTION},
        {"role": "tool", "tool_call_id": "x", "content": '{"city": "Zürich", "temperature": 14}'},
    ]
    for n, messages in enumerate([[{"role": "user", "content": QUESTION}], answer_messages]):
        with LocalServer(handler=local_model(0.0)) as live:
            first = asyncio.run(record(live, tmp_path / f"live{n}", messages))
        with LocalServer() as served:
            served.enqueue(StreamScript.from_recording(first, fragment=3))
            second = asyncio.run(record(served, tmp_path / f"served{n}", messages))
        assert chunks_of(second) == chunks_of(first) and chunks_of(first)
        assert facts(second) == facts(first)
