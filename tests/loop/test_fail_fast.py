"""``ts.run(..., fail_fast=True)`` (issue 30, item 4), over real HTTP.

A call refused while the model still writes it closes the stream at once; the model is asked
again, told the tool and the reason, in a form every server accepts; the abandoned answer never
enters the history; each retry is a step and a corrective round.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import calls_reply, text_reply, user
from toolstitch.events import RunEvent, StreamAbandoned
from toolstitch.history import validate_history
from toolstitch.loop._entries import corrected as _corrected
from toolstitch.testing import LocalServer, StreamScript, chunk
from toolstitch.tools import Toolbox, tool

ran: list[Any] = []


@tool(read_only=True)
def search_hotels(city: str, budget: int) -> str:
    """Search hotels."""
    ran.append((city, budget))
    return f"3 hotels in {city}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(check_history=True) as srv:
        yield srv


@pytest.fixture
def box() -> Iterator[Toolbox]:
    with Toolbox([search_hotels]) as b:
        yield b


BAD_TAIL = 200


def goes_wrong_early(call_id: str = "c1", wrong: str = '"budget": ]') -> StreamScript:
    """A long call that goes wrong early (``wrong``: by default its JSON breaks, a ``]`` where a
    value belongs), then goes on for long."""
    head = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "search_hotels", "arguments": ""},
    }
    pieces = ['{"city": "Rome", ', wrong, *([', "note": "' + "x" * 20 + '"'] * BAD_TAIL), "}"]
    chunks = [chunk(delta={"role": "assistant", "content": None}), chunk(delta={"tool_calls": [head]})]
    chunks += [chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    chunks.append(chunk(delta={}, finish_reason="tool_calls"))
    # 10 ms a chunk: the whole stream takes 2 s, so the client closes it long before its end even
    # on a loaded machine (at 2 ms it could read all of it before reacting, under load).
    return StreamScript(chunks, delay=0.01)


GOOD = [("c2", "search_hotels", '{"city": "Rome", "budget": 200}')]


def test_a_call_refused_while_streaming_closes_the_stream_and_asks_again(
    server: LocalServer, box: Toolbox
) -> None:
    server.enqueue(goes_wrong_early(), calls_reply(GOOD), text_reply("Three hotels."))
    events: list[RunEvent] = []
    result = ts.run(
        server.client(),
        model="m",
        messages=user("Hotels in Rome?"),
        toolbox=box,
        fail_fast=True,
        on_event=events.append,
    )
    assert result.stop_reason == "done" and result.output_text == "Three hotels."
    assert ran == [("Rome", 200)]
    # The stream was closed: the server did not get to send the rest of it.
    # (A stream the client closed may be recorded late, or not at all when the server's write
    # fails on the closed socket: what must hold is that the long stream was never sent whole.)
    assert not [(sent, scripted) for sent, scripted in server.streamed if sent == scripted > BAD_TAIL]
    [abandoned] = [e for e in events if isinstance(e, StreamAbandoned)]
    assert abandoned.step == 0 and abandoned.call.name == "search_hotels"
    assert "not valid JSON" in abandoned.reason
    first = result.steps[0]
    assert first.completion is None and first.correction == abandoned.correction and first.results == []
    # The abandoned answer is not in the history; the stored history is valid as it is.
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert result.messages[0] == {"role": "user", "content": "Hotels in Rome?"}
    assert validate_history(result.messages) == []
    # The retry told the model what was wrong, in the last user message (no second user message).
    retry = server.requests[1]["messages"]
    assert [m["role"] for m in retry] == ["user"]
    assert retry[0]["content"].startswith("Hotels in Rome?\n\n")
    assert "search_hotels" in retry[0]["content"] and "not valid JSON" in retry[0]["content"]
    # Each retry is a step (a request) in the timeline too.
    assert result.timeline is not None and result.timeline.steps[0].stage("abandoned") is not None


def test_a_value_of_the_wrong_type_begun_is_refused_early_and_fails_fast(
    server: LocalServer, box: Toolbox
) -> None:
    # Valid JSON so far, but ``budget`` is an integer: the string it begins can never be one. The
    # core refuses the call at that fragment (``text/_early.py``), and the loop stops the stream.
    server.enqueue(goes_wrong_early(wrong='"budget": "two'), calls_reply(GOOD), text_reply("Three hotels."))
    events: list[RunEvent] = []
    result = ts.run(
        server.client(), model="m", messages=user(), toolbox=box, fail_fast=True, on_event=events.append
    )
    assert result.stop_reason == "done" and ran == [("Rome", 200)]
    assert not [(sent, scripted) for sent, scripted in server.streamed if sent == scripted > BAD_TAIL]
    [abandoned] = [e for e in events if isinstance(e, StreamAbandoned)]
    assert "budget" in abandoned.reason and "integer" in abandoned.reason
    assert not abandoned.call.ready
    assert "budget" in server.requests[1]["messages"][0]["content"]


def test_without_fail_fast_the_whole_stream_is_read_and_the_call_refused(
    server: LocalServer, box: Toolbox
) -> None:
    server.enqueue(goes_wrong_early(), calls_reply(GOOD), text_reply("Three hotels."))
    result = ts.run(server.client(), model="m", messages=user(), toolbox=box)
    assert result.stop_reason == "done"
    sent, scripted = max(server.streamed, key=lambda s: s[1])
    assert sent == scripted
    assert [r.status for r in result.steps[0].results] == ["refused"]


def test_retries_count_against_the_corrections_and_the_steps(server: LocalServer, box: Toolbox) -> None:
    server.enqueue(*(goes_wrong_early(f"c{n}") for n in range(5)))
    result = ts.run(
        server.client(), model="m", messages=user(), toolbox=box, fail_fast=True, max_corrections=1
    )
    assert result.stop_reason == "max_corrections" and len(result.steps) == 2 and ran == []
    server.enqueue(*(goes_wrong_early(f"d{n}") for n in range(5)))
    result = ts.run(server.client(), model="m", messages=user(), toolbox=box, fail_fast=True, max_steps=2)
    assert result.stop_reason == "max_steps" and len(result.steps) == 2


async def test_arun_fails_fast_too(server: LocalServer, box: Toolbox) -> None:
    server.enqueue(goes_wrong_early(), calls_reply(GOOD), text_reply("Three hotels."))
    result = await ts.arun(server.async_client(), model="m", messages=user(), toolbox=box, fail_fast=True)
    assert result.output_text == "Three hotels." and ran == [("Rome", 200)]
    assert result.steps[0].correction is not None


def test_the_correction_joins_the_last_user_or_tool_message_else_comes_as_a_user_message() -> None:
    tool_turn = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "c", "content": "result"},
    ]
    fixed = _corrected(tool_turn, "fix it", False)
    assert fixed[-1] == {"role": "tool", "tool_call_id": "c", "content": "result\n\nfix it"}
    assert tool_turn[-1]["content"] == "result"  # the stored history is not touched
    parts = [{"role": "user", "content": [{"type": "text", "text": "q"}]}]
    assert _corrected(parts, "fix it", False)[-1]["content"][-1] == {"type": "text", "text": "fix it"}
    assert _corrected([{"role": "system", "content": "s"}], "fix it", False)[-1] == {
        "role": "user",
        "content": "fix it",
    }
    output = [{"type": "function_call_output", "call_id": "c", "output": "r"}]
    assert _corrected(output, "fix it", True)[-1]["output"] == "r\n\nfix it"
    assert _corrected(tool_turn, None, False) is tool_turn


@pytest.mark.skipif(
    importlib.util.find_spec("openai.types.responses") is None,
    reason="this openai release has no Responses API",
)
def test_fail_fast_over_the_responses_api(server: LocalServer, box: Toolbox) -> None:
    from toolstitch.testing import response_events

    bad = '{"city": "Rome", "budget": ]' + ', "note": "xxxxxxxxxx"' * BAD_TAIL + "}"
    wrong = response_events([("c1", "search_hotels", bad)], id="resp_1")
    server.enqueue(
        StreamScript.responses(wrong, delay=0.002),
        StreamScript.responses(response_events(GOOD, id="resp_2")),
        StreamScript.responses(response_events(text="Three hotels.", id="resp_3")),
    )
    result = ts.run(server.client(), model="m", input="Hotels?", toolbox=box, api="responses", fail_fast=True)
    assert result.output_text == "Three hotels." and ran == [("Rome", 200)]
    assert result.steps[0].correction is not None
    retry = server.requests[1]["input"]
    assert len(retry) == 1 and retry[0]["content"].startswith("Hotels?\n\n")
    assert ts.validate_input(result.input) == []
