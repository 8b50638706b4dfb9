"""Recordings keep no secrets: by name, by shape, and the client's own credentials wherever they show.

Every test drives the real ``openai`` client over real HTTP against the local server, then reads
the file as text: a secret is absent when its text is nowhere in the file, whatever the field.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolstitch as ts
from toolstitch.recording._recorder import Recorder
from toolstitch.recording._replay import replay
from toolstitch.recording._secrets import (
    REDACTED,
    LiteralSecrets,
    client_secrets,
    is_secret_key,
    mask_shapes,
)
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

API_KEY = "sk-proj-Zq8RkT3uLm9Vx2Wy7Ab4Cd6Ef"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAv3PEMSECRETLINE1\nPEMSECRETLINE2abcdef==\n"
    "-----END RSA PRIVATE KEY-----"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "login",
            "parameters": {
                "type": "object",
                "properties": {"user": {"type": "string"}, "password": {"type": "string"}},
                "required": ["user", "password"],
            },
        },
    }
]
CALLS = [("call_a", "login", '{"user": "ann", "password": "not-a-secret-of-ours"}')]
MESSAGES = [{"role": "user", "content": "Log me in"}]


def recorded(
    server: LocalServer, tmp_path: Path, script: list[Any], api_key: str = API_KEY, **create: Any
) -> str:
    """Record one stream from a client holding ``api_key``; the file's text."""
    server.enqueue(StreamScript(script))
    client = ts.wrap(server.client(api_key=api_key), record=tmp_path)
    create.setdefault("messages", MESSAGES)
    stream = client.chat.completions.create(model="m", stream=True, **create)
    with stream:
        try:
            for _ in stream:
                pass
        except openai.APIError:
            pass
    (path,) = tmp_path.glob("*.jsonl")
    return path.read_text(encoding="utf-8")


def test_extra_body_keys_the_old_denylist_missed_and_secret_shapes_are_masked(
    server: LocalServer, tmp_path: Path
) -> None:
    text = recorded(
        server,
        tmp_path,
        tool_call_chunks(CALLS),
        tools=TOOLS,
        extra_body={
            "auth": "AUTHVALUE-1234",
            "authorization_code": "AUTHCODE-5678",
            "bearer": "BEARERVALUE-90",
            "xAuthUser": "CAMELAUTH-1234",
            "key_material": PEM,
            "notes": "backup key sk-ant-api03-SHAPEDKEY12345678 and Bearer SHAPEDBEARER123",
            "database": "postgresql://app:DBPASSWORD99@db.internal:5432/prod",
            "conn": "Server=db;User Id=app;Password=ADOPASSWORD77;",
            "nested": [{"deep": {"webhook": "https://hooks.example/x?api_key=QUERYKEY4242&x=1"}}],
            "author": "Ann Author",
            "max_tokens": 50,
        },
    )
    for secret in (
        "AUTHVALUE",
        "AUTHCODE",
        "BEARERVALUE",
        "CAMELAUTH",
        "PEMSECRET",
        "BEGIN RSA PRIVATE KEY",
        "SHAPEDKEY",
        "SHAPEDBEARER",
        "DBPASSWORD",
        "ADOPASSWORD",
        "QUERYKEY",
    ):
        assert secret not in text, secret
    header = json.loads(text.splitlines()[0])
    body = header["request"]["extra_body"]
    assert body["author"] == "Ann Author"  # "author" is not "auth"
    assert body["max_tokens"] == 50  # a token count is not a credential
    assert body["database"] == f"postgresql://app:{REDACTED}@db.internal:5432/prod"  # still useful
    assert header["request"]["tools"] == TOOLS  # a parameter named "password" is kept as sent


def test_the_client_api_key_echoed_in_an_error_text_and_body_is_masked(
    server: LocalServer, tmp_path: Path
) -> None:
    # An in-band error event whose message echoes the key the client sent, a key without any
    # prefix the shape patterns know: only knowing the client's key can mask it.
    echoed = "Zq8RkT3uLm9Vx2Wy7Ab4Cd6Ef"
    error = {"error": {"message": f"Incorrect API key provided: {echoed}", "param": echoed}}
    text = recorded(server, tmp_path, [chunk(delta={"content": "hi"}), error], api_key=echoed)
    assert echoed not in text
    footer = json.loads(text.splitlines()[-1])
    assert footer["outcome"] == "error"
    assert REDACTED in footer["error"]["message"]
    assert footer["error"]["message"].startswith("Incorrect API key provided")


def test_the_client_api_key_is_masked_in_chunks_and_in_messages(server: LocalServer, tmp_path: Path) -> None:
    messages = [{"role": "user", "content": f"my key is {API_KEY}, keep it safe"}]
    script = [chunk(delta={"content": f"You said {API_KEY}"}), chunk(delta={}, finish_reason="stop")]
    text = recorded(server, tmp_path, script, messages=messages)
    assert API_KEY not in text
    assert "keep it safe" in text  # the conversation is kept around the key


def test_with_options_api_key_is_the_one_masked(server: LocalServer, tmp_path: Path) -> None:
    other = "other-0123456789abcdefXYZ"
    server.enqueue(StreamScript([chunk(delta={"content": other}), chunk(delta={}, finish_reason="stop")]))
    client = ts.wrap(server.client(api_key=API_KEY), record=tmp_path).with_options(api_key=other)
    with client.chat.completions.create(model="m", messages=MESSAGES, stream=True) as stream:
        for _ in stream:
            pass
    (path,) = tmp_path.glob("*.jsonl")
    assert other not in path.read_text(encoding="utf-8")


def test_masked_header_values_are_masked_wherever_they_appear(server: LocalServer, tmp_path: Path) -> None:
    echo = chunk(delta={"content": "token echoed: HEADERVALUE-31337"})
    script = [echo, chunk(delta={}, finish_reason="stop")]
    text = recorded(
        server,
        tmp_path,
        script,
        extra_headers={"X-Custom-Auth": "HEADERVALUE-31337"},
        extra_query={"sig": "QUERYVALUE-4242"},
        metadata={"note": "QUERYVALUE-4242"},
    )
    assert "HEADERVALUE" not in text and "QUERYVALUE" not in text


def test_a_recording_with_secrets_masked_still_replays(server: LocalServer, tmp_path: Path) -> None:
    text = recorded(
        server, tmp_path, tool_call_chunks(CALLS), tools=TOOLS, extra_body={"auth": "AUTHVALUE-1234"}
    )
    replayed = replay(io.StringIO(text))
    assert [c.status for c in replayed.tool_calls] == ["ready"]
    assert replayed.tool_calls[0].parsed == {"user": "ann", "password": "not-a-secret-of-ours"}


def test_a_secret_in_a_chunk_nested_900_deep_is_masked() -> None:
    out = io.StringIO()
    recorder = Recorder(out, secrets=[API_KEY])
    deep: Any = API_KEY
    for _ in range(900):
        deep = [deep]
    recorder.on_chunk({"choices": [{"index": 0, "delta": {"x": deep}}]})
    recorder.on_end(None)
    assert recorder.error is None
    assert API_KEY not in out.getvalue()


def test_client_secrets_reads_the_key_and_credential_headers() -> None:
    headers = {"X-Api-Key": "HEADERKEY-12345", "X-Title": "app"}
    client = openai.OpenAI(api_key=API_KEY, default_headers=headers)
    found = client_secrets(client)
    assert API_KEY in found and "HEADERKEY-12345" in found and "app" not in found
    assert client_secrets(None) == [] and client_secrets(object()) == []


@pytest.mark.parametrize(
    "key",
    [
        "auth",
        "Authorization",
        "authorization_code",
        "proxy-authorization",
        "bearer",
        "x-auth-user",
        "authToken",
        "refresh_token",
        "api_key",
        "OPENAI_API_KEY",
        "client_secret",
        "db_password",
        "passwd",
        "pwd",
        "set-cookie",
        "private_key",
        "sessionId",
        "dsn",
        "connection_string",
        "pem",
        "PEM",
        "ssh_key",
        "signingKey",
        "keystore",
        "pkcs12",
        "PRIVATE-KEY",
    ],
)
def test_secret_key_names(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "author",
        "authority",
        "max_tokens",
        "prompt_tokens",
        "model",
        "temperature",
        "keyword",
        "passage",
        "key",
        "prompt_cache_key",
        "idempotency_key",
        "signature",
        "sort_key",
    ],
)
def test_names_that_are_not_secrets(key: str) -> None:
    assert not is_secret_key(key)


def test_shapes_keep_what_is_not_a_secret() -> None:
    text = "max_tokens: 50, see https://example.com/docs and postgresql://db/prod"
    assert mask_shapes(text) == text
    assert "hunter2secret" not in mask_shapes("mysql://root:hunter2secret@localhost/db")
    assert "TOPSECRETX" not in mask_shapes("-----BEGIN PRIVATE KEY-----\nTOPSECRETX")  # cut mid-block


SECRET_TEXT = st.text(min_size=8, max_size=40).filter(lambda s: len(s.strip()) >= 8)


@given(SECRET_TEXT, st.text(max_size=40))
def test_a_known_secret_never_survives_a_write(secret: str, around: str) -> None:
    secrets = LiteralSecrets([secret])
    record = {"a": [around + secret + around], secret: {"k": secret}}
    line = json.dumps(record, ensure_ascii=False)
    assert secrets.found_in(line)
    masked = json.dumps(secrets.mask(record), ensure_ascii=False)
    assert secret not in json.loads(masked)["a"][0]
    assert secret not in json.loads(masked)
