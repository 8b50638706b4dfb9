"""Recording: ``wrap(client, record=...)`` and ``stream.record(...)``, with the real SDK over HTTP.

A recording is evidence: it must hold the chunks exactly as received and enough context to replay
them into the same calls, it must never hold a credential, and writing it must never disturb the
stream it observes.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import openai
import pytest

import toolstitch as ts
from tests import corpus
from tests.conftest import WEATHER_TOOLS as TOOLS
from tests.conftest import offered
from tests.corpus import CORPUS, ProviderStream
from toolstitch.errors import RecordingWarning
from toolstitch.recording import recording_path
from toolstitch.recording._replay import replay
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

CALLS = [
    ("call_a", "get_weather", '{"city": "Zürich", "unit": "c\\"x"}'),
    ("call_b", "get_weather", '{"city": "東京"}'),
]
USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
SCRIPT = [chunk(delta={"role": "assistant", "content": "Looking "}), *tool_call_chunks(CALLS, usage=USAGE)]
MESSAGES = [{"role": "user", "content": "Weather in Zürich and Tokyo?"}]
SRC = Path(__file__).resolve().parents[2] / "src"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def only_file(folder: Path) -> Path:
    files = sorted(folder.glob("*.jsonl"))
    assert len(files) == 1, files
    return files[0]


def facts(calls: list[ts.ToolCall]) -> list[tuple[Any, ...]]:
    """What must be the same after a replay."""
    return [(c.choice, c.index, c.id, c.name, c.arguments, c.status, c.parsed) for c in calls]


def consume(stream: Any) -> None:
    with stream:
        for _ in stream:
            pass


def test_wrap_record_writes_header_chunks_as_received_and_footer(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(StreamScript(SCRIPT, fragment=5))
    client = ts.wrap(server.client(), record=tmp_path / "rec")
    stream = client.chat.completions.create(
        model="test-model", messages=MESSAGES, tools=TOOLS, temperature=0.2, stream=True
    )
    consume(stream)

    records = lines(only_file(tmp_path / "rec"))
    header, chunks, footer = records[0], records[1:-1], records[-1]
    assert header["type"] == "header" and header["format"] == "toolstitch.recording"
    assert header["toolstitch"] == ts.__version__
    assert header["openai"] == openai.__version__
    assert header["request"]["model"] == "test-model"
    assert header["request"]["messages"] == MESSAGES
    assert header["request"]["tools"] == TOOLS
    assert header["request"]["temperature"] == 0.2
    assert [r["chunk"] for r in chunks] == SCRIPT  # exactly the JSON the server sent
    offsets = [r["offset_ms"] for r in chunks]
    assert offsets == sorted(offsets) and offsets[0] >= 0
    assert footer == {
        "type": "footer",
        "offset_ms": footer["offset_ms"],
        "outcome": "completed",
        "chunks": len(SCRIPT),
        "error": None,
    }
    assert footer["offset_ms"] >= offsets[-1]
    assert stream.recorder.error is None


def test_one_file_per_stream(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(StreamScript(SCRIPT), StreamScript(SCRIPT))
    client = ts.wrap(server.client(), record=tmp_path)
    first = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    second = client.with_options(timeout=5).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    consume(first)
    consume(second)
    assert first.recorder.path != second.recorder.path
    assert sorted(tmp_path.glob("*.jsonl")) == sorted([first.recorder.path, second.recorder.path])


def test_recording_is_off_by_default(
    server: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    server.enqueue(StreamScript(SCRIPT))
    stream = ts.wrap(server.client()).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    consume(stream)
    assert stream.recorder is None
    assert list(tmp_path.iterdir()) == []


def test_no_secret_reaches_the_file(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(StreamScript(SCRIPT))
    client = ts.wrap(server.client(api_key="sk-live-SECRET1"), record=tmp_path)
    stream = client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        extra_headers={"Authorization": "Bearer sk-live-SECRET2", "X-Trace": "trace-SECRET3"},
        extra_query={"api-key": "SECRET4"},
        extra_body={
            "api_key": "SECRET5",
            "max_tokens": 50,
            "metadata": {
                "openai_api_key": "SECRET6",
                "refresh_token": "SECRET7",
                "private_key": "SECRET8",
                "db_credentials": "SECRET9",
            },
        },
    )
    consume(stream)
    # The request really carried them; the recording does not.
    assert server.request_headers[0]["authorization"] == "Bearer sk-live-SECRET2"
    text = only_file(tmp_path).read_text(encoding="utf-8")
    assert "SECRET" not in text
    request = lines(only_file(tmp_path))[0]["request"]
    assert set(request["extra_headers"]) == {"Authorization", "X-Trace"}
    assert request["extra_body"]["max_tokens"] == 50  # a token *count* is not a credential


@pytest.mark.parametrize("fragment", [None, 3])
def test_replay_of_a_recording_reproduces_the_calls(
    server: LocalServer, tmp_path: Path, fragment: int | None
) -> None:
    server.enqueue(StreamScript(SCRIPT, fragment=fragment))
    stream = ts.wrap(server.client(), record=tmp_path).chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, stream=True
    )
    consume(stream)
    original = stream.get_final_completion()

    replayed = replay(stream.recorder.path)
    assert facts(replayed.tool_calls) == facts(stream.tool_calls)
    assert all(c.status == "ready" for c in replayed.tool_calls)
    assert replayed.get_final_completion() == original
    assert replayed.outcome == "completed" and replayed.error is None


def test_replay_checks_against_the_recorded_tools(server: LocalServer, tmp_path: Path) -> None:
    """The recorded request offered only ``get_weather``; a call to anything else stays invalid."""
    script = tool_call_chunks([("call_x", "delete_everything", "{}")])
    server.enqueue(StreamScript(script))
    stream = ts.wrap(server.client(), record=tmp_path).chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, stream=True
    )
    consume(stream)
    assert stream.tool_calls[0].status == "invalid"
    assert facts(replay(stream.recorder.path).tool_calls) == facts(stream.tool_calls)


@pytest.mark.parametrize("provider_stream", CORPUS, ids=lambda s: s.name)
def test_recorded_provider_streams_replay_into_the_same_calls(
    provider_stream: ProviderStream, tmp_path: Path
) -> None:
    # The provider's body, replayed by vcrpy to the real client in 7-byte pieces, recorded by wrap.
    with corpus.replay(provider_stream), corpus.client(recut=7) as raw:
        stream = ts.wrap(raw, record=tmp_path).chat.completions.create(
            model="m", messages=MESSAGES, stream=True
        )
        failure: BaseException | None = None
        try:
            consume(stream)
        except openai.APIError as exc:
            failure = exc
    replayed = replay(stream.recorder.path)
    assert facts(replayed.calls()) == facts(stream.calls())
    assert replayed.accumulator.finish_reasons == stream.accumulator.finish_reasons
    assert [a.code for a in replayed.anomalies] == [a.code for a in stream.anomalies]
    if failure is None:
        assert replayed.outcome == "completed"
        assert replayed.get_final_completion() == stream.get_final_completion()
    else:
        assert replayed.outcome == "error"
        assert replayed.error is not None and replayed.error.type_name == type(failure).__name__
        assert not any(c.ready for c in replayed.calls())


def test_a_dropped_connection_is_recorded_and_replays_as_incomplete(
    server: LocalServer, tmp_path: Path
) -> None:
    script = tool_call_chunks(CALLS, pieces=4)
    server.enqueue(StreamScript(script, cut_after=6))
    stream = ts.wrap(server.client(), record=tmp_path).chat.completions.create(
        model="m", messages=MESSAGES, stream=True
    )
    with pytest.raises(openai.APIConnectionError):
        consume(stream)
    footer = lines(stream.recorder.path)[-1]
    assert footer["outcome"] == "error"
    assert footer["error"]["type"] == "APIConnectionError"
    assert footer["chunks"] == 6

    replayed = replay(stream.recorder.path)
    assert facts(replayed.tool_calls) == facts(stream.tool_calls)
    assert {c.status for c in replayed.tool_calls} == {"incomplete"}
    with pytest.raises(ts.IncompleteStreamError):
        replayed.get_final_completion()


def test_closing_early_is_recorded_as_closed(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(StreamScript(SCRIPT))
    stream = ts.wrap(server.client(), record=tmp_path).chat.completions.create(
        model="m", messages=MESSAGES, stream=True
    )
    with stream:
        for n, _ in enumerate(stream):
            if n == 2:
                break
    footer = lines(stream.recorder.path)[-1]
    assert footer["outcome"] == "closed" and footer["chunks"] == 3 and footer["error"] is None
    assert replay(stream.recorder.path).outcome == "closed"


def test_stream_record_before_iterating(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(StreamScript(SCRIPT))
    stream = ts.wrap(server.client()).chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, stream=True
    )
    recorder = stream.record(tmp_path / "one.jsonl")
    with pytest.raises(RuntimeError, match="already"):
        stream.record(tmp_path / "two.jsonl")
    consume(stream)
    assert recorder.path == tmp_path / "one.jsonl" and recorder.chunks == len(SCRIPT)
    assert lines(recorder.path)[0]["request"]["tools"] == TOOLS
    assert facts(replay(recorder.path).tool_calls) == facts(stream.tool_calls)


def test_stream_record_after_iterating_is_refused(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(StreamScript(SCRIPT))
    stream = ts.wrap(server.client()).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    with stream:
        next(iter(stream))
        with pytest.raises(RuntimeError, match="before"):
            stream.record(tmp_path / "late.jsonl")
    assert not (tmp_path / "late.jsonl").exists()


def test_record_to_an_open_text_file(server: LocalServer) -> None:
    server.enqueue(StreamScript(SCRIPT))
    stream = ts.wrap(server.client()).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    buffer = io.StringIO()
    stream.record(buffer)
    consume(stream)
    assert facts(replay(io.StringIO(buffer.getvalue())).tool_calls) == facts(stream.tool_calls)


async def test_async_streams_are_recorded_too(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(StreamScript(SCRIPT, fragment=4))
    client = ts.wrap(server.async_client(), record=tmp_path)
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, stream=True)
    async with stream:
        async for _ in stream:
            pass
    assert [r["chunk"] for r in lines(stream.recorder.path)[1:-1]] == SCRIPT
    assert facts(replay(stream.recorder.path).tool_calls) == facts(stream.tool_calls)


async def test_async_close_before_iterating_is_recorded_as_closed(
    server: LocalServer, tmp_path: Path
) -> None:
    server.enqueue(StreamScript(SCRIPT))
    client = ts.wrap(server.async_client(), record=tmp_path)
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    await stream.close()
    footer = lines(stream.recorder.path)[-1]
    assert (footer["outcome"], footer["chunks"]) == ("closed", 0)


# -------------------------------------------------------------------------- failures never leak


def test_an_unwritable_destination_warns_once_and_the_stream_flows(
    server: LocalServer, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    server.enqueue(StreamScript(SCRIPT))
    client = ts.wrap(server.client(), record=blocker / "recordings")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stream = client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, stream=True)
        consume(stream)
    assert [w.category for w in caught] == [RecordingWarning]
    assert isinstance(stream.recorder.error, OSError)
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


class FailingFile(io.StringIO):
    """A file whose disk fills up after ``room`` writes."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, text: str) -> int:
        if self.room <= 0:
            raise OSError(28, "No space left on device")
        self.room -= 1
        return super().write(text)


def test_a_disk_that_fills_mid_stream_is_reported_once(server: LocalServer) -> None:
    server.enqueue(StreamScript(SCRIPT))
    stream = ts.wrap(server.client()).chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, stream=True
    )
    target = FailingFile(room=3)  # header and two chunks fit
    recorder = stream.record(target)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chunks = list(stream)
    assert len(chunks) == len(SCRIPT)
    assert len(caught) == 1 and issubclass(caught[0].category, RecordingWarning)
    assert "No space left" in str(caught[0].message)
    assert isinstance(recorder.error, OSError)
    assert recorder.chunks == 2
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


def test_a_disk_failure_never_raises_even_with_warnings_as_errors(server: LocalServer) -> None:
    server.enqueue(StreamScript(SCRIPT))
    stream = ts.wrap(server.client()).chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, stream=True
    )
    recorder = stream.record(FailingFile(room=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as under python -W error or pytest filterwarnings=error
        chunks = list(stream)
    assert len(chunks) == len(SCRIPT)
    assert isinstance(recorder.error, OSError)
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


def test_a_lone_surrogate_split_by_the_provider_survives_the_round_trip(
    server: LocalServer, tmp_path: Path
) -> None:
    """A provider may cut an escaped emoji pair across chunks: each chunk then carries half of it."""
    head = json.dumps(chunk(delta={"role": "assistant", "content": "a"}))
    raw = [
        f"data: {head}\n\n",
        'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        '[{"index":0,"delta":{"content":"\\ud83d"},"finish_reason":null}]}\n\n',
        'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        '[{"index":0,"delta":{"content":"\\ude00!"},"finish_reason":"stop"}]}\n\n',
    ]
    server.enqueue(StreamScript(raw))
    stream = ts.wrap(server.client(), record=tmp_path).chat.completions.create(
        model="m", messages=MESSAGES, stream=True
    )
    consume(stream)
    assert stream.recorder.error is None
    original = stream.get_final_completion().choices[0].message.content
    assert replay(stream.recorder.path).get_final_completion().choices[0].message.content == original


# ------------------------------------------------------------------------------------ redaction


def test_redaction_masks_argument_and_content_text_but_keeps_the_shape(
    server: LocalServer, tmp_path: Path
) -> None:
    # A number no timestamp in the file can contain (offset_ms once read 12.52 beside a 12.5).
    numeric = [("call_n", "get_weather", '{"city": "Zürich", "unit": "c", "days": 98765.4321, "ok": true}')]
    script = [
        chunk(delta={"role": "assistant", "content": "Secret plan"}),
        *tool_call_chunks(numeric, pieces=7),
    ]
    server.enqueue(StreamScript(script))
    client = ts.wrap(server.client(), record=tmp_path, redact=True)
    stream = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "my address is Zürich"}],
        tools=offered(["get_weather"]),
        stream=True,
    )
    consume(stream)
    text = stream.recorder.path.read_text(encoding="utf-8")
    assert "Zürich" not in text and "Secret" not in text and "98765.4321" not in text
    assert lines(stream.recorder.path)[0]["redacted"] == ["arguments", "content"]

    replayed = replay(stream.recorder.path)
    original, masked = stream.tool_calls[0], replayed.tool_calls[0]
    assert (masked.id, masked.name, masked.status) == (original.id, original.name, "ready")
    assert len(masked.arguments) == len(original.arguments)
    assert masked.parsed == {"city": "xxxxxx", "unit": "x", "days": 11111.1111, "ok": True}
    assert masked.metrics.fragments == original.metrics.fragments
    assert replayed.get_final_completion().choices[0].message.content == "xxxxxx xxxx"


def test_redacting_arguments_only_keeps_the_content(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(StreamScript(SCRIPT))
    client = ts.wrap(server.client(), record=tmp_path, redact="arguments")
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    consume(stream)
    replayed = replay(stream.recorder.path)
    assert replayed.get_final_completion().choices[0].message.content == "Looking "
    assert [c.parsed for c in replayed.tool_calls] == [{"city": "xxxxxx", "unit": "xxxx"}, {"city": "xx"}]


def test_an_unknown_redaction_is_refused_at_wrap_time(server: LocalServer) -> None:
    with pytest.raises(ValueError, match="redact"):
        ts.wrap(server.client(), record="x", redact="passwords")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- file names sort by start


def test_recordings_sort_in_the_order_they_were_started(tmp_path: Path) -> None:
    """``wrap(record=dir)``: ``sorted(os.listdir(dir))`` is the order the streams were started, for
    many streams within one second (the stamp had whole seconds, the rest was random)."""
    script = [chunk(delta={"content": "ok"}), chunk(delta={}, finish_reason="stop")]
    with LocalServer(handler=lambda body: StreamScript(script)) as server:
        client = ts.wrap(server.client(), record=tmp_path)
        for n in range(40):
            messages = [{"role": "user", "content": str(n)}]
            with client.chat.completions.create(model="m", messages=messages, stream=True) as stream:
                for _ in stream:
                    pass
    names = sorted(os.listdir(tmp_path))
    said = [lines(tmp_path / name)[0]["request"]["messages"][0]["content"] for name in names]
    assert said == [str(n) for n in range(40)]
    assert all(re.fullmatch(r"\d{8}T\d{6}\.\d{9}-[0-9a-f]{10}\.jsonl", name) for name in names)


def test_recording_names_sort_in_start_order_across_threads_and_processes(tmp_path: Path) -> None:
    """Names taken by many threads at once sort in the order they were taken (and are unique); a
    name another process takes in between sorts between."""
    taken: list[str] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(200):
            with lock:  # the order names were taken in: the order they must sort in
                taken.append(recording_path(tmp_path).name)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == taken and len(set(taken)) == len(taken) == 1600

    code = (
        "import sys; from toolstitch.recording import recording_path; print(recording_path(sys.argv[1]).name)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    before = recording_path(tmp_path).name
    other = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()
    after = recording_path(tmp_path).name
    assert sorted([after, other, before]) == [before, other, after]
