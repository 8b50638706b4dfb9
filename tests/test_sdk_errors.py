"""toolstitch's errors that are also the SDK's (``openai.APIError``) on every supported release.

openai 3.60.0 changed ``APIError.__init__`` to read ``request.headers`` (to keep a copy without the
secret headers), so an error built with ``request=None`` raised ``AttributeError`` in its place.
These build every such error with and without a request, on whichever release is installed (the
matrix runs them on the floor and on the newest), and hold ``.request`` to what the SDK's own error
would hold there.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

import toolstitch as ts
from toolstitch import errors
from toolstitch._sdk import http_module, init_api_error
from toolstitch.errors import UnsafeToolCallError

PARAMETERS = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": PARAMETERS}}]


def _not_ready_calls() -> list[ts.ToolCall]:
    acc = ts.Accumulator(tools=TOOLS)
    acc.feed(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f"}}]},
                    "finish_reason": "tool_calls",
                }
            ],
        }
    )
    calls = acc.tool_calls
    assert [c.status for c in calls] == ["invalid"]  # "" arguments are not {}
    return calls


def _request(**headers: str) -> Any:
    return http_module().Request("POST", "https://api.example/v1/chat/completions", headers=headers)


def test_every_error_that_is_the_sdks_is_covered_here() -> None:
    """A new ``openai.APIError`` subclass in ``toolstitch.errors`` must join the tests below."""
    sdk_errors = [
        value
        for value in vars(errors).values()
        if isinstance(value, type)
        and issubclass(value, openai.APIError)
        and value.__module__ == errors.__name__
    ]
    assert sdk_errors == [UnsafeToolCallError]


@pytest.mark.parametrize("choice", [0, None])
def test_the_guard_error_builds_without_a_request(choice: int | None) -> None:
    calls = _not_ready_calls()
    error = UnsafeToolCallError.of(calls, choice)
    assert error.request is None  # no request was sent: none is made up
    assert error.code == "unsafe_tool_call" and error.type == "toolstitch_guard" and error.param is None
    assert error.body == {"message": error.message, "type": "toolstitch_guard", "code": "unsafe_tool_call"}
    assert error.tool_calls == calls and error.choice == choice
    assert "EmptyArguments" in str(error)
    with pytest.raises(openai.APIError):  # raised and caught as the SDK's
        raise error


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer sk-secret"}, {"api-key": "azure-secret", "x-custom": "kept"}],
    ids=["no secrets", "bearer", "azure key"],
)
def test_the_guard_errors_request_is_what_the_sdks_own_error_holds(headers: dict[str, str]) -> None:
    request = _request(**headers)
    sdk = openai.APIError("the SDK's own", request, body=None).request
    error = UnsafeToolCallError.of(_not_ready_calls(), 0, request=request)
    assert (error.request is request) == (sdk is request)
    assert error.request.url == sdk.url and error.request.method == sdk.method
    assert list(error.request.headers.items()) == list(sdk.headers.items())
    if sdk is not request:  # this release keeps a copy without the secrets: so does the guard's error
        assert not {"authorization", "api-key"} & set(error.request.headers)


def test_the_sdks_own_constructor_runs_without_a_request() -> None:
    """Whatever a release's ``APIError.__init__`` sets from ``body`` is set here too."""

    class Probe(openai.APIError):
        pass

    body = {"message": "m", "type": "t", "code": 7, "param": "p"}
    error = Probe.__new__(Probe)
    init_api_error(error, "m", None, body=body)
    reference = openai.APIError("m", _request(), body=body)
    for name in set(vars(reference)) - {"request"}:
        assert getattr(error, name) == getattr(reference, name), name
    assert error.request is None and str(error) == "m"
