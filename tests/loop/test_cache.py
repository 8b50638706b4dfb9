"""The result cache of read-only tools (``@tool(read_only=True, cache=seconds)``, issue 30 item 5)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import calls_reply, text_reply, user
from toolstitch.events import CallFinished, RunEvent
from toolstitch.testing import LocalServer
from toolstitch.tools import Toolbox, tool
from toolstitch.tools._cache import ResultCache

ran: list[Any] = []


@tool(read_only=True, cache=60)
def weather(city: str, unit: str = "c") -> dict[str, Any]:
    """Current weather."""
    ran.append((city, unit))
    return {"city": city, "temp": 21, "unit": unit}


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(check_history=True) as srv:
        yield srv


@pytest.fixture
def box() -> Iterator[Toolbox]:
    with Toolbox([weather]) as b:
        yield b


def test_the_same_call_within_a_run_is_answered_from_the_cache(server: LocalServer, box: Toolbox) -> None:
    server.enqueue(
        calls_reply([("c1", "weather", '{"city": "Rome", "unit": "c"}')]),
        # The same question with its keys in another order and other spacing: one canonical key.
        calls_reply([("c2", "weather", '{ "unit": "c",  "city": "Rome" }')]),
        calls_reply([("c3", "weather", '{"city": "Oslo", "unit": "c"}')]),
        text_reply("done"),
    )
    events: list[RunEvent] = []
    result = ts.run(server.client(), model="m", messages=user(), toolbox=box, on_event=events.append)
    assert result.stop_reason == "done"
    assert ran == [("Rome", "c"), ("Oslo", "c")]
    first, second, third = (s.results[0] for s in result.steps[:3])
    assert not first.cached and second.cached and not third.cached
    assert second.timings.cached and second.timings.as_dict()["cached"] is True
    assert second.ok and second.value == first.value and second.content == first.content
    assert [e.cached for e in events if isinstance(e, CallFinished)] == [False, True, False]
    contents = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert contents[0] == contents[1]


def test_runs_on_one_ledger_share_its_cache_and_other_ledgers_do_not(
    server: LocalServer, box: Toolbox
) -> None:
    ledger = ts.MemoryLedger(scope="conversation-1")
    results = []
    for call_id in ("c1", "c2"):  # other ids: the ledger alone would run the second call again
        server.enqueue(
            calls_reply([(call_id, "weather", '{"city": "Rome", "unit": "c"}')]), text_reply("done")
        )
        results.append(ts.run(server.client(), model="m", messages=user(), toolbox=box, ledger=ledger))
    assert len(ran) == 1
    assert [r.results[0].cached for r in results] == [False, True]
    server.enqueue(calls_reply([("c9", "weather", '{"city": "Rome", "unit": "c"}')]), text_reply("done"))
    ts.run(server.client(), model="m", messages=user(), toolbox=box)  # a fresh ledger: its own cache
    assert len(ran) == 2


def test_a_cache_is_refused_on_a_tool_that_is_not_read_only() -> None:
    def book(room: str) -> str:
        """Book a room."""
        return room

    with pytest.raises(ValueError, match="read_only"):
        tool(cache=60)(book)
    with pytest.raises(ValueError, match="positive"):
        tool(read_only=True, cache=0)(book)
    assert tool(read_only=True, cache=1.5)(book).cache == 1.5


def test_the_cache_is_bounded_in_entries_and_bytes_and_entries_expire() -> None:
    cache = ResultCache(max_entries=2, max_bytes=100)
    cache.put("a", 1, "x" * 10, 60)
    cache.put("b", 2, "y" * 10, 60)
    assert cache.get("a") == (1, "x" * 10)  # "a" is now the most recently used
    cache.put("c", 3, "z" * 10, 60)
    assert cache.get("b") is None and len(cache) == 2
    cache.put("d", 4, "w" * 90, 60)  # over the byte bound with the others: they make room
    assert cache.get("d") == (4, "w" * 90) and cache.bytes <= 100
    cache.put("huge", 5, "h" * 200, 60)  # larger than the whole bound: not stored
    assert cache.get("huge") is None
    cache.put("e", 6, "e", 0)  # expired at once
    assert cache.get("e") is None
    with pytest.raises(ValueError):
        ResultCache(max_entries=0)
