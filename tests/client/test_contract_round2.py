"""No way around the request's contract (issue 22, round 2), over real HTTP with the real SDK.

The contract (``tools``, ``functions``, ``tool_choice``, ``function_call``, ``parallel_tool_calls``) is
read by one function wherever the SDK sends it from: ``create``'s keyword arguments, ``extra_body``
over them, a low-level ``post``'s body (a mapping or JSON text, ``content=`` included) with
``extra_json`` over it, ``request()``'s options. A tuple (any sequence) of tools is read as the list
it is; whatever cannot be read as a contract refuses every call (``ContractViolation`` saying what
could not be read), never "tools unknown". Every path the SDK would send to the chat-completions
endpoint is stitched or warned.
"""

from __future__ import annotations

import inspect
import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai._models import FinalRequestOptions
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import toolstitch as ts
from toolstitch.client._lowlevel import _is_chat
from toolstitch.errors import ContractViolation, SchemaViolation, UnknownTool, UnstitchedStreamWarning
from toolstitch.recording._contract import read_contract
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks

MESSAGES = [{"role": "user", "content": "hi"}]
#: Whether this openai release sends raw request content (``post(content=...)``,
#: ``FinalRequestOptions.content``, bytes as a body): later releases than the 1.55.3 floor.
RAW_CONTENT = "content" in inspect.signature(openai.OpenAI.post).parameters and "content" in getattr(
    FinalRequestOptions, "model_fields", {}
)
needs_raw_content = pytest.mark.skipif(
    not RAW_CONTENT, reason="this openai release cannot send raw request content (post(content=...))"
)
RAW_PLACES = ("post content bytes", "post body bytes", "request content")
STREAM = {"stream": True, "stream_cls": openai.Stream[ChatCompletionChunk]}
ASTREAM = {"stream": True, "stream_cls": openai.AsyncStream[ChatCompletionChunk]}
SCHEMA = {
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
    "additionalProperties": False,
}
F = {"type": "function", "function": {"name": "f", "parameters": SCHEMA}}
FN = F["function"]
#: One call of each kind: offered and valid, never offered, offered with arguments breaking its schema.
CALLS = [("c1", "f", '{"x": 1}'), ("c2", "g", '{"x": 2}'), ("c3", "f", '{"x": "not a number"}')]
HELD = ["ready", "invalid", "invalid"]


@pytest.fixture
def no_unstitched_warning() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)
        yield


def statuses(stream: Any) -> list[str]:
    return [c.status for c in stream.tool_calls]


def held_to_the_contract(stream: Any) -> None:
    """The calls were checked against the offered tool ``f`` and its schema."""
    assert isinstance(stream, ts.StitchedStream | ts.AsyncStitchedStream)
    calls = stream.tool_calls
    assert [c.status for c in calls] == HELD
    assert isinstance(calls[1].error, UnknownTool)
    assert isinstance(calls[2].error, SchemaViolation)


def every_call_refused(stream: Any, what: str) -> None:
    calls = stream.tool_calls
    assert calls and all(c.status == "invalid" for c in calls), statuses(stream)
    assert all(isinstance(c.error, ContractViolation) for c in calls)
    assert "could not be read" in str(calls[0].error) and what in str(calls[0].error)
    assert {a.code for a in stream.anomalies} >= {"contract_violation"}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": MESSAGES, "stream": True, **fields}


# ----------------------------------------------------------------------------- readable sequences

#: Every place the SDK sends the contract from, each given tools as a tuple: ``send(client, tools)``.
PLACES: dict[str, Callable[[Any, Any], Any]] = {
    "tools=": lambda c, t: c.chat.completions.create(model="m", messages=MESSAGES, stream=True, tools=t),
    "functions=": lambda c, t: c.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, functions=tuple(x["function"] for x in t)
    ),
    "extra_body tools": lambda c, t: c.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, extra_body={"tools": t}
    ),
    "extra_body functions": lambda c, t: c.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, extra_body={"functions": tuple(x["function"] for x in t)}
    ),
    "extra_body over tools=": lambda c, t: c.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, tools=[], extra_body={"tools": t}
    ),
    "raw response": lambda c, t: c.chat.completions.with_raw_response.create(
        model="m", messages=MESSAGES, stream=True, extra_body={"tools": t}
    ).parse(),
    "post body": lambda c, t: c.post(
        "/chat/completions", body=body(tools=t), cast_to=ChatCompletion, **STREAM
    ),
    "post extra_json": lambda c, t: c.post(
        "/chat/completions",
        body=body(),
        options={"extra_json": {"tools": t}},
        cast_to=ChatCompletion,
        **STREAM,
    ),
    "post content bytes": lambda c, t: c.post(
        "/chat/completions", content=json.dumps(body(tools=t)).encode(), cast_to=ChatCompletion, **STREAM
    ),
    "post body bytes": lambda c, t: c.post(
        "/chat/completions", body=json.dumps(body(tools=t)).encode(), cast_to=ChatCompletion, **STREAM
    ),
    "request json_data": lambda c, t: c.request(
        ChatCompletion,
        FinalRequestOptions.construct(method="post", url="/chat/completions", json_data=body(tools=t)),
        **STREAM,
    ),
    "request content": lambda c, t: c.request(
        ChatCompletion,
        FinalRequestOptions.construct(
            method="post", url="/chat/completions", content=json.dumps(body(tools=t)).encode()
        ),
        **STREAM,
    ),
}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK's: bytes as body
@pytest.mark.parametrize("place", PLACES)
def test_a_tuple_of_tools_is_the_contract_wherever_it_is_sent(
    server: LocalServer, place: str, no_unstitched_warning: None
) -> None:
    if place in RAW_PLACES and not RAW_CONTENT:
        pytest.skip("this openai release cannot send raw request content (post(content=...))")
    server.enqueue(StreamScript(tool_call_chunks(CALLS)))
    client = ts.wrap(server.client())
    stream = PLACES[place](client, (F,))
    with stream:
        stream.until_done()
    held_to_the_contract(stream)
    sent = server.requests[-1]
    assert sent.get("tools") == [F] or sent.get("functions") == [FN]


async def test_async_a_tuple_of_tools_is_the_contract(
    server: LocalServer, no_unstitched_warning: None
) -> None:
    server.enqueue(*(StreamScript(tool_call_chunks(CALLS)) for _ in range(3)))
    client = ts.wrap(server.async_client())
    streams = [
        await client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, extra_body={"tools": (F,)}
        ),
        await client.chat.completions.create(model="m", messages=MESSAGES, stream=True, functions=(FN,)),
    ]
    if RAW_CONTENT:
        streams.append(
            await client.post(
                "/chat/completions",
                content=json.dumps(body(tools=[F])).encode(),
                cast_to=ChatCompletion,
                **ASTREAM,
            )
        )
    for stream in streams:
        async with stream:
            await stream.until_done()
        held_to_the_contract(stream)


@needs_raw_content
@pytest.mark.parametrize("text", [json.dumps(body(tools=[F])), json.dumps(body(tools=[F])).encode()])
def test_content_as_text_or_bytes_is_read(server: LocalServer, text: Any) -> None:
    server.enqueue(StreamScript(tool_call_chunks(CALLS)))
    client = ts.wrap(server.client())
    stream = client.post("/chat/completions", content=text, cast_to=ChatCompletion, **STREAM)
    stream.until_done()
    held_to_the_contract(stream)


# ----------------------------------------------------------------------------- what cannot be read

#: Contracts that cannot be read, each with a word the refusal must name.
UNREADABLE: dict[str, tuple[dict[str, Any], str]] = {
    "tools a dict": ({"tools": {"f": F}}, "tools is a dict"),
    "tools a string": ({"tools": json.dumps([F])}, "tools is a str"),
    "tools a number": ({"tools": 1}, "tools is a int"),
    "tools true": ({"tools": True}, "tools is a bool"),
    "a tool that is a string": ({"tools": [F, "g"]}, "tools[1]"),
    "a tool that is a list": ({"tools": [[F]]}, "tools[0]"),
    "a function without a name": (
        {"tools": [{"type": "function", "function": {"parameters": SCHEMA}}]},
        "name",
    ),
    "parameters as text": (
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": json.dumps(SCHEMA)}}]},
        "parameters",
    ),
    "a tool type that is not a string": ({"tools": [{**F, "type": 3}]}, "type"),
    "one name, two definitions": (
        {"tools": [F, {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
        "offered twice",
    ),
    "a tool and a function of one name": ({"tools": [F], "functions": [{"name": "f"}]}, "offered twice"),
    "functions a dict": ({"functions": {"f": FN}}, "functions is a dict"),
    "a function that is a string": ({"functions": ["f"]}, "functions[0]"),
    "tool_choice a list": ({"tools": [F], "tool_choice": ["none"]}, "tool_choice"),
    "tool_choice a number": ({"tools": [F], "tool_choice": 0}, "tool_choice"),
    "function_call a list": ({"functions": [FN], "function_call": ["f"]}, "function_call"),
    "parallel_tool_calls a string": ({"tools": [F], "parallel_tool_calls": "false"}, "parallel_tool_calls"),
    "parallel_tool_calls zero": ({"tools": [F], "parallel_tool_calls": 0}, "parallel_tool_calls"),
    "allowed_tools a string": (
        {
            "tools": [F],
            "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": "f"}},
        },
        "allowed_tools",
    ),
}


def refused_everywhere(server: LocalServer, fields: dict[str, Any], what: str, *, extra: bool) -> None:
    server.enqueue(StreamScript(tool_call_chunks(CALLS)))
    client = ts.wrap(server.client())
    if extra:
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True, extra_body=fields)
    else:
        stream = client.post("/chat/completions", body=body(**fields), cast_to=ChatCompletion, **STREAM)
    with stream:
        stream.until_done()
    every_call_refused(stream, what)


@pytest.mark.parametrize("case", UNREADABLE)
def test_an_unreadable_contract_in_extra_body_refuses_every_call(server: LocalServer, case: str) -> None:
    fields, what = UNREADABLE[case]
    refused_everywhere(server, fields, what, extra=True)


@pytest.mark.parametrize("case", UNREADABLE)
def test_an_unreadable_contract_in_a_post_body_refuses_every_call(server: LocalServer, case: str) -> None:
    fields, what = UNREADABLE[case]
    refused_everywhere(server, fields, what, extra=False)


def test_unreadable_keyword_arguments_refuse_every_call(server: LocalServer) -> None:
    # What the SDK itself sends for them does not matter: toolstitch cannot read them as offered.
    server.enqueue(*(StreamScript(tool_call_chunks(CALLS)) for _ in range(3)))
    client = ts.wrap(server.client())
    for kwargs, what in (
        ({"tools": {"f": F}}, "tools is a dict"),
        ({"tools": [F], "tool_choice": ("none",)}, "tool_choice"),
        ({"tools": [F], "parallel_tool_calls": "no"}, "parallel_tool_calls"),
    ):
        with client.chat.completions.create(model="m", messages=MESSAGES, stream=True, **kwargs) as stream:
            stream.until_done()
        every_call_refused(stream, what)


def test_a_one_shot_iterator_in_extra_body_and_a_non_mapping_extra_body_refuse(server: LocalServer) -> None:
    contract = read_contract({"extra_body": {"tools": iter([F])}})
    assert contract.unreadable is not None and "not a list" in contract.unreadable
    assert read_contract({"extra_body": ["tools"]}).unreadable == "extra_body is a list, not a mapping"

    class Hostile(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            raise RuntimeError("boom")

    assert read_contract(Hostile()).unreadable == "reading it raised RuntimeError"


def test_the_sdk_not_given_sentinels_constrain_nothing() -> None:
    contract = read_contract(
        {"tools": (F,), "tool_choice": openai.NOT_GIVEN, "parallel_tool_calls": openai.NOT_GIVEN}
    )
    assert contract.unreadable is None and contract.tools == [F]
    assert contract.tool_choice is None and contract.parallel_tool_calls is None


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{"tools": [], "tools": [' + json.dumps(F).encode() + b"]}", "appears twice"),
        (b'{"model": "m", "temperature": NaN}', "not JSON"),
        (b"[1, 2]", "not an object"),
        (b"\xff{}", "not UTF-8"),
        (b"\xef\xbb\xbf{}", "not JSON"),
        (b"", "not JSON"),
    ],
)
def test_content_toolstitch_cannot_read_is_not_stitched_and_warns(
    server: LocalServer, content: bytes, why: str
) -> None:
    plain = server.client()
    wrapped = ts.wrap(plain)
    sent: list[Any] = []

    def post(path: str, **kwargs: Any) -> Any:
        sent.append(kwargs["content"])
        return "the SDK's result"

    plain.post = post  # type: ignore[method-assign,assignment]
    with pytest.warns(UnstitchedStreamWarning, match=why):
        assert (
            wrapped.post("/chat/completions", content=content, cast_to=ChatCompletion, **STREAM)
            == "the SDK's result"
        )
    assert sent == [content]


def test_content_that_is_a_stream_of_bytes_is_not_read_and_warns(server: LocalServer) -> None:
    plain = server.client()
    wrapped = ts.wrap(plain)
    chunks = iter([json.dumps(body(tools=[F])).encode()])
    plain.post = lambda path, **kwargs: kwargs["content"]  # type: ignore[method-assign,assignment]
    with pytest.warns(UnstitchedStreamWarning, match="not a mapping of the request's fields or JSON text"):
        assert wrapped.post("/chat/completions", content=chunks, cast_to=ChatCompletion, **STREAM) is chunks
    assert next(chunks)  # not consumed: the SDK sends all of it


# ----------------------------------------------------------------------------- stitch, tool_calls, replay


def test_stitch_and_tool_calls_read_their_contract_the_same_way() -> None:
    chunks = tool_call_chunks(CALLS)
    held_to_the_contract(ts.stitch(chunks, tools=(F,)).until_done())
    every_call_refused(ts.stitch(chunks, tools={"f": F}).until_done(), "tools is a dict")
    every_call_refused(ts.stitch(chunks, tools=[F], tool_choice=("none",)).until_done(), "tool_choice")
    completion = ts.stitch(chunks).until_done().get_final_completion()  # tools unknown: said explicitly
    assert [c.status for c in ts.calls_of(completion, tools=(F,))] == HELD
    refused = ts.calls_of(completion, tools=[F], parallel_tool_calls="false")  # type: ignore[arg-type]
    assert [type(c.error) for c in refused] == [ContractViolation] * 3


@pytest.mark.parametrize(
    "create",
    [
        {"extra_body": {"tools": (F,)}},
        {"extra_body": {"tools": {"f": F}}},
        {"functions": (FN,)},
        {"tools": "f"},
    ],
    ids=["extra_body tuple", "extra_body dict", "functions tuple", "tools a string"],
)
def test_a_replay_holds_calls_to_the_contract_the_live_stream_read(
    server: LocalServer, tmp_path: Path, create: dict[str, Any]
) -> None:
    server.enqueue(StreamScript(tool_call_chunks(CALLS)))
    client = ts.wrap(server.client(), record=tmp_path)
    with client.chat.completions.create(model="m", messages=MESSAGES, stream=True, **create) as stream:
        stream.until_done()
    live = [(c.status, type(c.error).__name__) for c in stream.tool_calls]
    replayed = ts.replay(next(tmp_path.glob("*.jsonl")))
    assert [(c.status, type(c.error).__name__) for c in replayed.tool_calls] == live
    assert "ready" not in [s for s, _ in live[1:]]


def test_a_tool_parameter_named_password_in_extra_body_replays_as_sent(
    server: LocalServer, tmp_path: Path
) -> None:
    login = {
        "type": "function",
        "function": {
            "name": "login",
            "parameters": {
                "type": "object",
                "properties": {"password": {"type": "string"}},
                "required": ["password"],
            },
        },
    }
    server.enqueue(StreamScript(tool_call_chunks([("c1", "login", '{"password": "x"}')])))
    client = ts.wrap(server.client(), record=tmp_path)
    with client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, extra_body={"tools": [login]}
    ) as s:
        assert statuses(s.until_done()) == ["ready"]
    assert [c.status for c in ts.replay(next(tmp_path.glob("*.jsonl"))).tool_calls] == ["ready"]


# ----------------------------------------------------------------------------- paths

CHAT_SPELLINGS = [
    "/chat/completions",
    "chat/completions",
    "/chat/completions/",
    "/chat/completions/.",
    "/chat/completions/./",
    "/chat/./completions",
    "/chat/x/../completions",
    "/v2/../chat/completions",
    "/chat/completions/x/..",
    "/chat//completions",
    "//v1//chat//completions//",
    "/chat/%63ompletions",
    "/%63%68%61%74/%63%6F%6D%70%6C%65%74%69%6F%6E%73",
    "/chat%2Fcompletions",
    "/chat/%2563ompletions",
    "/CHAT/Completions",
    "/chat/completions?x=1",
    "/chat/completions#fragment",
    "/chat/completions;jsessionid=1",
    "/chat\\completions",
    "/chat/completions.",
    "/chat/completions%20",
    "https://api.example.test/v1/chat/completions",
    "https://api.example.test/v1/chat/completions/.?stream=true",
]
NOT_CHAT = [
    "/completions",
    "/responses",
    "/chat/completions/chatcmpl-1/messages",
    "/chat/completions/chatcmpl-1",
    "/chat/completions/..",
    "/chat/completions-like",
    "//chat/completions",  # a host named "chat", as the SDK's URL join reads it
    "/chat",
    "",
]


@pytest.mark.parametrize("path", CHAT_SPELLINGS)
def test_every_spelling_of_the_chat_path_is_chat(path: str) -> None:
    assert _is_chat(path)


@pytest.mark.parametrize("path", NOT_CHAT)
def test_other_endpoints_are_not_chat(path: str) -> None:
    assert not _is_chat(path)


@pytest.mark.parametrize(
    "path", ["/chat/completions/.", "/chat/completions/x/..", "/chat/./completions", "chat/completions/?a=b"]
)
@pytest.mark.parametrize("call", ["post", "request"])
def test_a_dotted_path_reaching_the_endpoint_is_stitched(
    server: LocalServer, path: str, call: str, no_unstitched_warning: None
) -> None:
    server.enqueue(StreamScript(tool_call_chunks(CALLS)))
    client = ts.wrap(server.client())
    if call == "post":
        stream = client.post(path, body=body(tools=(F,)), cast_to=ChatCompletion, **STREAM)
    else:
        options = FinalRequestOptions.construct(method="post", url=path, json_data=body(tools=(F,)))
        stream = client.request(ChatCompletion, options, **STREAM)
    stream.until_done()
    held_to_the_contract(stream)


def test_an_absolute_url_to_the_clients_base_url_is_stitched(
    server: LocalServer, no_unstitched_warning: None
) -> None:
    server.enqueue(StreamScript(tool_call_chunks(CALLS)), StreamScript(tool_call_chunks(CALLS)))
    client = ts.wrap(server.client())
    for url in (f"{server.base_url}/chat/completions", f"{server.base_url}/chat/completions/."):
        stream = client.post(url, body=body(tools=[F]), cast_to=ChatCompletion, **STREAM)
        stream.until_done()
        held_to_the_contract(stream)


@pytest.mark.parametrize(
    "path", ["/chat//completions", "/chat/%63ompletions", "/CHAT/Completions", "/chat%2Fcompletions"]
)
@pytest.mark.parametrize("call", ["post", "request"])
def test_a_spelling_a_server_routes_to_chat_is_stitched(
    server: LocalServer, path: str, call: str, no_unstitched_warning: None
) -> None:
    # A server that normalises these paths (the local one does not) answers with a chat stream:
    # the SDK's own call, sent to the path the server would route to, stands for it.
    plain = server.client()
    real_post, real_request = plain.post, plain.request

    def routed_post(_path: str, **kwargs: Any) -> Any:
        return real_post("/chat/completions", **kwargs)

    def routed_request(cast_to: Any, options: Any, **kwargs: Any) -> Any:
        return real_request(cast_to, options.model_copy(update={"url": "/chat/completions"}), **kwargs)

    plain.post = routed_post  # type: ignore[method-assign,assignment]
    plain.request = routed_request  # type: ignore[method-assign,assignment]
    server.enqueue(StreamScript(tool_call_chunks(CALLS)))
    client = ts.wrap(plain)
    if call == "post":
        stream = client.post(path, body=body(tools=[F]), cast_to=ChatCompletion, **STREAM)
    else:
        options = FinalRequestOptions.construct(method="post", url=path, json_data=body(tools=[F]))
        stream = client.request(ChatCompletion, options, **STREAM)
    stream.until_done()
    held_to_the_contract(stream)


def test_json_text_of_any_bytes_like_kind_is_read_as_the_body() -> None:
    from toolstitch.client._lowlevel import _json_object

    text = json.dumps(body(tools=[F]))
    for given in (text, text.encode(), bytearray(text.encode()), memoryview(text.encode())):
        fields, _ = _json_object(given)
        assert fields is not None and read_contract(fields).tools == [F]


@pytest.mark.parametrize(("base", "path"), [("/v1/chat/", "completions"), ("/v1/chat/completions", "")])
def test_a_path_joined_to_a_base_url_that_holds_the_endpoint_is_stitched(
    server: LocalServer, base: str, path: str, no_unstitched_warning: None
) -> None:
    server.enqueue(StreamScript(tool_call_chunks(CALLS)))
    root = server.base_url.removesuffix("/v1")
    plain = openai.OpenAI(base_url=root + base, api_key="test", max_retries=0)
    stream = ts.wrap(plain).post(path, body=body(tools=[F]), cast_to=ChatCompletion, **STREAM)
    stream.until_done()
    held_to_the_contract(stream)


def test_a_tool_offered_twice_alike_is_one_offer() -> None:
    contract = read_contract({"tools": [F, dict(F)], "functions": [FN]})
    assert contract.unreadable is None and len(contract.tools or []) == 3
