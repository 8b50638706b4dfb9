"""Eager dispatch is the default for ``read_only`` tools (issue 30, item 1), over real HTTP.

A read-only call starts while its stream is still open; ``eager=False`` on the run or on the tool
waits for the seal; a started call whose stream then ends otherwise is discarded: an async tool is
cancelled, a sync tool's :class:`~toolstitch.tools.CancelToken` is cancelled, and the call is
answered as a refused call.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Iterator

import pytest

import toolstitch as ts
from tests.tools._support import text_reply, user
from toolstitch.events import CallDispatched, CallFinished, RunEvent
from toolstitch.testing import LocalServer, StreamScript, chunk, response_events, tool_call_chunks
from toolstitch.tools import CancelToken, Toolbox, tool

RESPONSES_API = pytest.mark.skipif(
    importlib.util.find_spec("openai.types.responses") is None,
    reason="this openai release has no Responses API",
)

HANDSHAKE = 10.0
tokens: list[CancelToken] = []
entered = threading.Event()
ran: list[str] = []
async_cancelled = threading.Event()


@tool(read_only=True)
def lookup(q: str) -> str:
    """Look something up."""
    ran.append(f"lookup {q}")
    return f"found {q}"


@tool(read_only=True, eager=False)
def lookup_late(q: str) -> str:
    """Look something up, never before the seal."""
    ran.append(f"lookup_late {q}")
    return f"found {q}"


@tool
def book(q: str) -> str:
    """Book something (a side effect)."""
    ran.append(f"book {q}")
    return "booked"


@tool(read_only=True)
def patient(q: str, cancel: CancelToken) -> str:
    """Waits until its result is not wanted any more (a long query that can stop early)."""
    tokens.append(cancel)
    entered.set()
    cancel.wait(HANDSHAKE)
    return "stopped" if cancel.cancelled else "finished"


@tool(read_only=True)
async def patient_async(q: str) -> str:
    """An async tool that waits until it is cancelled."""
    entered.set()
    try:
        await asyncio.sleep(HANDSHAKE)
    except asyncio.CancelledError:
        async_cancelled.set()
        raise
    return "finished"


@pytest.fixture(autouse=True)
def _clear() -> None:
    tokens.clear()
    ran.clear()
    entered.clear()
    async_cancelled.clear()


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(check_history=True) as srv:
        yield srv


@pytest.fixture
def box() -> Iterator[Toolbox]:
    with Toolbox([lookup, lookup_late, book, patient, patient_async]) as b:
        yield b


class Events(list[RunEvent]):
    """``on_event``: every run event, and each dispatch as (name, eager, the call's status then)."""

    def __init__(self) -> None:
        super().__init__()
        self.dispatches: list[tuple[str | None, bool, str]] = []

    def __call__(self, event: RunEvent) -> None:
        self.append(event)
        if isinstance(event, CallDispatched):
            self.dispatches.append((event.call.name, event.eager, event.call.status))


def dispatched(events: Events) -> list[tuple[str | None, bool, str]]:
    return events.dispatches


LOOKUP = ("c1", "lookup", '{"q": "a"}')
BOOK = ("c2", "book", '{"q": "b"}')


def one_by_one(calls: list[tuple[str, str, str]]) -> StreamScript:
    # interleave=False: the first call's arguments complete while the rest is still streaming.
    return StreamScript(tool_call_chunks(calls, interleave=False, pieces=3), delay=0.005)


def test_a_read_only_call_starts_before_the_seal_by_default(server: LocalServer, box: Toolbox) -> None:
    server.enqueue(
        one_by_one(
            [
                ("c1", "lookup", '{"q": "a"}'),
                ("c2", "book", '{"q": "b"}'),
                ("c3", "lookup_late", '{"q": "c"}'),
            ]
        ),
        text_reply("done"),
    )
    events = Events()
    result = ts.run(server.client(), model="m", messages=user(), toolbox=box, on_event=events)
    assert result.stop_reason == "done"
    # lookup started while its call was open; book (not read_only) and lookup_late (eager=False)
    # only after the seal.
    assert dispatched(events) == [
        ("lookup", True, "open"),
        ("book", False, "ready"),
        ("lookup_late", False, "ready"),
    ]
    assert [r.timings.eager for r in result.steps[0].results] == [True, False, False]
    # Results enter the history in call order.
    assert [m["tool_call_id"] for m in result.messages if m["role"] == "tool"] == ["c1", "c2", "c3"]


def test_eager_false_on_the_run_waits_for_the_seal(server: LocalServer, box: Toolbox) -> None:
    server.enqueue(
        one_by_one([("c1", "lookup", '{"q": "a"}'), ("c2", "book", '{"q": "b"}')]), text_reply("ok")
    )
    events = Events()
    ts.run(server.client(), model="m", messages=user(), toolbox=box, eager=False, on_event=events)
    assert dispatched(events) == [("lookup", False, "ready"), ("book", False, "ready")]


@RESPONSES_API
def test_eager_is_the_default_over_the_responses_api(server: LocalServer, box: Toolbox) -> None:
    server.check_history = True
    server.enqueue(
        StreamScript.responses(
            response_events([("c1", "lookup", '{"q": "a"}'), ("c2", "book", '{"q": "b"}')])
        ),
        StreamScript.responses(response_events(text="ok", id="resp_2")),
    )
    events = Events()
    result = ts.run(server.client(), model="m", input="hi", toolbox=box, api="responses", on_event=events)
    assert result.output_text == "ok"
    assert dispatched(events) == [("lookup", True, "open"), ("book", False, "ready")]


def _turns_invalid(name: str) -> StreamScript:
    """A call whose arguments are complete, valid JSON, then receive one more fragment that makes
    them invalid: started eagerly, it must be discarded and answered as refused."""
    chunks = tool_call_chunks([("c1", name, '{"q": "a"}')], pieces=2, finish_reason=None)
    extra = chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": ' "x"'}}]})
    return StreamScript([*chunks, extra, chunk(delta={}, finish_reason="tool_calls")])


def test_a_sync_tool_sees_its_token_cancelled_when_its_call_turns_invalid(
    server: LocalServer, box: Toolbox
) -> None:
    server.enqueue(_turns_invalid("patient"), text_reply("sorry"))
    events = Events()

    def on_event(event: RunEvent) -> None:
        events(event)
        if isinstance(event, CallDispatched) and event.eager:
            # The loop reads the spoiling fragment only after this returns: the tool has started.
            assert entered.wait(HANDSHAKE)

    result = ts.run(server.client(), model="m", messages=user(), toolbox=box, on_event=on_event)
    assert dispatched(events) == [("patient", True, "open")]
    [token] = tokens
    assert token.cancelled and token.reason == "discarded"
    [first] = result.steps[0].results
    assert first.status == "refused" and not first.timings.eager
    [message] = [m for m in result.messages if m["role"] == "tool"]
    assert message["tool_call_id"] == "c1" and message["content"].startswith("Error")
    assert [e.result.status for e in events if isinstance(e, CallFinished)] == ["refused"]


async def test_an_async_tool_is_cancelled_when_its_call_turns_invalid(
    server: LocalServer, box: Toolbox
) -> None:
    server.enqueue(_turns_invalid("patient_async"), text_reply("sorry"))
    events = Events()
    result = await ts.arun(server.async_client(), model="m", messages=user(), toolbox=box, on_event=events)
    assert dispatched(events) == [("patient_async", True, "open")]
    assert await asyncio.to_thread(async_cancelled.wait, HANDSHAKE)
    [first] = result.steps[0].results
    assert first.status == "refused"


def test_a_token_made_by_hand_lets_the_tool_be_called_directly() -> None:
    token = CancelToken()
    assert not token.cancelled and token.reason is None and token.wait(0) is False
    token.raise_if_cancelled()
    token.cancel("timeout")
    token.cancel("later")  # the first reason is kept
    assert token.cancelled and token.reason == "timeout" and token.wait(None) is True
    with pytest.raises(Exception, match="timeout"):
        token.raise_if_cancelled()
    assert "CancelToken" in repr(token)
    # The token parameter is not part of the schema the model sees.
    assert patient.definition()["function"]["parameters"]["properties"].keys() == {"q"}


def test_a_sync_tool_past_its_timeout_sees_its_token_cancelled() -> None:
    @tool(read_only=True, timeout=0.05)
    def stuck(cancel: CancelToken) -> str:
        """Waits for its token."""
        tokens.append(cancel)
        return "stopped" if cancel.wait(HANDSHAKE) else "finished"

    from tests.tools._support import sealed

    with Toolbox([stuck]) as b:
        [result] = b.execute(sealed([("c1", "stuck", "{}")], b.definitions()))
    assert result.status == "timeout"
    [token] = tokens
    assert token.wait(HANDSHAKE) and token.reason == "timeout"
