"""``replay``: JSONL recordings and raw ``.sse`` bodies, fed again into an accumulator.

The claims: a replay gives the calls the original stream gave (for raw provider bodies, the
corpus cassettes' expected calls, and those the real SDK gives over HTTP); timed recordings keep their
timing, in the metrics and in the timeline; damaged input fails with one clear error.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import toolstitch as ts
import toolstitch.recording._replay as replay_module
from tests.conftest import offered
from tests.corpus import CORPUS, ProviderStream
from toolstitch.errors import RecordedError, RecordingFormatError
from toolstitch.recording import replay
from toolstitch.recording._recorder import FORMAT
from toolstitch.recording._report_html import report_html
from toolstitch.recording._report_text import display_width, render_latency, render_timeline
from toolstitch.testing import LocalServer, StreamScript, chunk, sse_body, tool_call_chunks

CALLS = [("call_a", "get_weather", '{"city": "Zürich"}'), ("call_b", "get_time", '{"tz": "Asia/Tokyo"}')]


def write_recording(
    path: Path, chunks: list[Any], offsets: list[float], *, footer: Any = "completed", **request: Any
) -> Path:
    """A recording as the recorder writes it, with chosen offsets (ms)."""
    records: list[dict[str, Any]] = [
        {"type": "header", "format": FORMAT, "version": 1, "request": request, "options": {}}
    ]
    records += [{"type": "chunk", "offset_ms": t, "chunk": c} for c, t in zip(chunks, offsets, strict=True)]
    if footer is not None:
        error = None
        if footer == "error":
            error = {"type": "APIConnectionError", "message": "Connection error."}
        records.append(
            {
                "type": "footer",
                "offset_ms": offsets[-1] + 10,
                "outcome": footer,
                "chunks": len(chunks),
                "error": error,
            }
        )
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ raw .sse bodies


def _sse_file(stream: ProviderStream, folder: Path) -> Path:
    """The provider's body as a raw ``.sse`` file, as a user would save it."""
    path = folder / f"{stream.cassette.stem}.sse"
    path.write_bytes(stream.body.encode("utf-8"))
    return path


@pytest.mark.parametrize("stream", CORPUS, ids=lambda s: s.name)
def test_replaying_a_provider_body_gives_the_expected_calls(stream: ProviderStream, tmp_path: Path) -> None:
    expected = stream.expected
    replayed = replay(_sse_file(stream, tmp_path))
    assert replayed.format == "sse" and not replayed.timed
    for choice in expected["choices"]:
        calls = replayed.calls(choice["index"])
        assert [c.name for c in calls] == [c["name"] for c in choice["tool_calls"]]
        for call, want in zip(calls, choice["tool_calls"], strict=True):
            assert call.id and (want["id"] is None or call.id == want["id"])
            if not expected["error"]:
                assert call.ready and call.parsed == want["arguments"]
        assert replayed.accumulator.finish_reasons.get(choice["index"], []) == choice["finish_reasons"]
    if expected["error"]:
        assert isinstance(replayed.error, RecordedError)
        assert replayed.outcome == "error"
        assert not any(c.ready for c in replayed.calls())
    else:
        assert replayed.error is None
        content = replayed.get_final_completion().choices[0].message.content or ""
        assert content == expected["choices"][0]["content"]


@pytest.mark.parametrize("stream", CORPUS[::4], ids=lambda s: s.name)
def test_replaying_a_body_matches_the_real_sdk_over_http(stream: ProviderStream, tmp_path: Path) -> None:
    expected = stream.expected
    sse = _sse_file(stream, tmp_path)
    tools = offered(c["name"] for choice in expected["choices"] for c in choice["tool_calls"])
    with LocalServer() as server:
        server.enqueue(StreamScript.from_sse(sse))
        client = ts.wrap(server.client())
        stream = client.chat.completions.create(model="m", messages=[], tools=tools, stream=True)
        try:
            chunks = [c.to_dict() for c in stream]
        except Exception:
            chunks = None
    replayed = replay(sse)
    if chunks is not None:
        assert list(replayed) == chunks
    facts = [(c.index, c.id, c.name, c.arguments, c.status) for c in stream.calls()]
    assert [(c.index, c.id, c.name, c.arguments, c.status) for c in replayed.calls()] == facts


def test_sse_decoding_follows_the_sdk(tmp_path: Path) -> None:
    first = json.dumps(chunk(delta={"role": "assistant", "content": "a"}))
    second = json.dumps(chunk(delta={"content": "b"}, finish_reason="stop"))
    body = (
        ": keep-alive comment\r\n\r\n"
        f"data: {first}\r\n\r\n"
        "event: message\n"
        f"data:{second}\n\n"  # no space after the colon
        "data: [DONE]\n\n"
        f"data: {json.dumps(chunk(delta={'content': 'after done'}))}\n\n"
    )
    path = tmp_path / "body.sse"
    path.write_text(body, encoding="utf-8")
    replayed = replay(path)
    assert list(replayed) == [json.loads(first), json.loads(second)]
    assert replayed.get_final_completion().choices[0].message.content == "ab"


def test_an_error_event_ends_the_replay_with_that_error(tmp_path: Path) -> None:
    body = sse_body(tool_call_chunks(CALLS)[:4], done=False) + (
        b'event: error\ndata: {"error": {"message": "overloaded", "type": "server_error"}}\n\n'
    )
    path = tmp_path / "error.sse"
    path.write_bytes(body)
    replayed = replay(path)
    assert len(list(replayed)) == 4
    assert replayed.error is not None and replayed.error.message == "overloaded"
    assert replayed.error.body == {"message": "overloaded", "type": "server_error"}
    assert [c.status for c in replayed.tool_calls] == ["incomplete", "incomplete"]
    with pytest.raises(ts.IncompleteStreamError):
        replayed.get_final_completion()


def test_an_event_without_its_closing_blank_line_is_not_delivered(tmp_path: Path) -> None:
    """The SDK only dispatches an event at a blank line; a body cut before it loses the event."""
    whole = json.dumps(chunk(delta={"content": "kept"}))
    cut = json.dumps(chunk(delta={"content": "lost"}, finish_reason="stop"))
    path = tmp_path / "cut.sse"
    path.write_text(f"data: {whole}\n\ndata: {cut}\n", encoding="utf-8")
    assert [c["choices"][0]["delta"]["content"] for c in replay(path)] == ["kept"]


# ------------------------------------------------------------------------------ JSONL recordings


def test_a_timed_recording_replays_on_the_recorded_clock(tmp_path: Path) -> None:
    chunks = tool_call_chunks(CALLS, pieces=2, interleave=False)
    # role, call a: header + 2 pieces, call b: header + 2 pieces, finish
    offsets = [100.0, 150.0, 160.0, 170.0, 300.0, 310.0, 320.0, 400.0]
    replayed = replay(write_recording(tmp_path / "r.jsonl", chunks, offsets, model="m"))
    a, b = replayed.tool_calls
    assert replayed.timed
    assert replayed.accumulator.metrics.time_to_first_chunk == pytest.approx(0.100)
    assert replayed.accumulator.metrics.time_to_first_tool_call == pytest.approx(0.150)
    assert (a.metrics.opened_at, a.metrics.first_argument_at, a.metrics.sealed_at) == pytest.approx(
        (0.150, 0.160, 0.400)
    )
    assert a.metrics.arguments_complete_at == pytest.approx(0.170)
    assert b.metrics.opened_at == pytest.approx(0.300)

    timeline = replayed.timeline
    assert timeline.unit == "ms" and timeline.chunks == offsets and timeline.end == 410.0
    track_a, track_b = timeline.calls
    assert [f.at for f in track_a.fragments] == [150.0, 160.0, 170.0]
    assert [f.bytes for f in track_a.fragments] == [0, 9, 10]  # "Zürich" is 7 bytes in UTF-8
    assert (track_a.first_argument, track_a.complete, track_a.sealed) == (160.0, 170.0, 400.0)
    assert [f.at for f in track_b.fragments] == [300.0, 310.0, 320.0]


def test_timing_sleeps_until_each_recorded_offset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake clock, so nothing here depends on how fast the machine is."""
    clock = [1000.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        clock[0] += seconds

    monkeypatch.setattr(replay_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(replay_module.time, "sleep", sleep)
    chunks = [chunk(delta={"content": str(n)}) for n in range(3)]
    path = write_recording(tmp_path / "r.jsonl", chunks, [50.0, 80.0, 200.0])
    assert len(list(replay(path, timing=True))) == 3
    assert sleeps == [0.05, 0.03, 0.12]
    sleeps.clear()
    assert len(list(replay(path))) == 3
    assert sleeps == []


def test_a_failed_stream_fails_again_and_its_calls_stay_incomplete(tmp_path: Path) -> None:
    chunks = tool_call_chunks(CALLS, pieces=3)[:5]
    replayed = replay(write_recording(tmp_path / "r.jsonl", chunks, [1.0, 2, 3, 4, 5], footer="error"))
    assert {c.status for c in replayed.tool_calls} == {"incomplete"}
    assert replayed.outcome == "error"
    assert isinstance(replayed.error, RecordedError) and replayed.error.type_name == "APIConnectionError"
    assert replayed.accumulator.error is replayed.error


def test_a_recording_cut_mid_line_reads_as_truncated(tmp_path: Path) -> None:
    chunks = tool_call_chunks(CALLS, pieces=3)
    path = write_recording(tmp_path / "r.jsonl", chunks, [float(n) for n in range(len(chunks))], footer=None)
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) - 40], encoding="utf-8")  # the process died mid-write
    replayed = replay(path)
    assert replayed.outcome == "truncated"
    assert len(replayed.chunks) == len(chunks) - 1
    assert not any(c.ready for c in replayed.tool_calls)


def test_the_recorded_options_are_applied(tmp_path: Path) -> None:
    """``empty_arguments="object"`` in the recording makes ``""`` arguments ``{}`` again."""
    chunks = tool_call_chunks([("call_e", "ping", "")])
    path = tmp_path / "r.jsonl"
    write_recording(path, chunks, [1.0] * len(chunks))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert replay(path).tool_calls[0].status == "invalid"
    records[0]["options"] = {"empty_arguments": "object", "limits": {"max_argument_bytes": 100}}
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    call = replay(path).tool_calls[0]
    assert (call.status, call.parsed) == ("ready", {})


def test_a_given_accumulator_is_the_one_fed(tmp_path: Path) -> None:
    chunks = tool_call_chunks(CALLS)
    path = write_recording(tmp_path / "r.jsonl", chunks, [1.0] * len(chunks))
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    acc = ts.Accumulator(tools)
    replayed = replay(path, accumulator=acc)
    assert replayed.accumulator is acc
    assert [c.status for c in replayed.tool_calls] == ["ready", "invalid"]  # get_time was not offered
    assert acc.ended


def test_a_file_of_bare_chunks_is_replayed_without_timing(tmp_path: Path) -> None:
    chunks = tool_call_chunks(CALLS)
    path = tmp_path / "chunks.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in chunks))
    replayed = replay(path)
    assert replayed.format == "chunks" and not replayed.timed
    assert [c.parsed for c in replayed.tool_calls] == [{"city": "Zürich"}, {"tz": "Asia/Tokyo"}]
    assert replayed.timeline.unit == "chunk"


def test_replay_reads_an_open_text_file() -> None:
    body = sse_body(tool_call_chunks(CALLS)).decode()
    assert [c.name for c in replay(io.StringIO(body)).tool_calls] == ["get_weather", "get_time"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty file"),
        ("hello world\n", "neither a toolstitch recording"),
        ('{"type": "header", "format": "other"}\n', "unknown recording format"),
        ('{"a": 1}\n{"b": 2}\n', "unexpected record"),
        (f'{{"type": "header", "format": "{FORMAT}"}}\nnot json\n{{"type": "footer"}}\n', ":2: not JSON"),
    ],
)
def test_unreadable_input_fails_with_one_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(RecordingFormatError, match=re.escape(message)):
        replay(path)


def test_binary_input_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.bin"
    path.write_bytes(b"\xff\xfe\x00data")
    with pytest.raises(RecordingFormatError, match="not UTF-8"):
        replay(path)


# ------------------------------------------------------------------------------ rendering


def timed_replay(tmp_path: Path) -> Any:
    long_name = [("call_l", "a_rather_long_tool_name_for_layout", '{"q": "東京 東京 東京"}')]
    chunks = tool_call_chunks([*CALLS, *long_name], pieces=5)
    offsets = [10.0 + 7 * n for n in range(len(chunks))]
    return replay(write_recording(tmp_path / "r.jsonl", chunks, offsets, model="m"))


def test_the_text_timeline_fits_80_columns_and_shows_every_call(tmp_path: Path) -> None:
    replayed = timed_replay(tmp_path)
    text = render_timeline(replayed.timeline) + render_latency(replayed.timeline)
    assert all(display_width(line) <= 80 for line in text.splitlines())
    rows = [line.strip() for line in text.splitlines() if line.strip().startswith("#")]
    assert [r.split()[0] for r in rows] == ["#0", "#1", "#2"] * 2  # timeline rows, then latency rows
    assert all("✓" in r for r in rows[:3])
    assert "#2 a_rather_long_t…" in text


def test_an_incomplete_call_is_marked_on_the_timeline(tmp_path: Path) -> None:
    chunks = tool_call_chunks(CALLS, pieces=3)[:6]
    replayed = replay(
        write_recording(tmp_path / "r.jsonl", chunks, [5.0 * n for n in range(6)], footer="error")
    )
    rows = [line for line in render_timeline(replayed.timeline).splitlines() if line.startswith("#")]
    assert all(r.endswith("incomplete") and "?" in r for r in rows)


def test_the_html_report_is_self_contained(tmp_path: Path) -> None:
    page = report_html(timed_replay(tmp_path))
    assert page.startswith("<!doctype html>")
    without_namespace = page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert not re.search(r"https?://|<script|<link|\bsrc=|@import|url\(", without_namespace)
    svg = re.search(r"<svg.*?</svg>", page, re.S)
    assert svg is not None
    ET.fromstring(svg.group(0))  # well-formed
    for name in ("get_weather", "get_time", "a_rather_long_tool_name_for_layout"):
        assert name in page
    assert "東京 東京 東京" in page
