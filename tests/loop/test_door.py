"""One door for every tool run (issue 41): eager starts, cache hits and given-up calls pass the same
sequence as a sealed call (admit, claim, confirm, cache, run within bounds, record).

Over real HTTP against the local server wherever the case is about a connection."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import toolstitch as ts
from tests.tools._support import Recorder, calls_reply, sealed, text_reply, user
from toolstitch.events import CallDispatched, RunEvent
from toolstitch.loop._run import RetryPolicy
from toolstitch.testing import LocalServer, StreamScript, response_events, tool_call_chunks
from toolstitch.tools import Toolbox, tool

FAST = RetryPolicy(attempts=3, initial=0.0, maximum=0.0, jitter=0.0)
RESPONSES_API = pytest.mark.skipif(
    importlib.util.find_spec("openai.types.responses") is None,
    reason="this openai release has no Responses API",
)
TWO = [("call_a", "lookup", '{"q": "one"}'), ("call_b", "lookup", '{"q": "two"}')]


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(check_history=True) as srv:
        yield srv


def _lookup_box(ran: Recorder, seconds: float) -> Toolbox:
    @tool(read_only=True)
    def lookup(q: str) -> str:
        """Look something up."""
        ran.add("lookup", q)
        time.sleep(seconds)
        return f"found {q}"

    return Toolbox([lookup])


def _ledger(kind: str, tmp_path: Path) -> ts.ClaimLedger | None:
    return ts.SQLiteLedger(tmp_path / "ledger.db") if kind == "sqlite" else None


def _dropped_then_whole(server: LocalServer) -> None:
    """The first stream drops after both calls' JSON closed (both started early), before the
    choice finished; the retry brings the same calls under the same ids."""
    chunks = tool_call_chunks(TWO, interleave=False)
    server.enqueue(
        StreamScript(chunks, cut_after=len(chunks) - 1, delay=0.01),
        StreamScript(tool_call_chunks(TWO, interleave=False), delay=0.01),
        text_reply("done"),
    )


# The tool is still running when the retry comes (0.5 s), or finished before it (0 s).
@pytest.mark.parametrize("seconds", [0.0, 0.5])
@pytest.mark.parametrize("ledger_kind", ["default", "sqlite"])
def test_eager_calls_of_a_dropped_stream_run_once(
    server: LocalServer, tmp_path: Path, ledger_kind: str, seconds: float
) -> None:
    ran = Recorder()
    _dropped_then_whole(server)
    events: list[RunEvent] = []
    with _lookup_box(ran, seconds) as box:
        result = ts.run(
            server.client(),
            model="m",
            messages=user(),
            toolbox=box,
            ledger=_ledger(ledger_kind, tmp_path),
            retry=FAST,
            on_event=events.append,
        )
    assert result.stop_reason == "done"
    assert sorted(ran.calls) == [("lookup", "one"), ("lookup", "two")]
    assert [r.value for r in result.steps[0].results] == ["found one", "found two"]
    assert all(r.timings.eager and not r.reused for r in result.steps[0].results)
    assert [e.eager for e in events if isinstance(e, CallDispatched)] == [True, True]


@pytest.mark.parametrize("ledger_kind", ["default", "sqlite"])
async def test_eager_calls_of_a_dropped_stream_run_once_async(
    server: LocalServer, tmp_path: Path, ledger_kind: str
) -> None:
    ran = Recorder()
    _dropped_then_whole(server)

    @tool(read_only=True)
    async def lookup(q: str) -> str:
        """Look something up."""
        ran.add("lookup", q)
        await asyncio.sleep(0.3)
        return f"found {q}"

    with Toolbox([lookup]) as box:
        result = await ts.arun(
            server.async_client(),
            model="m",
            messages=user(),
            toolbox=box,
            ledger=_ledger(ledger_kind, tmp_path),
            retry=FAST,
        )
    assert result.stop_reason == "done"
    assert sorted(ran.calls) == [("lookup", "one"), ("lookup", "two")]
    assert [r.value for r in result.steps[0].results] == ["found one", "found two"]


@RESPONSES_API
def test_an_eager_call_of_a_dropped_responses_stream_runs_once(server: LocalServer, tmp_path: Path) -> None:
    ran = Recorder()
    turn = response_events([TWO[0]])
    cut = next(i for i, e in enumerate(turn) if e["type"] == "response.output_item.done") + 1
    server.enqueue(
        StreamScript.responses(turn, cut_after=cut),
        StreamScript.responses(response_events([TWO[0]], id="resp_2")),
        StreamScript.responses(response_events(text="done", id="resp_3")),
    )
    with _lookup_box(ran, 0.3) as box:
        result = ts.run(
            server.client(),
            model="m",
            input="hi",
            toolbox=box,
            api="responses",
            ledger=ts.SQLiteLedger(tmp_path / "ledger.db"),
            retry=FAST,
        )
    assert result.output_text == "done"
    assert ran.calls == [("lookup", "one")]


def test_a_retry_that_brings_other_arguments_runs_the_new_call(server: LocalServer) -> None:
    """Only the very same call (id and text) adopts an earlier start; the other is discarded."""
    ran = Recorder()
    chunks = tool_call_chunks([TWO[0]], interleave=False)
    server.enqueue(
        StreamScript(chunks, cut_after=len(chunks) - 1, delay=0.01),
        calls_reply([("call_a", "lookup", '{"q": "other"}')]),
        text_reply("done"),
    )
    with _lookup_box(ran, 0.0) as box:
        result = ts.run(server.client(), model="m", messages=user(), toolbox=box, retry=FAST)
    assert [r.value for r in result.steps[0].results] == ["found other"]
    assert ran.calls == [("lookup", "one"), ("lookup", "other")]


# ----------------------------------------------------------------------------- the cache


def test_a_cache_hit_never_skips_the_confirmation(server: LocalServer) -> None:
    ran = Recorder()
    asked: list[str | None] = []

    @tool(read_only=True, cache=60, confirm=True)
    def price(item: str) -> str:
        """A price (asks first)."""
        ran.add("price", item)
        return "9 EUR"

    def confirm(call: ts.ToolCall, t: Any) -> bool:
        asked.append(call.id)
        return len(asked) == 1  # yes to the first call, no to every later one

    server.enqueue(
        calls_reply([("c1", "price", '{"item": "tea"}')]),
        calls_reply([("c2", "price", '{"item": "tea"}')]),
        text_reply("done"),
    )
    with Toolbox([price], confirm=confirm) as box:
        result = ts.run(server.client(), model="m", messages=user(), toolbox=box)
    first, second = (s.results[0] for s in result.steps[:2])
    assert asked == ["c1", "c2"]
    assert first.ok and not first.cached
    assert second.status == "refused" and second.reason == "not_approved" and not second.cached
    assert ran.calls == [("price", "tea")]


def test_a_yes_on_a_cached_call_is_answered_from_the_cache(server: LocalServer) -> None:
    ran = Recorder()

    @tool(read_only=True, cache=60, confirm=True)
    def price(item: str) -> str:
        """A price (asks first)."""
        ran.add("price", item)
        return "9 EUR"

    server.enqueue(
        calls_reply([("c1", "price", '{"item": "tea"}')]),
        calls_reply([("c2", "price", '{"item": "tea"}')]),
        text_reply("done"),
    )
    with Toolbox([price], confirm=lambda call, t: True) as box:
        result = ts.run(server.client(), model="m", messages=user(), toolbox=box)
    assert [s.results[0].cached for s in result.steps[:2]] == [False, True]
    assert ran.calls == [("price", "tea")]


def test_the_cache_never_answers_for_another_tool_of_the_same_name(server: LocalServer) -> None:
    def make(answer: str) -> ts.Tool:
        def search(q: str) -> str:
            """Search."""
            return answer

        return tool(read_only=True, cache=60)(search)

    ledger = ts.MemoryLedger(scope="shared")
    a, b = make("from A"), make("from B")
    values = []
    for call_id, made in (("c1", a), ("c2", b), ("c3", a)):
        server.enqueue(calls_reply([(call_id, "search", '{"q": "x"}')]), text_reply("done"))
        with Toolbox([made]) as box:
            result = ts.run(server.client(), model="m", messages=user(), toolbox=box, ledger=ledger)
        values.append((result.results[0].value, result.results[0].cached))
    # B is another function named search: it runs; the same tool object again is answered by A's.
    assert values == [("from A", False), ("from B", False), ("from A", True)]


def test_the_cache_key_is_the_tools_identity() -> None:
    from toolstitch.tools import ResultCache, canonical_key

    @tool(read_only=True, cache=60)
    def search(q: str) -> str:
        """Search."""
        return q

    class Args:
        parsed: ClassVar[dict[str, str]] = {"q": "x"}

    same = canonical_key(search, Args())
    assert same is not None and same == canonical_key(search, Args())
    other = tool(read_only=True, cache=60, description="Another search.")(search.fn)
    assert canonical_key(other, Args()) != same  # another definition
    cache = ResultCache()
    cache.put(same, "x", "x", 60)
    assert cache.get(canonical_key(other, Args()) or "") is None


# ----------------------------------------------------------------------------- given up


def test_a_call_given_up_while_its_warm_up_runs_never_starts() -> None:
    started: list[float] = []
    release = threading.Event()

    def warm() -> None:
        release.wait(1.5)

    @tool(warm=warm, timeout=0.3)
    def book(room: str) -> str:
        """Book a room (a side effect)."""
        started.append(time.monotonic())
        return room

    with Toolbox([book]) as box:
        (result,) = box.execute(sealed([("c1", "book", '{"room": "7"}')]))
        assert result.status == "not_started"
        release.set()
        time.sleep(0.5)  # the warm-up is over: a call that was given up still never starts
    assert started == []


async def test_an_async_call_given_up_while_its_warm_up_runs_never_starts() -> None:
    started: list[float] = []

    async def warm() -> None:
        await asyncio.sleep(1.0)

    @tool(warm=warm, timeout=0.3)
    async def book(room: str) -> str:
        """Book a room (a side effect)."""
        started.append(time.monotonic())
        return room

    with Toolbox([book]) as box:
        (result,) = await box.aexecute(sealed([("c1", "book", '{"room": "7"}')]))
        assert result.status == "not_started"
        await asyncio.sleep(1.2)
    assert started == []


def test_a_call_given_up_in_the_queue_never_starts() -> None:
    ran = Recorder()
    gate = threading.Event()

    @tool(timeout=5)
    def slow(n: int) -> int:
        """Holds the only worker."""
        gate.wait(5)
        ran.add("slow", n)
        return n

    @tool(timeout=0.3)
    def quick(n: int) -> int:
        """Waits for a worker."""
        ran.add("quick", n)
        return n

    with Toolbox([slow, quick], max_workers=1) as box:
        holder = threading.Thread(target=box.execute, args=(sealed([("c1", "slow", '{"n": 1}')]),))
        holder.start()
        time.sleep(0.2)
        (result,) = box.execute(sealed([("c2", "quick", '{"n": 2}')]))
        assert result.status == "not_started"
        gate.set()
        holder.join(5)
        time.sleep(0.3)
    assert ran.calls == [("slow", 1)]


# ----------------------------------------------------------------------------- one door


def test_every_run_of_a_tool_function_passes_the_door() -> None:
    """The code itself: a tool's function is handed to a worker in one place (``_dispatch``), which
    only ``_launch`` calls, which only the ways through the door call, each after the claim and the
    cache."""
    import ast

    import toolstitch

    root = Path(toolstitch.__file__).parent
    uses: dict[str, list[str]] = {}
    callers: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            where = f"{path.relative_to(root)}:{fn.name}"
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and node.attr == "fn" and isinstance(node.ctx, ast.Load):
                    uses.setdefault(where, []).append(ast.unparse(node))
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):  # called or handed on
                    callers.setdefault(node.id, set()).add(where)
    # Tool.__call__ is the user's own call of their function (``search("x")``), not a run; the
    # definition module reads ``.fn`` to unwrap a Tool given to ``tool()`` again; the cache reads
    # the function's identity (its key), never calls it.
    allowed = {
        "tools/_executor.py:_dispatch",
        "tools/_cache.py:tool_identity",
        "tools/_definition.py:__call__",
        "tools/_definition.py:from_function",
    }
    assert set(uses) <= allowed, uses
    assert callers["_invoke_sync"] == callers["_invoke_async"] == {"tools/_executor.py:_dispatch"}
    assert callers["_dispatch"] == {"tools/_executor.py:_launch"}
    # A sealed call (_run_job), an eager start on a loop (_flow, through _enter) or in a sync run's
    # reading thread (_now): each claims first, and the ledger's verdict is read in one place.
    ways_in = {"tools/_executor.py:_run_job", "tools/_executor.py:_flow", "tools/_executor.py:_now"}
    assert callers["_launch"] == ways_in
    assert callers["_enter"] == {"tools/_executor.py:_flow"}
    assert callers["_claim"] == {"tools/_executor.py:_run_job", "tools/_executor.py:_enter"}
    assert callers["_decided"] == {"tools/_executor.py:_claim", "tools/_executor.py:_now"}
    assert callers["_from_cache"] == {
        "tools/_executor.py:_run_job",
        "tools/_executor.py:_enter",
        "tools/_executor.py:_now",
    }


def test_timed_out_sync_tools_do_not_hold_the_workers_the_next_call_needs() -> None:
    release = threading.Event()
    ran = Recorder()

    @tool(timeout=0.3)
    def stuck(n: int) -> int:
        """Ignores its timeout."""
        release.wait(10)
        return n

    @tool(timeout=2)
    def fast(n: int) -> int:
        """Quick."""
        ran.add("fast", n)
        return n

    with Toolbox([stuck, fast], max_workers=2) as box:
        try:
            first = box.execute(sealed([("c1", "stuck", '{"n": 1}'), ("c2", "stuck", '{"n": 2}')]))
            assert [r.status for r in first] == ["timeout", "timeout"]
            (result,) = box.execute(sealed([("c3", "fast", '{"n": 3}')]))
            assert result.status == "ok" and result.value == 3  # both workers' threads are still stuck
            assert ran.calls == [("fast", 3)]
        finally:
            release.set()


def test_a_function_that_cannot_be_keyed_is_not_cached_and_never_raises() -> None:
    """A callable whose ``__hash__`` raises: its calls run (uncached); nothing reaches the caller."""
    ran = Recorder()

    class Hostile:
        __name__ = "lookup"
        __doc__ = "Look up."

        def __hash__(self) -> int:
            raise ValueError("no hash for you")

        def __call__(self, q: str) -> str:
            ran.add("lookup", q)
            return q

    t = ts.Tool.from_schema(
        Hostile(),
        name="lookup",
        description="Look up.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        read_only=True,
        cache=60,
    )
    from toolstitch.tools import ResultCache, execute

    cache = ResultCache()
    with Toolbox([t]) as box:
        for call_id in ("c1", "c2"):
            (result,) = execute(box, sealed([(call_id, "lookup", '{"q": "x"}')]), cache=cache)
            assert result.ok and not result.cached
    assert ran.calls == [("lookup", "x"), ("lookup", "x")]


def test_an_id_the_history_already_carries_is_not_claimed_early_under_it(server: LocalServer) -> None:
    """Quirk Q39 (TGI, SGLang: every call is "0"): the second turn's call gets a fresh id in the
    history, so it is not started early under the old one (which the ledger holds as finished):
    it runs after the seal, under the id the history carries, and is not taken for the first."""
    ran = Recorder()
    same = [("0", "lookup", '{"q": "one"}')]
    server.enqueue(calls_reply(same), calls_reply(same), text_reply("done"))
    events: list[RunEvent] = []
    with _lookup_box(ran, 0.0) as box:
        result = ts.run(server.client(), model="m", messages=user(), toolbox=box, on_event=events.append)
    assert result.stop_reason == "done"
    assert ran.calls == [("lookup", "one"), ("lookup", "one")]
    assert [e.eager for e in events if isinstance(e, CallDispatched)] == [True, False]
    assert not any(r.reused for r in result.results)
    ids = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
    assert ids[0] == "0" and ids[1] != "0"
