"""Secrets by name (issue 29, class 9): a request field whose name says "credential" is masked in
the recording whatever its value looks like, at any depth, in any case, in every parameter (the
conversation and the tools included), both APIs; only the JSON schemas keep their keys as sent.

The probe: values that no shape matches (they would pass the shape net), under every name a
credential goes by, placed everywhere a request can carry them, recorded through the real
``openai`` client over real HTTP; then the file is read as text and no value may appear in it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

import toolstitch as ts
from toolstitch.testing import LocalServer, StreamScript, response_events, tool_call_chunks

# Every name a credential goes by, in the spellings clients use (case and separators vary).
NAMES = [
    "pem",
    "PEM",
    "private_key",
    "privateKey",
    "PRIVATE-KEY",
    "secret",
    "Secret",
    "secret_key",
    "password",
    "Password",
    "passphrase",
    "api_key",
    "apiKey",
    "API-KEY",
    "x-api-key",
    "token",
    "Token",
    "access_token",
    "id_token",
    "authorization",
    "Authorization",
    "client_secret",
    "credentials",
    "ssh_key",
    "signing_key",
    "pkcs12",
    "keystore",
    "cert_key",
]


def _value(where: str, name: str) -> str:
    # Plain text that no shape recognises: only the name can give it away.
    return f"plainvalue {where} {name} 7f3a9c"


def _secrets(where: str) -> dict[str, Any]:
    return {name: _value(where, name) for name in NAMES}


def _deep(where: str, depth: int) -> Any:
    node: Any = _secrets(where)
    for level in range(depth):
        node = {"level": level, "items": [node]} if level % 2 else [{"wrapper": node}]
    return node


SCHEMA = {
    "type": "object",
    "properties": {"password": {"type": "string"}, "token": {"type": "string"}, "pem": {"type": "string"}},
    "required": ["password"],
}


def _leaks(text: str, where: list[str]) -> list[str]:
    return [_value(w, n) for w in where for n in NAMES if _value(w, n) in text]


def _grouped(leaks: list[str]) -> str:
    """What leaked, by place: the names that kept their value there."""
    by_place: dict[str, list[str]] = {}
    for leak in leaks:
        _, place, name, _ = leak.split(" ")
        by_place.setdefault(place, []).append(name)
    return "; ".join(f"{place}: {' '.join(names)}" for place, names in by_place.items())


def _read(tmp_path: Path) -> str:
    (path,) = tmp_path.glob("*.jsonl")
    return path.read_text(encoding="utf-8")


def test_chat_request_fields_named_as_credentials_are_masked_everywhere(
    server: LocalServer, tmp_path: Path
) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("call_a", "login", '{"password": "x"}')])))
    client = ts.wrap(server.client(), record=tmp_path)
    tools = [{"type": "function", "function": {"name": "login", "parameters": SCHEMA}, **_secrets("tool")}]
    stream = client.chat.completions.create(
        model="m",
        stream=True,
        messages=[{"role": "user", "content": "hi", **_secrets("message")}],
        tools=tools,  # type: ignore[list-item]
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "out", "schema": SCHEMA, **_secrets("format")},
        },  # type: ignore[typeddict-unknown-key]
        metadata=_secrets("metadata"),
        extra_body={"top": _secrets("extra"), "deep": _deep("deep", 60), **_secrets("body")},
    )
    with stream:
        for _ in stream:
            pass
    text = _read(tmp_path)
    where = ["tool", "message", "format", "metadata", "extra", "deep", "body"]
    assert _leaks(text, where) == [], _grouped(_leaks(text, where))
    header = json.loads(text.splitlines()[0])
    request = header["request"]
    # The schemas are kept as sent: their keys are parameter names, and replay checks against them.
    assert request["tools"][0]["function"]["parameters"] == SCHEMA
    assert request["response_format"]["json_schema"]["schema"] == SCHEMA
    assert request["messages"][0]["content"] == "hi"  # the conversation stays evidence
    assert ts.replay(next(tmp_path.glob("*.jsonl"))).tool_calls[0].name == "login"


@pytest.mark.skipif(not hasattr(openai.OpenAI(api_key="x"), "responses"), reason="no Responses API")
def test_responses_request_fields_named_as_credentials_are_masked_everywhere(
    server: LocalServer, tmp_path: Path
) -> None:
    server.enqueue(StreamScript.responses(response_events([("call_a", "login", '{"password": "x"}')])))
    client = ts.wrap(server.client(), record=tmp_path)
    tools: list[Any] = [
        {"type": "function", "name": "login", "parameters": SCHEMA, **_secrets("tool")},
        # A remote MCP server: its credentials travel in the tool itself.
        {
            "type": "mcp",
            "server_label": "crm",
            "server_url": "https://mcp.example.com/sse",
            "headers": _secrets("mcp_headers"),
            **_secrets("mcp"),
        },
    ]
    stream = client.responses.create(
        model="m",
        stream=True,
        input=[{"role": "user", "content": "hi", **_secrets("input")}],
        tools=tools,
        text={"format": {"type": "json_schema", "name": "out", "schema": SCHEMA, **_secrets("text")}},  # type: ignore[typeddict-unknown-key]
        extra_body={"deep": _deep("deep", 60)},
    )
    with stream:
        for _ in stream:
            pass
    text = _read(tmp_path)
    found = _leaks(text, ["tool", "mcp_headers", "mcp", "input", "text", "deep"])
    assert found == [], _grouped(found)
    request = json.loads(text.splitlines()[0])["request"]
    assert request["tools"][0]["parameters"] == SCHEMA
    assert request["tools"][1]["server_url"] == "https://mcp.example.com/sse"
    assert request["text"]["format"]["schema"] == SCHEMA


def test_a_credential_nested_900_deep_in_a_request_is_masked(server: LocalServer, tmp_path: Path) -> None:
    """Deeper than Python's recursion limit: the walk holds no frame per level, and the stream
    flows on whatever the recorder does."""
    server.enqueue(StreamScript(tool_call_chunks([("call_a", "login", "{}")])))
    client = ts.wrap(server.client(), record=tmp_path)
    stream = client.chat.completions.create(
        model="m",
        stream=True,
        messages=[{"role": "user", "content": "hi"}],
        extra_body={"deep": _deep("far", 450)},
    )
    with stream:
        for _ in stream:
            pass
    assert [c.name for c in stream.tool_calls] == ["login"]
    assert _leaks(_read(tmp_path), ["far"]) == []
