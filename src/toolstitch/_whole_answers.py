"""A script's answer whole, for a request that did not stream: the ``chat.completion`` its chunks
make, the ``response`` its Responses events end with. The local test server (``testing.py``) serves
these for ``stream=False`` requests and keeps them for the stored-completion endpoints.

Naive on purpose, and apart from the package: the tests hold toolstitch's own accumulators against
what a server answers, so nothing here may share their logic (it imports nothing of toolstitch).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._chat_chunks import chunk
from ._response_events import response_object
from ._stream_script import SSEItem, chunk_dicts

# What LocalServer(examples=True) answers a chat request that nothing was scripted for.
EXAMPLE_ANSWER = [
    chunk(delta={"role": "assistant", "content": "Hello!"}),
    chunk(delta={}, finish_reason="stop"),
]


def completion_from_chunks(items: Iterable[SSEItem]) -> dict[str, Any]:
    """A plain ``chat.completion`` from scripted chunks, for ``stream=False`` requests.

    Deliberately naive (text concatenated, tool calls merged by ``index``): it only serves
    pass-through tests and must not share logic with the package's accumulator.
    """
    head: Mapping[str, Any] = {}
    usage: Any = None
    states: dict[int, dict[str, Any]] = {}
    for c in chunk_dicts(items):
        head = head or c
        usage = c.get("usage") or usage
        for choice in c.get("choices") or []:
            st = states.setdefault(
                choice.get("index", 0),
                {"content": None, "refusal": None, "calls": {}, "finish_reason": None},
            )
            delta = choice.get("delta") or {}
            for key in ("content", "refusal"):
                if isinstance(delta.get(key), str):
                    st[key] = (st[key] or "") + delta[key]
            for tc in delta.get("tool_calls") or []:
                slot = st["calls"].setdefault(
                    tc.get("index", 0),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                fn = tc.get("function") or {}
                slot["id"] = tc.get("id") or slot["id"]
                slot["function"]["name"] = fn.get("name") or slot["function"]["name"]
                if isinstance(fn.get("arguments"), str):
                    slot["function"]["arguments"] += fn["arguments"]
            st["finish_reason"] = choice.get("finish_reason") or st["finish_reason"]
    choices = []
    for index, st in sorted(states.items()):
        message: dict[str, Any] = {"role": "assistant", "content": st["content"], "refusal": st["refusal"]}
        if st["calls"]:
            message["tool_calls"] = [call for _, call in sorted(st["calls"].items())]
        finish = st["finish_reason"] or "stop"
        choices.append({"index": index, "message": message, "finish_reason": finish, "logprobs": None})
    return {
        "id": head.get("id") or "chatcmpl-test",
        "object": "chat.completion",
        "created": head.get("created") or 1700000000,
        "model": head.get("model") or "test-model",
        "choices": choices,
        "usage": usage,
    }


def response_from_events(items: Iterable[SSEItem]) -> dict[str, Any]:
    """The response object a scripted Responses stream ends with (its last ``response.*`` final
    event's), for a request that did not stream; naive on purpose, like the chat twin."""
    final: dict[str, Any] | None = None
    for event in chunk_dicts(items):
        if event.get("type") in ("response.completed", "response.incomplete", "response.failed"):
            response = event.get("response")
            if isinstance(response, dict):
                final = response
    return final if final is not None else response_object(status="in_progress")
