"""The local test server, exercised with the real ``openai`` client over real HTTP (sync and async).

Other test suites trust this server to deliver exactly the scripted bytes, to fail the way a dropped
connection fails, and to reject broken histories the way OpenAI does; these tests hold it to that.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.corpus import CORPUS, ProviderStream
from toolstitch.testing import (
    ErrorReply,
    JSONReply,
    LocalServer,
    StreamScript,
    check_messages_h01_h04,
    chunk,
    sse_body,
    tool_call_chunks,
)

USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
# Non-ASCII arguments, so fragment=1 cuts UTF-8 characters and the SSE event framing alike.
CALLS = [
    ("call_a", "get_weather", '{"city": "Zürich", "note": "雨\\u00e9 \\"q\\""}'),
    ("call_b", "get_time", '{"tz": "Europe/Zürich"}'),
]
SCRIPT = [
    chunk(delta={"role": "assistant", "content": "Ça va "}),
    *tool_call_chunks(CALLS, usage=USAGE),
]


def _release() -> tuple[int, int]:
    major, minor = openai.__version__.split(".")[:2]
    return int(major), int(minor)


# What the plain SDK raises while iterating a body cut mid-stream: from openai 3.14.0 on it maps the
# transport's error to APIConnectionError itself; older releases let the transport's own
# RemoteProtocolError through (httpx2's from 3.0, httpx's before). toolstitch's wrapped streams
# raise APIConnectionError on every release (tests/client/test_transport.py).
CUT_ERROR: type[BaseException] = (
    openai.APIConnectionError
    if _release() >= (3, 14)
    else importlib.import_module("httpx2" if _release() >= (3, 0) else "httpx").RemoteProtocolError
)


def stream_dicts(server: LocalServer, **create: Any) -> list[dict[str, Any]]:
    """Stream one request with the sync client; chunks as the dicts the SDK decoded."""
    request = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}], **create}
    with server.client() as client:
        stream = client.chat.completions.create(stream=True, **request)
        return [c.to_dict() for c in stream]


# ----------------------------------------------------------------------------- streaming


@pytest.mark.parametrize("fragment", [None, 1, 7])
def test_stream_decodes_to_the_scripted_chunks_however_fragmented(
    server: LocalServer, fragment: int | None
) -> None:
    server.enqueue(StreamScript(SCRIPT, fragment=fragment))
    assert stream_dicts(server) == SCRIPT


async def test_async_client_decodes_a_byte_by_byte_stream(server: LocalServer) -> None:
    server.enqueue(StreamScript(SCRIPT), StreamScript(SCRIPT, fragment=1))
    async with server.async_client() as client:
        runs = []
        for _ in range(2):
            stream = await client.chat.completions.create(model="test-model", messages=[], stream=True)
            runs.append([c.to_dict() async for c in stream])
    assert runs[0] == runs[1] == SCRIPT


def test_fragment_really_cuts_the_body_into_writes_of_n_bytes() -> None:
    script = StreamScript(SCRIPT, fragment=5)
    writes = script.writes()
    assert b"".join(writes) == sse_body(SCRIPT)
    assert {len(w) for w in writes[:-1]} == {5}
    # A multi-byte character is split across two writes somewhere in this body.
    assert any(not _decodes(w) for w in writes)


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("fragment", [None, 3])
def test_cut_stream_raises_api_connection_error_after_the_sent_chunks(
    server: LocalServer, fragment: int | None
) -> None:
    # The server omits the final zero-length HTTP chunk; the transport reports an incomplete chunked
    # body, which the SDK (from 3.14.0) re-raises as APIConnectionError during iteration.
    server.enqueue(StreamScript(SCRIPT, cut_after=4, fragment=fragment))
    received: list[object] = []
    with server.client() as client:
        stream = client.chat.completions.create(model="test-model", messages=[], stream=True)
        with pytest.raises(CUT_ERROR):
            for c in stream:
                received.append(c.to_dict())
    assert received == SCRIPT[:4]


async def test_cut_stream_raises_api_connection_error_async(server: LocalServer) -> None:
    server.enqueue(StreamScript(SCRIPT, cut_after=2, fragment=2))
    received: list[object] = []
    async with server.async_client() as client:
        stream = await client.chat.completions.create(model="test-model", messages=[], stream=True)
        with pytest.raises(CUT_ERROR):
            async for c in stream:
                received.append(c.to_dict())
    assert received == SCRIPT[:2]


def test_raw_string_items_are_sent_verbatim(server: LocalServer) -> None:
    first = chunk(delta={"role": "assistant", "content": "partial"})
    error_event = 'event: error\ndata: {"error": {"message": "upstream overloaded"}}\n\n'
    server.enqueue(StreamScript([": keep-alive\n\n", first, error_event], done=False))
    received: list[object] = []
    with server.client() as client:
        stream = client.chat.completions.create(model="test-model", messages=[], stream=True)
        with pytest.raises(openai.APIError, match="upstream overloaded"):
            for c in stream:
                received.append(c.to_dict())
    assert received == [first]


def test_without_done_the_stream_simply_ends(server: LocalServer) -> None:
    server.enqueue(StreamScript(SCRIPT[:3], done=False))
    assert stream_dicts(server) == SCRIPT[:3]


def test_hold_keeps_the_rest_of_the_stream_back_until_its_event_is_set(server: LocalServer) -> None:
    held, set_at = threading.Event(), []

    def release() -> None:
        set_at.append(time.monotonic())
        held.set()

    server.enqueue(StreamScript(SCRIPT, hold={2: held}))
    timer = threading.Timer(0.2, release)
    arrived: list[float] = []
    with server.client() as client:
        stream = client.chat.completions.create(stream=True, model="m", messages=[])
        timer.start()
        got = []
        for c in stream:
            got.append(c.to_dict())
            arrived.append(time.monotonic())
    timer.join()
    assert got == SCRIPT  # nothing lost or reordered
    # The third write came only after the event was set, however late that was.
    assert set_at[0] <= arrived[2]


@pytest.mark.parametrize(
    "hold", [{-1: threading.Event()}, {"1": threading.Event()}, {True: threading.Event()}, {1: "set"}]
)
def test_hold_refuses_what_is_not_a_write_number_and_an_event(hold: Any) -> None:
    with pytest.raises(ValueError, match="hold"):
        StreamScript(SCRIPT, hold=hold)


# ----------------------------------------------------------------------------- helpers


def test_tool_call_chunks_is_an_openai_shaped_interleaved_stream() -> None:
    chunks = tool_call_chunks(CALLS, pieces=4, usage=USAGE)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    fragments = [f for c in chunks[1:-2] for f in c["choices"][0]["delta"]["tool_calls"]]
    headers = [f for f in fragments if "id" in f]
    assert [(h["index"], h["id"], h["type"], h["function"]) for h in headers] == [
        (0, "call_a", "function", {"name": "get_weather", "arguments": ""}),
        (1, "call_b", "function", {"name": "get_time", "arguments": ""}),
    ]
    for index, (_, _, arguments) in enumerate(CALLS):
        parts = [f["function"]["arguments"] for f in fragments if f["index"] == index]
        assert "".join(parts) == arguments
        assert len([p for p in parts if p]) == 4
    assert [f["index"] for f in fragments[:4]] == [0, 1, 0, 1]  # round-robin
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == USAGE


def test_tool_call_chunks_without_interleave_keeps_each_call_together() -> None:
    chunks = tool_call_chunks(CALLS, interleave=False, content="Let me check.")
    assert chunks[1]["choices"][0]["delta"] == {"content": "Let me check."}
    indices = [c["choices"][0]["delta"]["tool_calls"][0]["index"] for c in chunks[2:-1]]
    assert indices == sorted(indices) and set(indices) == {0, 1}


# ----------------------------------------------------------------------------- other replies


def test_error_reply_500_raises_internal_server_error(server: LocalServer) -> None:
    body = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}
    server.enqueue(ErrorReply(500, body))
    with server.client() as client, pytest.raises(openai.InternalServerError) as err:
        client.chat.completions.create(model="test-model", messages=[], stream=True)
    assert err.value.status_code == 500 and err.value.body == body["error"]


async def test_error_reply_429_raises_rate_limit_error_async(server: LocalServer) -> None:
    server.enqueue(ErrorReply(429, headers={"retry-after": "0"}))
    async with server.async_client() as client:
        with pytest.raises(openai.RateLimitError) as err:
            await client.chat.completions.create(model="test-model", messages=[], stream=True)
    assert err.value.response.headers["retry-after"] == "0"


def test_empty_script_answers_500_saying_so(server: LocalServer) -> None:
    with server.client() as client, pytest.raises(openai.InternalServerError, match="empty"):
        client.chat.completions.create(model="test-model", messages=[], stream=True)


def test_queue_is_fifo_and_handler_answers_when_it_is_empty(server: LocalServer) -> None:
    server.handler = lambda body: StreamScript([chunk(delta={"content": body["model"]})])
    server.enqueue(StreamScript([chunk(delta={"content": "queued"})]))
    first, second = stream_dicts(server), stream_dicts(server, model="from-handler")
    assert first[0]["choices"][0]["delta"] == {"content": "queued"}
    assert second[0]["choices"][0]["delta"] == {"content": "from-handler"}


def test_non_stream_request_gets_a_completion_merged_from_the_script(server: LocalServer) -> None:
    server.enqueue(StreamScript(SCRIPT))
    with server.client() as client:
        completion = client.chat.completions.create(model="test-model", messages=[])
    message = completion.choices[0].message
    assert completion.object == "chat.completion"
    assert completion.choices[0].finish_reason == "tool_calls"
    assert message.content == "Ça va "
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []] == [
        (i, n, a) for i, n, a in CALLS
    ]
    assert completion.usage is not None and completion.usage.total_tokens == 12


def test_json_reply_and_models_list_pass_through(server: LocalServer) -> None:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "hello"},
            }
        ],
    }
    server.enqueue(JSONReply(body))
    with server.client() as client:
        completion = client.chat.completions.create(model="m", messages=[])
        models = client.models.list()
    assert completion.choices[0].message.content == "hello"
    assert [m.id for m in models.data] == ["test-model"]


def test_requests_and_headers_are_recorded_in_order(server: LocalServer) -> None:
    server.enqueue(StreamScript(SCRIPT), StreamScript(SCRIPT))
    stream_dicts(server, model="first")
    stream_dicts(server, model="second", extra_headers={"X-Trace": "t-2"})
    assert [r["model"] for r in server.requests] == ["first", "second"]
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert server.request_headers[0]["authorization"] == "Bearer test"
    assert server.request_headers[1]["x-trace"] == "t-2"


# ----------------------------------------------------------------------------- history check

ASSISTANT_AB = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in CALLS
    ],
}
USER = {"role": "user", "content": "weather and time?"}


def tool(call_id: str) -> dict[str, str]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


H01 = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message"
    " with 'tool_calls'."
)
H03 = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each"
    " 'tool_call_id'. The following tool_call_ids did not have response messages: "
)
BROKEN = {
    "H01 orphan tool message": (
        [USER, tool("call_a")],
        H01,
        "messages.[1].role",
    ),
    "H02 unknown tool_call_id": (
        [USER, ASSISTANT_AB, tool("call_a"), tool("call_zz")],
        "Invalid parameter: 'tool_call_id' of 'call_zz' not found in 'tool_calls' of previous message.",
        "messages.[3].tool_call_id",
    ),
    "H03 missing result": (
        [USER, ASSISTANT_AB, tool("call_b"), USER],
        H03 + "call_a",
        "messages.[1].role",
    ),
    "H03 trailing calls without results": (
        [USER, ASSISTANT_AB],
        H03 + "call_a, call_b",
        "messages.[1].role",
    ),
    "H04 message between calls and results": (
        [USER, ASSISTANT_AB, USER, tool("call_a"), tool("call_b")],
        H03 + "call_a, call_b",
        "messages.[1].role",
    ),
}


@pytest.mark.parametrize("case", BROKEN)
def test_history_check_answers_400_with_openai_text(case: str) -> None:
    messages, text, param = BROKEN[case]
    assert check_messages_h01_h04(messages) == text
    with LocalServer(check_history=True) as server:
        server.enqueue(StreamScript(SCRIPT))
        with server.client() as client, pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model="m", messages=messages, stream=True)  # type: ignore[arg-type]
        assert err.value.body == {
            "message": text,
            "type": "invalid_request_error",
            "param": param,
            "code": None,
        }
        assert len(server.requests) == 1  # recorded even though rejected
        # The rejected request did not consume the queued reply.
        assert stream_dicts(server) == SCRIPT


async def test_history_check_accepts_a_valid_history_async() -> None:
    messages = [USER, ASSISTANT_AB, tool("call_b"), tool("call_a"), USER, ASSISTANT_AB]
    messages += [tool("call_a"), tool("call_b")]
    assert check_messages_h01_h04(messages) is None
    server = LocalServer()
    server.check_history = True
    with server:
        server.enqueue(StreamScript(SCRIPT))
        async with server.async_client() as client:
            stream = await client.chat.completions.create(
                model="m",
                messages=messages,  # type: ignore[arg-type]
                stream=True,
            )
            assert [c.to_dict() async for c in stream] == SCRIPT


def test_history_check_is_off_by_default(server: LocalServer) -> None:
    server.enqueue(StreamScript(SCRIPT))
    assert stream_dicts(server, messages=[tool("call_a")]) == SCRIPT


# ------------------------------------------------------------------ real provider bodies (corpus)


@pytest.mark.parametrize("provider_stream", CORPUS, ids=lambda s: s.name)
def test_real_provider_body_replays_one_chunk_per_data_line(
    server: LocalServer, provider_stream: ProviderStream, tmp_path: Path
) -> None:
    path = tmp_path / "body.sse"
    path.write_bytes(provider_stream.body.encode("utf-8"))
    raw = path.read_bytes()
    script = StreamScript.from_sse(path)
    assert sse_body(script.chunks, done=False) == raw  # served unchanged
    data = [ln[5:].strip() for ln in raw.decode().splitlines() if ln.startswith("data:")]
    data = [d for d in data if d != "[DONE]"]
    expected = provider_stream.expected
    server.enqueue(script)
    received: list[object] = []
    with server.client() as client:
        stream = client.chat.completions.create(model="m", messages=[], stream=True)
        if expected.get("error"):  # ends in an in-band error event: the SDK raises on it
            with pytest.raises(openai.APIError):
                for c in stream:
                    received.append(c)
            assert len(received) == len(data) - 1
        else:
            received = list(stream)
            assert len(received) == len(data)


def test_from_sse_accepts_text_and_counts_cut_after_in_events(server: LocalServer) -> None:
    text = CORPUS[0].body
    server.enqueue(StreamScript.from_sse(text, cut_after=1))
    with server.client() as client:
        stream = client.chat.completions.create(model="m", messages=[], stream=True)
        with pytest.raises(CUT_ERROR):
            for _ in stream:
                pass


# ------------------------------------------------------------------ stored completions, examples


def http(server: LocalServer, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One plain HTTP request (any openai release: older ones lack the stored-completions calls)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.base_url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_non_streamed_completions_are_stored_and_served_like_openais_stored_completions(
    server: LocalServer,
) -> None:
    server.enqueue(StreamScript([*SCRIPT[:1], chunk(delta={}, finish_reason="stop")], done=True))
    with server.client() as client:
        made = client.chat.completions.create(model="test-model", messages=[])
    assert http(server, "GET", f"/chat/completions/{made.id}") == (200, made.to_dict())
    status, page = http(server, "GET", "/chat/completions")
    assert status == 200 and [c["id"] for c in page["data"]] == [made.id] and page["has_more"] is False
    status, updated = http(server, "POST", f"/chat/completions/{made.id}", {"metadata": {"k": "v"}})
    assert status == 200 and updated["metadata"] == {"k": "v"}
    status, messages = http(server, "GET", f"/chat/completions/{made.id}/messages")
    assert status == 200 and [m["content"] for m in messages["data"]] == ["Ça va "]
    deleted = {"id": made.id, "object": "chat.completion.deleted", "deleted": True}
    assert http(server, "DELETE", f"/chat/completions/{made.id}") == (200, deleted)
    assert http(server, "GET", f"/chat/completions/{made.id}")[0] == 404
    assert http(server, "DELETE", f"/chat/completions/{made.id}")[0] == 404
    assert http(server, "GET", "/chat/completions")[1]["data"] == []


def test_examples_answer_what_nothing_was_scripted_for_as_the_sdks_mock_server_does() -> None:
    with LocalServer(examples=True) as server, server.client(_strict_response_validation=True) as client:
        stream = client.chat.completions.create(model="m", messages=[], stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello!"
        assert client.chat.completions.create(model="m", messages=[]).choices[0].message.content == "Hello!"
        status, example = http(server, "GET", "/chat/completions/made-up")
        assert status == 200 and example["id"] == "made-up"
        if hasattr(client.chat.completions, "retrieve"):  # openai >= 1.6x: strict models accept them
            assert client.chat.completions.retrieve("made-up").id == "made-up"
            assert client.chat.completions.delete("made-up").deleted is True
            assert [m.role for m in client.chat.completions.messages.list("made-up")] == ["assistant"]
            assert client.chat.completions.update("x", metadata={"a": "b"}).metadata == {"a": "b"}


def test_without_examples_unknown_paths_and_ids_are_404(server: LocalServer) -> None:
    assert http(server, "GET", "/chat/completions/nope")[0] == 404
    assert http(server, "GET", "/chat/completions/nope/messages")[0] == 404
    assert http(server, "POST", "/chat/completions/nope/messages", {})[0] == 404
    assert http(server, "DELETE", "/embeddings")[0] == 404


def test_two_hundred_concurrent_streams_are_all_served() -> None:
    """The listen backlog holds a burst of connections: 200 streams opened at once by the real async
    client all succeed (the standard library's default backlog of 5 refused most of them)."""
    script = [chunk(delta={"role": "assistant", "content": "ok"}), chunk(delta={}, finish_reason="stop")]
    with LocalServer(handler=lambda body: StreamScript(script)) as server:

        async def one(client: openai.AsyncOpenAI) -> str:
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        async def burst() -> list[str]:
            async with server.async_client() as client:
                return await asyncio.gather(*(one(client) for _ in range(200)))

        assert asyncio.run(burst()) == ["ok"] * 200
    assert len(server.requests) == 200
