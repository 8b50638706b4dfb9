"""``ts.run(..., api="responses")`` sends a reasoning model's reasoning back beside its calls.

Over real HTTP against the local server (checking every ``input`` as OpenAI does): the reasoning
item a call came with goes back in the next request, before the call (rule R08); with
``store=False`` the loop asks for ``include=["reasoning.encrypted_content"]`` (the server keeps no
reasoning item then) and sends the encrypted content back; with ``dialect="deepseek"`` the input is
checked for a reasoning item before the calls of every turn (R09).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")

import toolstitch as ts
from toolstitch.testing import LocalServer, StreamScript, response_events
from toolstitch.tools import Toolbox, tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


BOX = Toolbox([get_weather])


def encrypted(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of a reasoning model asked for ``reasoning.encrypted_content``."""
    events = copy.deepcopy(events)

    def mark(item: Any) -> None:
        if isinstance(item, dict) and item.get("type") == "reasoning":
            item["encrypted_content"] = f"gAAAA-{item['id']}"

    for event in events:
        mark(event.get("item"))
        for item in (event.get("response") or {}).get("output", []):
            mark(item)
    return events


def serve(server: LocalServer) -> None:
    server.check_history = True
    first = encrypted(response_events([("call_1", "get_weather", '{"city": "Paris"}')], reasoning="A tool."))
    server.enqueue(
        StreamScript.responses(first), StreamScript.responses(response_events(text="Sunny.", id="resp_2"))
    )


def test_the_reasoning_a_call_came_with_goes_back_before_it(server: LocalServer) -> None:
    serve(server)
    result = ts.run(server.client(), model="m", input="Weather in Paris?", toolbox=BOX, api="responses")
    assert result.output_text == "Sunny."
    second = server.requests[1]["input"]
    kinds = [i.get("type", i.get("role")) for i in second]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output"]
    assert "include" not in server.requests[0]  # stored: the server keeps the reasoning itself
    assert ts.validate_input(second, previous=result.steps[0].completion) == []


@pytest.mark.parametrize(
    "include", [None, ["message.output_text.logprobs"], ("reasoning.encrypted_content",)]
)
def test_with_store_false_the_loop_asks_for_the_encrypted_reasoning_and_sends_it_back(
    server: LocalServer, include: Any
) -> None:
    serve(server)
    extra = {} if include is None else {"include": include}
    result = ts.run(
        server.client(),
        model="m",
        input="Weather in Paris?",
        toolbox=BOX,
        api="responses",
        store=False,
        **extra,
    )
    assert result.output_text == "Sunny."
    wanted = [
        *[i for i in include or () if i != "reasoning.encrypted_content"],
        "reasoning.encrypted_content",
    ]
    for request in server.requests:
        assert request["store"] is False
        assert request["include"] == wanted
    (reasoning,) = [i for i in server.requests[1]["input"] if i.get("type") == "reasoning"]
    assert reasoning["encrypted_content"] == "gAAAA-rs_0"
    assert (
        include is None
        or include == ("reasoning.encrypted_content",)
        or include == ["message.output_text.logprobs"]
    )


def test_the_deepseek_dialect_checks_each_turn_for_its_reasoning(server: LocalServer) -> None:
    server.check_history = True
    server.enqueue(
        StreamScript.responses(
            response_events([("call_1", "get_weather", '{"city": "Paris"}')])
        ),  # no reasoning
    )
    with pytest.raises(ts.errors.RequestError, match="R09"):
        ts.run(server.client(), model="m", input="Weather?", toolbox=BOX, api="responses", dialect="deepseek")
    assert len(server.requests) == 1  # the second request was never sent
