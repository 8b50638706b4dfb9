"""Recording and replay of Responses API streams: a replay refuses what the live stream refused."""

from __future__ import annotations

import contextlib
from pathlib import Path

import openai
import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")

import toolstitch as ts
from toolstitch.testing import LocalServer, StreamScript, response_events

TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": False}]
CALLS = [("call_1", "get_weather", '{"city": "Lima"}'), ("call_2", "get_time", "{}")]


def record(
    server: LocalServer, folder: Path, script: StreamScript
) -> tuple[list[tuple[str | None, str]], Path]:
    server.enqueue(script)
    client = ts.wrap(server.client(), record=folder)
    stream = client.responses.create(model="m", input="x", tools=TOOLS, stream=True)
    with contextlib.suppress(openai.APIConnectionError):  # the cut one
        stream.until_done()
    [path] = folder.glob("*.jsonl")
    return [(c.id, c.status) for c in stream.tool_calls], path


def test_a_replay_checks_as_the_live_stream_did(server: LocalServer, tmp_path: Path) -> None:
    live, path = record(server, tmp_path, StreamScript.responses(response_events(CALLS)))
    assert live == [("call_1", "ready"), ("call_2", "invalid")]
    replayed = ts.replay(path)
    assert isinstance(replayed.accumulator, ts.ResponseAccumulator)
    assert [(c.id, c.status) for c in replayed.calls()] == live
    assert replayed.accumulator.get_final_response().status == "completed"


def test_a_cut_stream_replays_cut(server: LocalServer, tmp_path: Path) -> None:
    live, path = record(server, tmp_path, StreamScript.responses(response_events(CALLS), cut_after=12))
    assert live and all(status == "incomplete" for _, status in live)
    assert [(c.id, c.status) for c in ts.replay(path).calls()] == live


def test_a_recording_served_again_gives_the_same_calls(server: LocalServer, tmp_path: Path) -> None:
    live, path = record(server, tmp_path, StreamScript.responses(response_events(CALLS)))
    server.enqueue(StreamScript.from_recording(path))
    stream = ts.wrap(server.client()).responses.create(model="m", input="x", tools=TOOLS, stream=True)
    assert [(c.id, c.status) for c in stream.until_done().tool_calls] == live
