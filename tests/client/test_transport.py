"""A connection dropped mid-stream is ``openai.APIConnectionError`` on every supported openai release.

openai >= 3.14 translates the transport's error itself; older releases (httpx under 1.x/2.x, httpx2
under 3.0-3.13) let ``RemoteProtocolError`` through, and the wrapped streams translate it
(``client/_transport.py``). These tests run on whichever release is installed; ``./dev matrix`` runs
them on the declared floor and on the newest release.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import openai
import pytest

import toolstitch as ts
from toolstitch.client._transport import as_sdk_error
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks

CALLS = [("call_1", "get_weather", '{"city": "Oslo"}'), ("call_2", "get_weather", '{"city": "Rome"}')]
REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def transport() -> ModuleType:
    """The HTTP library the installed openai release streams over."""
    return importlib.import_module("httpx2" if int(openai.__version__.split(".")[0]) >= 3 else "httpx")


def assert_translated(error: BaseException) -> None:
    assert type(error) is openai.APIConnectionError
    cause = error.__cause__
    assert isinstance(cause, transport().RemoteProtocolError), repr(cause)
    assert isinstance(error.request, transport().Request)
    assert error.request.url.path.endswith("/chat/completions")


def test_a_cut_stream_raises_api_connection_error_with_the_transport_error_as_cause(
    server: LocalServer,
) -> None:
    server.enqueue(StreamScript(tool_call_chunks(CALLS, pieces=4), cut_after=5))
    stream = ts.wrap(server.client()).chat.completions.create(**REQUEST)
    received = 0
    with pytest.raises(openai.APIConnectionError) as caught:
        for _ in stream:
            received += 1
    assert received == 5
    assert_translated(caught.value)
    assert stream.accumulator.error is caught.value  # the core and the recorder see the same error
    assert {c.status for c in stream.tool_calls} == {"incomplete"}


async def test_a_cut_async_stream_raises_api_connection_error(server: LocalServer) -> None:
    server.enqueue(StreamScript(tool_call_chunks(CALLS, pieces=4), cut_after=3, fragment=3))
    stream = await ts.wrap(server.async_client()).chat.completions.create(**REQUEST)
    with pytest.raises(openai.APIConnectionError) as caught:
        async for _ in stream:
            pass
    assert_translated(caught.value)
    assert {c.status for c in stream.tool_calls} == {"incomplete"}


def test_the_final_completion_of_a_cut_stream_is_incomplete_not_a_transport_error(
    server: LocalServer,
) -> None:
    server.enqueue(StreamScript(tool_call_chunks(CALLS), cut_after=4))
    stream = ts.wrap(server.client()).chat.completions.create(**REQUEST)
    with pytest.raises(openai.APIConnectionError):
        stream.get_final_completion()
    with pytest.raises(ts.IncompleteStreamError):
        stream.get_final_completion()


# ------------------------------------------------------------------------------ as_sdk_error


class FakeStream:
    """An SDK stream's only attribute the translation reads: ``response.request``."""

    def __init__(self, request: Any) -> None:
        self.response = type("Response", (), {"request": request})()


def a_request() -> Any:
    return transport().Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def test_a_transport_timeout_becomes_api_timeout_error() -> None:
    request = a_request()
    cause = transport().ReadTimeout("timed out", request=request)
    error = as_sdk_error(cause, FakeStream(request))
    assert type(error) is openai.APITimeoutError
    assert error.__cause__ is cause
    assert error.request is request


def test_the_request_comes_from_the_error_when_the_stream_has_none() -> None:
    request = a_request()
    cause = transport().RemoteProtocolError("peer closed connection", request=request)
    error = as_sdk_error(cause, object())
    assert type(error) is openai.APIConnectionError
    assert error.request is request and error.__cause__ is cause


def test_without_any_request_the_transport_error_is_left_as_it_is() -> None:
    cause = transport().RemoteProtocolError("peer closed connection")  # .request raises RuntimeError
    assert as_sdk_error(cause, None) is cause


@pytest.mark.parametrize(
    "error",
    [
        ValueError("not a transport error"),
        KeyboardInterrupt(),
        GeneratorExit(),
        openai.APIConnectionError(request=a_request()),
        openai.APIError("in-band error event", a_request(), body=None),
    ],
    ids=type,
)
def test_everything_else_passes_through_as_the_same_object(error: BaseException) -> None:
    assert as_sdk_error(error, FakeStream(a_request())) is error
