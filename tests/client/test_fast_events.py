"""Responses API events decoded fast are the SDK's own events, event type by event type.

* The builder: for every member of the SDK's ``ResponseStreamEvent`` union (every event type the
  installed release knows), payloads generated from the member's own annotations (required fields
  only, every field, extras at every level, each variant of every nested union in turn) build
  equal to ``openai._models.construct_type``'s (same classes, ``__dict__``, extras and
  ``model_fields_set`` at every level), and the fast path is taken for them. Payloads the member
  refuses, unknown types and non-objects are left to the SDK.
* The whole stream, over real HTTP from :class:`toolstitch.testing.LocalServer`, sync and async:
  ``ts.wrap(client)`` yields events equal to the plain client's, for every generated event, the
  events of a tool-calling stream and unknown ones; ``decode="sdk"`` keeps the SDK's decoding.

``scripts/matrix`` runs this file on the floor, on the first release with the Responses API (1.66.0,
its "responses-floor" leg) and on the newest release; on a release without the Responses API (the
1.55.3 floor) it skips, and there is nothing to decode.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import inspect
import os
import subprocess
import sys
import types
import typing
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pydantic
import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")
from openai._models import construct_type
from openai.types.responses import ResponseStreamEvent

import toolstitch as ts
from toolstitch.client import _fast, _fast_events
from toolstitch.client._fast import same_value
from toolstitch.client._fast_events import build_event
from toolstitch.errors import FastDecodeWarning
from toolstitch.testing import LocalServer, StreamScript, response_events

TOOLS = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]


@pytest.fixture(scope="module")
def shared_server() -> Iterator[LocalServer]:
    with LocalServer() as srv:
        yield srv


# ----------------------------------------------------------------------------- payloads


def _union_args(annotation: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(annotation)
    return None


def _value(annotation: Any, full: bool, pick: int, depth: int = 0) -> Any:
    """A value the annotation accepts: the first choice of every union shifted by ``pick``, every
    optional field (and an extra key in every model) when ``full``."""
    if hasattr(annotation, "__value__"):  # a TypeAliasType
        annotation = annotation.__value__
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _value(args[0], full, pick, depth)
    if origin is typing.Literal:
        return args[pick % len(args)]
    union = _union_args(annotation)
    if union is not None:
        choices = [a for a in union if a is not type(None)]
        if not full and len(choices) < len(union):
            return None
        return _value(choices[pick % len(choices)], full, pick, depth)
    if origin is list or annotation is list:
        return [_value(args[0], full, pick, depth + 1)] if args and depth < 6 else []
    if origin is dict or annotation is dict:
        return {"k": _value(args[1], full, pick, depth + 1)} if len(args) == 2 and depth < 6 else {}
    if inspect.isclass(annotation) and issubclass(annotation, pydantic.BaseModel):
        return _model(annotation, full, pick, depth + 1)
    simple: dict[Any, Any] = {str: "s", int: 3, float: 2, bool: True, object: {"any": [1, 2.5]}}
    if annotation is datetime.datetime:
        return "2025-01-01T00:00:00Z"
    if annotation in simple:
        return simple[annotation]
    return {"any": 1}  # typing.Any and the like


def _model(cls: type[pydantic.BaseModel], full: bool, pick: int, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if field.is_required() or (full and depth < 6):
            out[field.alias or name] = _value(field.annotation, full, pick, depth)
    if full:
        out["x_extra"] = {"kept": [1, None]}
    return out


def _members() -> list[type[pydantic.BaseModel]]:
    union = typing.get_args(ResponseStreamEvent)[0]
    return list(typing.get_args(union))


MEMBERS = _members()


def _payloads(member: type[pydantic.BaseModel]) -> list[dict[str, Any]]:
    return [_model(member, full, pick) for full in (False, True) for pick in range(6)]


def _sdk(data: Any) -> Any:
    try:
        return construct_type(type_=ResponseStreamEvent, value=data)
    except Exception as exc:
        return exc


def _check(data: Any) -> bool:
    """The fast event equals the SDK's, or the builder declined; True when it built."""
    built = build_event(copy.deepcopy(data))
    if built is None:
        return False
    expected = _sdk(copy.deepcopy(data))
    assert not isinstance(expected, Exception), (data, expected)
    assert same_value(built, expected), data
    return True


# ----------------------------------------------------------------------------- the builder


def test_self_check_passes_on_the_installed_release() -> None:
    status = _fast.fast_decode_status()
    assert (status.events, status.events_reason) == (True, "")


_LAZY_CHECK = """
from toolstitch.client import _fast
from toolstitch.testing import LocalServer, StreamScript, response_events, tool_call_chunks
import toolstitch as ts

with LocalServer() as server:
    server.enqueue(StreamScript(tool_call_chunks([("call_1", "f", "{}")])))
    client = ts.wrap(server.client())
    list(client.chat.completions.create(model="m", messages=[], stream=True))
    assert _fast.fast_decode_status().builder
    print("after chat", _fast._responses_status.cache_info().currsize)
    server.enqueue(StreamScript.responses(response_events([("call_1", "f", "{}")])))
    stream = client.responses.create(model="m", input="hi", stream=True)
    assert isinstance(stream.sdk_stream._client, _fast._FastClient)
    list(stream)
    print("after responses", _fast._responses_status.cache_info().currsize)
"""


def test_the_responses_self_check_runs_when_a_responses_stream_first_needs_it() -> None:
    # A fresh process: the chat half of the self-check runs at the first chat stream, and the
    # Responses half (which builds the validators of the SDK's whole event union) only at the
    # first Responses stream, never for a program that streams chat completions alone.
    src = str(Path(ts.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, "-c", _LAZY_CHECK], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["after chat 0", "after responses 1"], result.stdout


def test_the_plan_covers_every_member_of_the_sdks_union() -> None:
    members = _fast_events._MEMBERS
    assert members is not None
    assert set(members.values()) == set(MEMBERS)
    for literal, member in members.items():
        assert typing.get_args(member.model_fields["type"].annotation) == (literal,)


@pytest.mark.parametrize("member", MEMBERS, ids=lambda m: m.__name__)
def test_every_event_type_builds_equal_to_the_sdk(member: type[pydantic.BaseModel]) -> None:
    payloads = _payloads(member)
    built = [_check(p) for p in payloads]
    assert built[0], payloads[0]  # the minimal payload takes the fast path
    assert sum(built) >= len(built) // 2, member.__name__


@pytest.mark.parametrize("member", MEMBERS, ids=lambda m: m.__name__)
def test_payloads_an_event_type_refuses_are_left_to_the_sdk(member: type[pydantic.BaseModel]) -> None:
    minimal = _model(member, False, 0)
    if len(minimal) == 1:  # an event of its type alone (older releases): only a non-str type is refused
        assert build_event({"type": bytearray(minimal["type"], "utf-8")}) is None
        return
    broken = [{"type": minimal["type"]}]
    if "sequence_number" in minimal:
        broken.append({**minimal, "sequence_number": "one"})
    for payload in broken:
        assert build_event(copy.deepcopy(payload)) is None, payload
        assert not isinstance(_sdk(copy.deepcopy(payload)), Exception)  # the SDK constructs something


def test_sample_events_of_the_self_check_build_equal_to_the_sdk() -> None:
    built = [_check(sample) for sample in _fast_events.sample_events()]
    assert sum(built) >= 10


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "response.unknown_event", "sequence_number": 1},
        {"type": "", "sequence_number": 1},
        {"type": None, "delta": "x"},
        {"type": 5},
        {"delta": "x"},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "new_kind"},
            "sequence_number": 1,
        },
        [1, 2],
        "text",
        None,
    ],
)
def test_unknown_types_and_non_objects_fall_back_to_the_sdk(payload: Any) -> None:
    assert build_event(copy.deepcopy(payload)) is None


def test_a_str_subclass_as_type_is_left_to_the_sdk() -> None:
    class Kind(str):
        pass

    assert (
        build_event(
            {"type": Kind("error"), "code": None, "message": "m", "param": None, "sequence_number": 1}
        )
        is None
    )
    assert (
        build_event({"type": "error", "code": None, "message": "m", "param": None, "sequence_number": 1})
        is not None
    )


# ----------------------------------------------------------------------------- over HTTP


def _read(server: LocalServer, decode: str | None, *, is_async: bool) -> list[Any]:
    """The events of one streamed request: plain (``decode=None``) or wrapped with ``decode``."""

    async def read_async() -> list[Any]:
        client: Any = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        if decode is not None:
            client = ts.wrap(client, decode=decode)  # type: ignore[arg-type]
        async with client:
            stream = await client.responses.create(model="m", input="hi", tools=TOOLS, stream=True)
            return [event async for event in stream]

    if is_async:
        return asyncio.run(read_async())
    client: Any = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    if decode is not None:
        client = ts.wrap(client, decode=decode)  # type: ignore[arg-type]
    with client:
        stream = client.responses.create(model="m", input="hi", tools=TOOLS, stream=True)
        if decode == "fast":
            assert isinstance(stream.sdk_stream._client, _fast._FastClient)
        elif decode == "sdk":
            assert not isinstance(stream.sdk_stream._client, _fast._FastClient)
        return list(stream)


def _assert_same_over_http(server: LocalServer, events: list[Any]) -> None:
    script = StreamScript.responses(events, fragment=7)
    server.enqueue(*[script] * 5)
    plain = _read(server, None, is_async=False)
    assert len(plain) == len(events)
    for decode in ("fast", "sdk"):
        for is_async in (False, True):
            if decode == "sdk" and is_async:
                continue
            got = _read(server, decode, is_async=is_async)
            assert [type(e) for e in got] == [type(e) for e in plain]
            assert same_value(got, plain), (decode, is_async)
    assert same_value(_read(server, "fast", is_async=True), plain)


def test_a_tool_calling_stream_over_http_gives_the_sdks_events(shared_server: LocalServer) -> None:
    calls = [("call_1", "f", '{"city": "Zürich"}'), ("call_2", "f", "{}")]
    _assert_same_over_http(shared_server, response_events(calls, text="Looking.", reasoning="Two.", pieces=3))


def test_every_event_type_over_http_gives_the_sdks_events(shared_server: LocalServer) -> None:
    events = [p for member in MEMBERS for p in _payloads(member)[::3]]
    _assert_same_over_http(shared_server, events)


def test_unknown_and_refused_events_over_http_fall_back_to_the_sdks_own(shared_server: LocalServer) -> None:
    events: list[Any] = response_events([("call_1", "f", "{}")])
    events[3:3] = [
        {"type": "response.brand_new", "sequence_number": 3, "payload": {"a": 1}},
        {"type": "response.output_text.delta", "item_id": 1, "delta": None, "sequence_number": "x"},
    ]
    _assert_same_over_http(shared_server, events)


def test_the_wrapped_stream_still_stitches_with_fast_decoding(shared_server: LocalServer) -> None:
    shared_server.enqueue(StreamScript.responses(response_events([("call_1", "f", '{"a": 1}')], pieces=4)))
    with ts.wrap(shared_server.client()) as client:
        stream = client.responses.create(model="m", input="hi", tools=TOOLS, stream=True)
        assert isinstance(stream.sdk_stream._client, _fast._FastClient)
        list(stream)
        assert [(c.name, c.status, c.parsed) for c in stream.tool_calls] == [("f", "ready", {"a": 1})]
        assert stream.get_final_response().output[0].type == "function_call"


def test_a_release_whose_responses_events_differ_keeps_the_sdk_decoding_and_warns_once(
    shared_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _fast.fast_decode_status()
    failed = _fast._Status(
        real.builder, real.decoder, real.reason, False, "openai 0.0: its Responses events differ"
    )
    monkeypatch.setattr(_fast, "fast_decode_status", lambda: failed)
    _fast._warn_once.cache_clear()
    script = StreamScript.responses(response_events([("call_1", "f", "{}")]))
    shared_server.enqueue(script, script, script)
    plain = _read(shared_server, None, is_async=False)
    client = ts.wrap(shared_server.client())
    got = []
    with pytest.warns(FastDecodeWarning, match="Responses events differ"):
        stream = client.responses.create(model="m", input="hi", tools=TOOLS, stream=True)
        assert not isinstance(stream.sdk_stream._client, _fast._FastClient)
        got.append(list(stream))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stream = client.responses.create(model="m", input="hi", tools=TOOLS, stream=True)
        assert not isinstance(stream.sdk_stream._client, _fast._FastClient)
        got.append(list(stream))
    assert same_value(got, [plain, plain])
    _fast._warn_once.cache_clear()


def test_every_stitched_responses_path_decodes_fast_and_gives_the_sdks_events(
    shared_server: LocalServer,
) -> None:
    events = response_events([("call_1", "f", '{"a": 1}')], text="Hi.", pieces=3)
    shared_server.enqueue(*[StreamScript.responses(events)] * 4)
    plain = _read(shared_server, None, is_async=False)
    client = ts.wrap(shared_server.client())
    raw = client.responses.with_raw_response.create(model="m", input="hi", tools=TOOLS, stream=True).parse()
    got = [(raw.sdk_stream, list(raw))]
    with client.responses.with_streaming_response.create(
        model="m", input="hi", tools=TOOLS, stream=True
    ) as r:
        streamed = r.parse()
        got.append((streamed.sdk_stream, list(streamed)))
    with client.responses.stream(model="m", input="hi", tools=TOOLS) as helper:
        list(helper)
        got.append((helper.toolstitch.sdk_stream, list(helper.toolstitch.accumulator.calls())))
    for sdk_stream, _ in got:
        assert isinstance(sdk_stream._client, _fast._FastClient)
    assert same_value(got[0][1], plain) and same_value(got[1][1], plain)
    assert [c.status for c in got[2][1]] == ["ready"]
