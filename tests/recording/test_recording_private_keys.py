"""A PEM private key never reaches a recording (issue 22, round 2), over real HTTP with the SDK.

Every kind of key (RSA, EC, DSA, PKCS#8, OPENSSH, ENCRYPTED, X9.42 DH, PGP, SSH2), in every spelling
a hostile caller may use (CRLF, lower case, tabs, a fake END line inside, cut before its END, escaped
inside a JSON string, as a dict key, as the list of its lines, as bytes, 300 levels deep), wherever it
is sent (``extra_body``, a low-level ``post``'s ``extra_json``, the conversation, a tool schema), and
wherever the server echoes it (chunks, an error), is masked: no line of its body is in the file, and
the file is still a recording that replays.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import toolstitch as ts
from tests.recording.test_recording_secrets import CALLS, MESSAGES, TOOLS, recorded
from toolstitch.recording._recorder import Recorder
from toolstitch.recording._replay import replay
from toolstitch.recording._secrets import REDACTED, mask_private_keys, mask_shapes
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

BODY_LINES = ["MIIEowIBAAKCAQEAv3KEYBODYLINEONE0123", "KEYBODYLINETWO4567abcdefghijklmn=="]
BODY = "\n".join(BODY_LINES)
MARKERS = ("KEYBODYLINEONE", "KEYBODYLINETWO")


def pem(label: str, *, end: str = "\n", body: str = BODY, dashes: str = "-----") -> str:
    return f"{dashes}BEGIN {label}{dashes}{end}{body.replace(chr(10), end)}{end}{dashes}END {label}{dashes}"


KEYS: dict[str, Any] = {
    "rsa": pem("RSA PRIVATE KEY"),
    "ec": pem("EC PRIVATE KEY"),
    "dsa": pem("DSA PRIVATE KEY"),
    "pkcs8": pem("PRIVATE KEY"),
    "openssh": pem("OPENSSH PRIVATE KEY"),
    "encrypted": pem("ENCRYPTED PRIVATE KEY"),
    "x9.42 dh": pem("X9.42 DH PRIVATE KEY"),
    "pgp block": pem("PGP PRIVATE KEY BLOCK"),
    "ssh2": pem("SSH2 ENCRYPTED PRIVATE KEY", dashes="---- ").replace("---- END", "---- END"),
    "crlf": pem("RSA PRIVATE KEY", end="\r\n"),
    "lower case": pem("rsa private key"),
    "tab": pem("RSA\tPRIVATE  KEY"),
    "headers": pem("RSA PRIVATE KEY", body="Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,AB12\n\n" + BODY),
    "fake END inside": pem("RSA PRIVATE KEY", body=BODY_LINES[0] + "\n-----END X-----\n" + BODY_LINES[1]),
    "cut before END": pem("PRIVATE KEY").rsplit("\n", 1)[0],
    "json text": json.dumps({"key": pem("RSA PRIVATE KEY")}),
    "as a dict key": {pem("EC PRIVATE KEY"): "value"},
    "as its lines": pem("RSA PRIVATE KEY").splitlines(),
    "deep": {"a": [[[[{"b": pem("OPENSSH PRIVATE KEY")}]]]]},
}


def deep(n: int, value: Any) -> Any:
    for _ in range(n):
        value = {"x": value}
    return value


def assert_masked(text: str) -> None:
    for marker in MARKERS:
        assert marker not in text, marker
    for line in text.splitlines():
        json.loads(line)  # every record is still JSON


def replays(path: Path) -> None:
    replayed = replay(path)
    assert [c.status for c in replayed.tool_calls] == ["ready"]  # the masked file still replays


@pytest.mark.parametrize("kind", KEYS)
def test_a_private_key_in_extra_body_is_masked(server: LocalServer, tmp_path: Path, kind: str) -> None:
    text = recorded(
        server,
        tmp_path,
        tool_call_chunks(CALLS),
        tools=TOOLS,
        extra_body={"config": KEYS[kind], "plain": "kept as sent"},
    )
    assert_masked(text)
    header = json.loads(text.splitlines()[0])
    assert header["request"]["extra_body"]["plain"] == "kept as sent"
    assert REDACTED in text
    replays(next(tmp_path.glob("*.jsonl")))


def test_a_key_three_hundred_levels_deep_is_masked(server: LocalServer, tmp_path: Path) -> None:
    text = recorded(
        server, tmp_path, tool_call_chunks(CALLS), tools=TOOLS, extra_body={"v": deep(300, KEYS["rsa"])}
    )
    assert_masked(text)


def test_a_key_echoed_by_the_server_in_chunks_and_an_error_is_masked(
    server: LocalServer, tmp_path: Path
) -> None:
    # The key was sent in extra_body; the server echoes its body in content, then in its error.
    echo = chunk(delta={"role": "assistant", "content": f"you sent {BODY_LINES[0]} and {BODY_LINES[1]}"})
    error = {"error": {"message": f"bad key {BODY_LINES[1]}", "param": BODY_LINES[0]}}
    text = recorded(server, tmp_path, [echo, error], extra_body={"key": KEYS["rsa"]})
    assert_masked(text)
    assert "you sent" in text  # the text around it stays


def test_a_key_in_the_conversation_a_tool_schema_or_a_chunk_is_masked(
    server: LocalServer, tmp_path: Path
) -> None:
    messages = [*MESSAGES, {"role": "user", "content": f"here is my key:\n{KEYS['openssh']}\nthanks"}]
    tools = [
        {**TOOLS[0], "function": {**TOOLS[0]["function"], "description": f"signs with {KEYS['ec']}"}},
    ]
    model_output = chunk(delta={"role": "assistant", "content": "generated: " + pem("PRIVATE KEY")})
    text = recorded(
        server,
        tmp_path,
        [model_output, chunk(delta={}, finish_reason="stop")],
        messages=messages,
        tools=tools,
    )
    assert_masked(text)
    header = json.loads(text.splitlines()[0])
    assert header["request"]["messages"][-1]["content"].endswith("thanks")


def test_a_key_sent_through_a_low_level_post_is_masked(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(StreamScript(tool_call_chunks(CALLS)))
    client = ts.wrap(server.client(), record=tmp_path)
    body = {"model": "m", "messages": MESSAGES, "tools": TOOLS, "stream": True}
    stream = client.post(
        "/chat/completions",
        body=body,
        options={"extra_json": {"signing_key": KEYS["as its lines"], "k": KEYS["crlf"]}},
        cast_to=ChatCompletion,
        stream=True,
        stream_cls=openai.Stream[ChatCompletionChunk],
    )
    assert isinstance(stream, ts.StitchedStream)
    stream.until_done()
    assert_masked(next(tmp_path.glob("*.jsonl")).read_text(encoding="utf-8"))


@pytest.mark.parametrize("kind", [k for k, v in KEYS.items() if isinstance(v, str)])
def test_the_recorder_masks_a_key_in_any_record(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path, request={"model": "m", "messages": [{"role": "user", "content": KEYS[kind]}]})
    recorder.on_chunk({"choices": [{"index": 0, "delta": {"content": KEYS[kind]}}]})
    recorder.on_end(None)
    assert_masked(path.read_text(encoding="utf-8"))


def test_shapes_mask_every_kind_of_key_in_one_string() -> None:
    for kind, key in KEYS.items():
        if isinstance(key, str):
            found: list[str] = []
            masked = mask_shapes(f"before {key} after", found)
            assert not any(m in masked for m in MARKERS), kind
            assert masked.startswith("before ") and found, kind


def test_a_key_spread_over_strings_is_masked_in_document_order_and_nothing_else() -> None:
    lines = KEYS["rsa"].splitlines()
    data = {"before": "keep me", "lines": [*lines, "after the key"], "then": "keep me too"}
    masked = mask_private_keys(data)
    assert masked["before"] == "keep me" and masked["then"] == "keep me too"
    assert masked["lines"][-1] == "after the key"
    assert all(v == REDACTED for v in masked["lines"][:-1])
    # Not a private key: certificates and public keys stay.
    cert = "-----BEGIN CERTIFICATE-----\nMIIBCERT\n-----END CERTIFICATE-----"
    public = "-----BEGIN PUBLIC KEY-----\nMIIBPUB\n-----END PUBLIC KEY-----"
    assert mask_private_keys([cert, public]) == [cert, public]
    assert mask_shapes("a --- markdown rule ---") == "a --- markdown rule ---"


def test_a_key_given_as_bytes_or_a_model_is_masked(tmp_path: Path) -> None:
    from pydantic import BaseModel

    class Secret(BaseModel):
        material: str

    path = tmp_path / "r.jsonl"
    request = {
        "model": "m",
        "extra_body": {"raw": KEYS["rsa"].encode(), "model": Secret(material=KEYS["ec"])},
    }
    Recorder(path, request=request).on_end(None)
    assert_masked(path.read_text(encoding="utf-8"))


def streamed(text: str, size: int) -> list[dict[str, Any]]:
    """``text`` as content fragments of ``size`` characters, then a finish."""
    pieces = [text[k : k + size] for k in range(0, len(text), size)]
    return [chunk(delta={"content": p}) for p in pieces] + [chunk(delta={}, finish_reason="stop")]


@pytest.mark.parametrize("size", [1, 3, 7, 16, 40])
def test_a_key_the_model_streams_over_many_chunks_is_masked(
    server: LocalServer, tmp_path: Path, size: int
) -> None:
    # Every cut: the BEGIN line and the END line split between chunks, the body a few characters
    # per chunk. What comes after the key is kept.
    text = f"Here is a key:\n{KEYS['openssh']}\nand the rest of the answer."
    recorded_text = recorded(server, tmp_path, streamed(text, size))
    assert_masked(recorded_text)
    content = "".join(
        record["chunk"]["choices"][0]["delta"].get("content") or ""
        for record in map(json.loads, recorded_text.splitlines())
        if record["type"] == "chunk"
    )
    assert content.startswith("Here is a key:") and content.endswith("\nand the rest of the answer.")
    assert REDACTED in content and "KEYBODY" not in content


def test_a_key_streamed_in_tool_call_arguments_is_masked(server: LocalServer, tmp_path: Path) -> None:
    arguments = json.dumps({"key": KEYS["rsa"], "user": "ann"})
    text = recorded(server, tmp_path, tool_call_chunks([("c1", "login", arguments)], pieces=9), tools=TOOLS)
    assert_masked(text)
