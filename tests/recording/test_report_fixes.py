"""The replay reports tell one story: an incomplete call is never "sealed", the stream's error keeps
its original type, fragments show their text (escaped, bounded), and the request is shown with its
credentials masked as the recording holds them. Recorded with the real SDK over real HTTP.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import openai
import pytest

import toolstitch as ts
from tests.conftest import WEATHER_TOOLS as TOOLS
from toolstitch.errors import RecordedError
from toolstitch.recording._report_data import report_data
from toolstitch.recording._report_html import MAX_FRAGMENT_ROWS, report_html
from toolstitch.recording._report_text import report_text
from toolstitch.recording._timeline import FRAGMENT_TEXT_CHARS
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
MESSAGES = [{"role": "user", "content": "Weather in <Paris> & Zürich?"}]


def record(server: LocalServer, folder: Path, script: StreamScript) -> Path:
    server.enqueue(script)
    client = ts.wrap(server.client(api_key=SECRET), record=folder)
    try:
        with client.chat.completions.create(
            model="m", messages=MESSAGES, tools=TOOLS, stream=True, extra_headers={"X-Token": "hidden-value"}
        ) as stream:
            for _ in stream:
                pass
    except openai.APIConnectionError:
        pass
    return max(folder.glob("*.jsonl"))


@pytest.fixture
def cut(server: LocalServer, tmp_path: Path) -> Path:
    """A call cut mid-argument: the connection drops after three of its four argument pieces."""
    calls = [("c1", "get_weather", '{"city": "Paris <b>&amp;</b>"}')]
    return record(server, tmp_path, StreamScript(tool_call_chunks(calls, pieces=4), cut_after=5))


def test_the_recorded_error_keeps_its_original_type(cut: Path) -> None:
    replayed = ts.replay(cut)
    assert isinstance(replayed.error, RecordedError)
    assert type(replayed.error).__name__ == "APIConnectionError"
    (call,) = replayed.tool_calls
    assert call.status == "incomplete" and call.error is not None
    assert "(APIConnectionError)" in str(call.error) and "RecordedError" not in str(call.error)
    for page in (report_html(ts.replay(cut)), report_text(ts.replay(cut))):
        assert "RecordedError" not in page and "APIConnectionError" in page


def test_an_incomplete_call_has_no_sealed_time(cut: Path) -> None:
    track = ts.replay(cut).timeline.calls[0]
    assert track.sealed is None and track.ended is not None and track.settled == track.ended
    data = report_data(ts.replay(cut))
    assert data["calls"][0]["timeline"]["sealed"] is None
    assert data["calls"][0]["timeline"]["ended"] == track.ended
    page = report_html(ts.replay(cut))
    # The drawing marks it "never sealed", the latency row has no sealed time.
    assert "never sealed: incomplete at" in page
    assert not re.search(r"<title>sealed incomplete", page)
    row = re.search(r"<tr><td>#0 get_weather</td>(.*?)</tr>", page)
    assert row is not None
    cells = re.findall(r"<td>(.*?)</td>", row.group(1))
    assert cells[3] == "-"  # opened, first argument, complete, sealed
    text = report_text(ts.replay(cut))
    latency = text.split("latency")[1]
    assert re.search(r"#0 get_weather\s+\S+\s+\S+\s+-\s+-\s+\d", latency)


def test_fragments_show_their_text_escaped(cut: Path) -> None:
    page = report_html(ts.replay(cut))
    texts = re.findall(r"<td class=frag>(.*?)</td>", page)
    (call,) = ts.replay(cut).tool_calls
    assert call.arguments.startswith('{"city": "Paris <b>&a')  # three of the four pieces
    assert "".join(texts) == html.escape(call.arguments) and len(texts) == 4  # header + 3 pieces


def test_fragment_text_and_rows_are_bounded(server: LocalServer, tmp_path: Path) -> None:
    huge = '{"city": "' + "x" * 5000 + '"}'
    calls = [(f"c{n}", "get_weather", huge) for n in range(3)]
    path = record(server, tmp_path, StreamScript(tool_call_chunks(calls, pieces=900)))
    replayed = ts.replay(path)
    fragments = [f for t in replayed.timeline.calls for f in t.fragments]
    assert all(len(f.text) <= FRAGMENT_TEXT_CHARS for f in fragments)
    page = report_html(ts.replay(path))
    assert len(re.findall("<td class=frag>", page)) == MAX_FRAGMENT_ROWS
    assert "more not shown" in page


def test_one_chunk_of_long_argument_text_is_cut_and_says_so(server: LocalServer, tmp_path: Path) -> None:
    calls = [("c1", "get_weather", '{"city": "' + "y" * 1000 + '"}')]
    path = record(server, tmp_path, StreamScript(tool_call_chunks(calls, pieces=1)))
    track = ts.replay(path).timeline.calls[0]
    long = [f for f in track.fragments if f.bytes > FRAGMENT_TEXT_CHARS]
    assert long and long[0].cut and len(long[0].text) == FRAGMENT_TEXT_CHARS
    assert "<i>…</i>" in report_html(ts.replay(path))


def test_the_request_is_shown_with_secrets_masked(cut: Path) -> None:
    page = report_html(ts.replay(cut))
    assert "<h2>Request</h2>" in page
    assert "model m · 1 message · tools get_weather" in page
    assert "user: Weather in &lt;Paris&gt; &amp; Zürich?" in page
    assert "hidden-value" not in page and SECRET not in page
    assert "X-Token" in page  # the header's name is kept, its value masked
    text = report_text(ts.replay(cut))
    assert "request: model m · 1 message · tools get_weather" in text
    assert "user: Weather in <Paris> & Zürich?" in text
    assert report_data(ts.replay(cut))["request"]["messages"] == MESSAGES


def test_a_raw_sse_body_has_no_request_section(tmp_path: Path) -> None:
    path = tmp_path / "body.sse"
    path.write_text(f"data: {json.dumps(chunk(delta={'content': 'hi'}, finish_reason='stop'))}\n\n")
    assert "<h2>Request</h2>" not in report_html(ts.replay(path))
    assert "request:" not in report_text(ts.replay(path))


@pytest.mark.parametrize("name", ["not an identifier", "x" * 200, "RecordedError", "Ünïcode"])
def test_a_recorded_type_name_that_is_no_class_name_stays_a_plain_recorded_error(name: str) -> None:
    error = RecordedError("boom", type_name=name)
    assert type(error) is RecordedError and error.type_name == name and str(error) == f"{name}: boom"


def test_a_recorded_class_is_still_a_recorded_error() -> None:
    error = RecordedError("Connection error.", type_name="APIConnectionError", status_code=None)
    assert isinstance(error, RecordedError) and type(error) is not RecordedError
    assert str(error) == "Connection error." and error.data() == {
        "type": "APIConnectionError",
        "message": "Connection error.",
    }
    assert type(RecordedError("again", type_name="APIConnectionError")) is type(error)


def test_a_recorded_error_survives_pickling() -> None:
    import pickle

    error = RecordedError("gone", type_name="APIConnectionError", body={"a": 1}, status_code=None)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and back.data() == error.data() and str(back) == "gone"
