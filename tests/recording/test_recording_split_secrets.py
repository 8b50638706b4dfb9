"""The client's own secrets echoed a few characters per chunk are masked too (issue 42, item 5).

A server that echoes the client's API key (or a credential header's value) in pieces sends no
chunk that holds it, yet the text joined from the chunks does, and ``toolstitch replay`` would
print it whole. Every test but the property ones drives the real ``openai`` client over real HTTP
against the local server, then reads the file's bytes and the replay command's output: no piece of
the key eight characters long is in either, whatever the channel (content, reasoning, call
arguments, Responses text and argument deltas) and however it was cut.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolstitch as ts
from toolstitch.cli._main import main
from toolstitch.recording._recorder import _HOLD, _HOLD_BYTES, Recorder
from toolstitch.recording._secrets import (
    REDACTED,
    LiteralSecrets,
    Piece,
    StreamedLiterals,
)
from toolstitch.testing import LocalServer, StreamScript, chunk, response_events, tool_call_chunks

API_KEY = "Zq8RkT3uLm9Vx2Wy7Ab4Cd6EfGh"  # no prefix the shape patterns know: only knowing it masks it
HEADER = "HDR5ecretValue9981"
WINDOWS = [API_KEY[k : k + 8] for k in range(len(API_KEY) - 7)]
HALVES = (API_KEY[: len(API_KEY) // 2], API_KEY[len(API_KEY) // 2 :])
MESSAGES = [{"role": "user", "content": "hi"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "note",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    }
]
RESPONSES_TOOLS = [{"type": "function", "name": "note", "parameters": {"type": "object"}, "strict": False}]


def cut(text: str, size: int) -> list[str]:
    return [text[k : k + size] for k in range(0, len(text), size)]


def record(server: LocalServer, folder: Path, script: StreamScript, **client: Any) -> tuple[list[Any], Path]:
    """One chat stream recorded from a client holding ``API_KEY``: the live calls, the file."""
    server.enqueue(script)
    wrapped = ts.wrap(server.client(api_key=API_KEY, **client), record=folder)
    stream = wrapped.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, stream=True)
    with stream:
        for _ in stream:
            pass
    (path,) = folder.glob("*.jsonl")
    return [(c.id, c.status) for c in stream.tool_calls], path


def record_responses(
    server: LocalServer, folder: Path, events: list[dict[str, Any]]
) -> tuple[list[Any], Path]:
    server.enqueue(StreamScript.responses(events))
    wrapped = ts.wrap(server.client(api_key=API_KEY), record=folder)
    stream = wrapped.responses.create(model="m", input="x", tools=RESPONSES_TOOLS, stream=True)
    with contextlib.suppress(openai.APIError):
        stream.until_done()
    (path,) = folder.glob("*.jsonl")
    return [(c.id, c.status) for c in stream.tool_calls], path


def assert_absent(path: Path, capsys: pytest.CaptureFixture[str], *secrets: str) -> str:
    """No 8-character piece of the key (nor any of ``secrets``) in the file's bytes, nor in what
    ``toolstitch replay`` prints (text and JSON). The file's text."""
    data = path.read_bytes()
    text = data.decode("utf-8")
    capsys.readouterr()
    assert main(["replay", str(path)]) == 0
    assert main(["replay", str(path), "--json"]) == 0
    printed = capsys.readouterr().out
    for piece in (*WINDOWS, *HALVES, *secrets):
        assert piece.encode() not in data, piece
        assert piece not in printed, piece
    for line in text.splitlines():
        json.loads(line)  # every record is still JSON
    return text


def chunks_of(text: str) -> list[dict[str, Any]]:
    return [r["chunk"] for r in map(json.loads, text.splitlines()) if r["type"] == "chunk"]


def joined(text: str, *path: Any) -> str:
    """One streamed field of every chat chunk, joined (``path`` inside ``choices[0].delta``)."""
    out = []
    for data in chunks_of(text):
        node: Any = data["choices"][0]["delta"] if data.get("choices") else {}
        for step in path:
            if isinstance(node, dict):
                node = node.get(step)
            elif isinstance(node, list):
                node = node[step]
        out.append(node if isinstance(node, str) else "")
    return "".join(out)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_the_key_cut_over_content_chunks_is_masked(
    server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], size: int
) -> None:
    said = f"Your key is {API_KEY}, and again: {API_KEY}{API_KEY}. Done."
    script = [chunk(delta={"content": p}) for p in cut(said, size)] + [chunk(delta={}, finish_reason="stop")]
    _, path = record(server, tmp_path, StreamScript(script))
    text = assert_absent(path, capsys)
    # Masked as a key sent whole is: each occurrence becomes one marker, the text around it kept.
    assert joined(text, "content") == said.replace(API_KEY, REDACTED)
    assert len(chunks_of(text)) == len(script)  # every chunk is kept, one record each


def test_the_key_cut_over_one_calls_arguments_is_masked_and_replays(
    server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = json.dumps({"text": f"key={API_KEY}!"})
    script = tool_call_chunks([("call_1", "note", arguments)], pieces=len(arguments))  # one character each
    live, path = record(server, tmp_path, StreamScript(script))
    assert_absent(path, capsys)
    replayed = ts.replay(path)
    assert [(c.id, c.status) for c in replayed.tool_calls] == live == [("call_1", "ready")]
    assert replayed.tool_calls[0].parsed == {"text": f"key={REDACTED}!"}  # as a key sent whole


def test_parallel_calls_and_content_interleaved_are_separate_texts(
    server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The key cut in three channels at once, their pieces interleaved chunk by chunk (and two of
    # them in the same chunk): each channel joins only its own pieces.
    first = json.dumps({"text": API_KEY})
    second = json.dumps({"text": "k" + API_KEY[::-1] + API_KEY})
    content = f"{API_KEY[:7]} is not it; {API_KEY} is."
    pieces = [cut(content, 2), cut(first, 3), cut(second, 4)]
    opened = [
        {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": "note", "arguments": ""}}
        for i in (0, 1)
    ]
    script = [chunk(delta={"role": "assistant", "tool_calls": opened})]
    for k in range(max(map(len, pieces))):
        delta: dict[str, Any] = {}
        if k < len(pieces[0]):
            delta["content"] = pieces[0][k]
        calls = [
            {"index": i, "function": {"arguments": p[k]}} for i, p in enumerate(pieces[1:]) if k < len(p)
        ]
        if k % 2 and calls:
            delta["tool_calls"] = calls
            script.append(chunk(delta=delta))
        else:
            script.append(chunk(delta=delta))
            script.extend(chunk(delta={"tool_calls": [c]}) for c in calls)
    script.append(chunk(delta={}, finish_reason="tool_calls"))
    live, path = record(server, tmp_path, StreamScript(script))
    text = assert_absent(path, capsys)
    assert joined(text, "content") == content.replace(API_KEY, REDACTED)
    assert API_KEY[:7] + " is not it" in joined(text, "content")  # a prefix alone is no secret, and is kept
    replayed = ts.replay(path)
    assert [(c.id, c.status) for c in replayed.tool_calls] == live
    assert live == [("call_0", "ready"), ("call_1", "ready")]
    assert [c.parsed for c in replayed.tool_calls] == [
        {"text": REDACTED},
        {"text": "k" + API_KEY[::-1] + REDACTED},
    ]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_the_key_cut_over_reasoning_deltas_is_masked(
    server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    thought = f"The user sent {API_KEY} earlier."
    script = [chunk(delta={field: p}) for p in cut(thought, 3)] + [
        chunk(delta={"content": "ok"}),
        chunk(delta={}, finish_reason="stop"),
    ]
    _, path = record(server, tmp_path, StreamScript(script))
    text = assert_absent(path, capsys)
    assert joined(text, field) == thought.replace(API_KEY, REDACTED)


def test_credential_header_values_cut_over_chunks_are_masked(
    server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "BearerTok3nValue4242"
    headers = {"X-Api-Key": HEADER, "Proxy-Authorization": f"Bearer {token}", "X-Title": "my-app"}
    said = f"{HEADER} / {token} / my-app"
    script = [chunk(delta={"content": p}) for p in cut(said, 2)] + [chunk(delta={}, finish_reason="stop")]
    _, path = record(server, tmp_path, StreamScript(script), default_headers=headers)
    text = assert_absent(path, capsys, HEADER, token, HEADER[:9], HEADER[9:], token[:10], token[10:])
    assert joined(text, "content") == f"{REDACTED} / {REDACTED} / my-app"


def test_a_prefix_of_the_key_that_does_not_go_on_is_kept_as_sent(server: LocalServer, tmp_path: Path) -> None:
    # Held back while it might be the key, then written unchanged, in its own chunks, in order.
    said = f"{API_KEY[:12]}X and then {API_KEY[:20]}"  # the stream ends inside a prefix
    pieces = cut(said, 4)
    script = [chunk(delta={"content": p}) for p in pieces] + [chunk(delta={}, finish_reason="stop")]
    _, path = record(server, tmp_path, StreamScript(script))
    records = chunks_of(path.read_text(encoding="utf-8"))
    assert [r["choices"][0]["delta"].get("content") for r in records[: len(pieces)]] == pieces
    assert records[-1]["choices"][0]["finish_reason"] == "stop"


def test_the_key_cut_over_responses_text_and_argument_deltas_is_masked(
    server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")
    arguments = json.dumps({"text": f"{API_KEY}{API_KEY}"})
    events = response_events(
        [("call_1", "note", arguments)],
        text=f"Key: {API_KEY}.",
        reasoning=f"They pasted {API_KEY}",
        pieces=40,
    )
    live, path = record_responses(server, tmp_path, events)
    text = assert_absent(path, capsys)
    deltas: dict[str, str] = {}
    for event in chunks_of(text):
        if event["type"].endswith(".delta"):
            deltas[event["type"]] = deltas.get(event["type"], "") + event["delta"]
    assert deltas == {
        "response.reasoning_summary_text.delta": f"They pasted {REDACTED}",
        "response.output_text.delta": f"Key: {REDACTED}.",
        "response.function_call_arguments.delta": json.dumps({"text": REDACTED * 2}),
    }
    # The server's statements of the whole text (``.done``, the final output) are masked the same
    # way, so they agree with the deltas and the call replays as it ran.
    replayed = ts.replay(path)
    assert [(c.id, c.status) for c in replayed.calls()] == live == [("call_1", "ready")]
    assert replayed.calls()[0].parsed == {"text": REDACTED * 2}


def test_a_redacted_recording_masks_the_key_before_redacting(
    server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Arguments redaction keeps object keys: a key spelled as an object key, cut, goes all the same.
    arguments = json.dumps({API_KEY: "v"})
    script = tool_call_chunks([("call_1", "note", arguments)], pieces=9)
    server.enqueue(StreamScript(script))
    client = ts.wrap(server.client(api_key=API_KEY), record=tmp_path, redact="arguments")
    with client.chat.completions.create(model="m", messages=MESSAGES, stream=True) as stream:
        for _ in stream:
            pass
    (path,) = tmp_path.glob("*.jsonl")
    assert_absent(path, capsys)


def test_a_text_waiting_behind_too_many_chunks_is_written_masked() -> None:
    # The content ends in what may start the key, then the call streams on: the content's chunk
    # waits for at most _HOLD others, then goes out with that start masked; the key completed
    # later is masked all the same, and nothing of it is written in clear.
    out = io.StringIO()
    recorder = Recorder(out, secrets=[API_KEY])
    recorder.on_chunk(chunk(delta={"content": "see " + API_KEY[:10]}))
    longest = 0
    for _ in range(_HOLD + 50):
        recorder.on_chunk(chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": "a"}}]}))
        longest = max(longest, len(recorder._held))
    recorder.on_chunk(chunk(delta={"content": API_KEY[10:] + " ok"}))
    recorder.on_end(None)
    assert longest <= _HOLD + 1
    text = out.getvalue()
    for piece in WINDOWS:
        assert piece not in text
    assert joined(text, "content") == f"see {REDACTED} ok"
    assert recorder.chunks == _HOLD + 52 and recorder.error is None


def test_large_chunks_waiting_behind_a_possible_secret_are_bounded_in_bytes_too() -> None:
    # A hostile server echoes the start of the key, then sends large chunks: what waits for the
    # file stays under _HOLD_BYTES (the oldest goes out masked), however few chunks that is.
    out = io.StringIO()
    recorder = Recorder(out, secrets=[API_KEY])
    recorder.on_chunk(chunk(delta={"content": "see " + API_KEY[:10]}))
    large = "x" * (1024 * 1024)
    most = 0
    for _ in range(40):
        recorder.on_chunk(chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": large}}]}))
        most = max(most, recorder._held_bytes)
    recorder.on_end(None)
    assert most <= _HOLD_BYTES + 2 * len(large)
    text = out.getvalue()
    assert not any(piece in text for piece in WINDOWS)
    assert joined(text, "content") == f"see {REDACTED}"
    assert recorder.chunks == 41 and recorder.error is None


# -- the rule itself, cut at every position -------------------------------------------------------


def masked_through_a_recorder(pieces: list[str], secrets: list[str]) -> list[str]:
    out = io.StringIO()
    recorder = Recorder(out, secrets=secrets)
    for piece in pieces:
        recorder.on_chunk(chunk(delta={"content": piece}))
    recorder.on_end(None)
    return [c["choices"][0]["delta"]["content"] for c in chunks_of(out.getvalue())]


def test_the_key_cut_in_two_at_every_position() -> None:
    text = f"a{API_KEY}b"
    for at in range(len(text) + 1):
        pieces = [text[:at], text[at:]]
        written = masked_through_a_recorder(pieces, [API_KEY])
        assert "".join(written) == f"a{REDACTED}b", at
        assert not any(w in p for p in written for w in WINDOWS)


@given(
    st.lists(st.integers(min_value=0, max_value=60), max_size=20),
    st.text(alphabet="Zq8Rk ", max_size=20),
    st.integers(min_value=0, max_value=3),
)
def test_the_key_cut_anywhere_is_masked_as_a_whole_key_is(cuts: list[int], around: str, times: int) -> None:
    text = around + API_KEY * times + around + API_KEY[:5]
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    written = masked_through_a_recorder(pieces, [API_KEY])
    assert len(written) == len(pieces)
    assert "".join(written) == LiteralSecrets([API_KEY]).text(text)
    assert API_KEY not in "".join(written)


ALPHABET = "ab[]-redact"  # the marker's own characters, and few others: many occurrences, overlaps
SECRETS = st.lists(st.text(alphabet=ALPHABET, min_size=8, max_size=12), min_size=1, max_size=3)


@given(SECRETS, st.text(alphabet=ALPHABET, max_size=50), st.lists(st.integers(0, 80), max_size=25), st.data())
def test_no_secret_is_ever_spelled_by_what_is_written(
    secrets: list[str], text: str, cuts: list[int], data: st.DataObject
) -> None:
    # Several secrets, overlapping and repeated occurrences, secrets that hold the marker's own
    # characters, and fragments settled early by force: the written text never spells a secret.
    known = LiteralSecrets(secrets)
    text = text + data.draw(st.sampled_from(secrets)) + text
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pieces = [Piece(text[a:b]) for a, b in itertools.pairwise(bounds)]
    stream = StreamedLiterals()
    forced = data.draw(st.sets(st.integers(0, len(pieces))))
    settled: list[Piece] = []
    for n, piece in enumerate(pieces):
        settled += stream.feed(piece, known)
        if n in forced:
            settled += stream.force(piece, known)
    settled += stream.end()
    assert settled == pieces  # each settles once, in order
    written = "".join(piece.masked() for piece in pieces)
    for secret in secrets:
        if len(secret.strip()) >= 8:
            assert secret not in written
    if not forced:
        assert written == known.text(text)  # one rule, whole or cut
