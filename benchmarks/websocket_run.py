"""A long agent run over the Responses API (issue 49): WebSocket mode, ``previous_response_id`` over
HTTP and the stateless loop, toolstitch against openai-agents, on the same scripted model.

Run: ``.venv/bin/python benchmarks/websocket_run.py --repeat 5`` (``--no-frameworks`` skips the
openai-agents legs; ``--interop-python`` names their environment, else it is built with uv from
``interop/requirements.txt``; it runs this file again as ``--leg NAME --base-url URL
--websocket-url URL``).

The run: 10 steps; in each of the first 9 the model calls two read-only tools (``read_file`` and
``search_code``, 100 ms each), one call after the other in the stream, the arguments of each in 4
deltas; step 10 is a text answer. The model is ``toolstitch.testing.LocalServer(websocket=True,
item_delay=0.010)`` (real HTTP and a real WebSocket, the real ``openai`` client): its first event
comes 200 ms + 10 ms per input item of the request after it (a continuation sends only the new
items, a stateless request the whole history again), then an event every 15 ms.

Legs: toolstitch ``ts.run(api="responses")`` over WebSocket (``transport="websocket"``), over HTTP
with ``previous_response_id`` (``incremental=True``) and stateless (the default); openai-agents
0.24.0 ``Runner.run_streamed`` over WebSocket (``responses_websocket_session``), over HTTP with
``auto_previous_response_id=True``, and over HTTP with the full input each step.

Every figure is the median over ``--repeat`` runs (after one untimed run per leg) of the whole run,
from the call that starts it to its answer (a WebSocket leg opens its connection inside). Every run
is checked: 10 requests the server answered, 18 tool executions. The input items per run are counted
from the requests the server saw, and ``sockets`` is the WebSocket connections it accepted in the
leg (the untimed run included). Two lower bounds, computed from the script (not measured), with
the items a continuation sends: (a) the tools run after each response; (b) each read-only tool
starts as its arguments close, the results go when the stream ended and both tools finished.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from turn_latency import ROOT, interop_python  # benchmarks/ is on sys.path when run as a script

FIRST = 0.200  # seconds to the first event, on top of the items
ITEM = 0.010  # seconds per input item the server reads
DELAY = 0.015  # seconds between events
TOOL = 0.100  # seconds each tool takes
STEPS = 10
PIECES = 4  # argument deltas per call
ANSWER = "The handler is in module 9; it reads the config once and caches it. " * 2
QUESTION = "Where is the request handler defined, and how does it read its configuration?"
TOOLS = ("read_file", "search_code")
FRAMEWORK_LEGS = {
    "websocket": "openai-agents over WebSocket",
    "http-chained": "openai-agents over HTTP, auto_previous_response_id",
    "http-full": "openai-agents over HTTP, full input",
}


def arguments(name: str, step: int) -> str:
    if name == "read_file":
        return json.dumps({"path": f"src/app/module_{step:02}.py", "start": 1, "end": 200})
    return json.dumps({"query": f"def handler_{step}(request, config)", "limit": 20})


# ----------------------------------------------------------------------------- the model


def events(run: int, step: int) -> list[dict[str, Any]]:
    """Step ``step`` of run ``run``: two calls (ids unique to the run), or the answer at the end."""
    from toolstitch.testing import response_events

    rid = f"resp_{run}_{step}"
    if step == STEPS:
        return response_events(text=ANSWER, pieces=8, id=rid)
    calls = [(f"call_{run}_{step}_{i}", name, arguments(name, step)) for i, name in enumerate(TOOLS)]
    return response_events(calls, pieces=PIECES, id=rid)


def input_items(body: dict[str, Any]) -> int:
    given = body.get("input")
    return 1 if isinstance(given, str) else len(given) if isinstance(given, list) else 0


def locate(body: dict[str, Any]) -> tuple[int | None, int]:
    """(run, step) of a request: the step after the response it continues, else one past the tool
    outputs it carries (run None: the first step of a new run)."""
    previous = body.get("previous_response_id")
    if isinstance(previous, str):
        _, run, step = previous.split("_")
        return int(run), int(step) + 1
    given = body.get("input")
    outputs = [i for i in given if i.get("type") == "function_call_output"] if isinstance(given, list) else []
    if not outputs:
        return None, 1
    return int(outputs[-1]["call_id"].split("_")[1]), len(outputs) // len(TOOLS) + 1


def start_model() -> Any:
    from toolstitch.testing import LocalServer, StreamScript

    runs = itertools.count()

    def handler(body: dict[str, Any]) -> Any:
        run, step = locate(body)
        return StreamScript.responses(
            events(next(runs) if run is None else run, step), first_delay=FIRST, delay=DELAY
        )

    return LocalServer(websocket=True, item_delay=ITEM, handler=handler).start()


def runs_seen(requests: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The requests the server saw, cut into runs (a run starts with a step-1 request)."""
    runs: list[list[dict[str, Any]]] = []
    for body in requests:
        if locate(body) == (None, 1) or not runs:
            runs.append([])
        runs[-1].append(body)
    return runs


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"websocket_run: {message}")


def checked_items(leg: str, requests: Sequence[dict[str, Any]], runs: int) -> int:
    """Input items per run (the same in every run), after checking each run made its 10 requests,
    streamed, one per step."""
    seen = runs_seen(requests)
    check(len(seen) == runs, f"{leg}: the server saw {len(seen)} runs, not {runs}")
    counts = set()
    for bodies in seen:
        steps = [locate(b)[1] for b in bodies]
        check(steps == list(range(1, STEPS + 1)), f"{leg}: a run's requests were steps {steps}")
        streamed = [b.get("stream") is True or b.get("type") == "response.create" for b in bodies]
        check(all(streamed), f"{leg}: a request was not streamed")
        counts.add(sum(input_items(b) for b in bodies))
    check(len(counts) == 1, f"{leg}: runs sent different input items {sorted(counts)}")
    return counts.pop()


# ----------------------------------------------------------------------------- lower bounds


def new_items(step: int, stateless: bool = False) -> int:
    """Input items of a step: the question, then per step before two calls and their outputs
    (stateless), or only the outputs of the step before (a continuation)."""
    return 1 if step == 1 else 1 + 2 * len(TOOLS) * (step - 1) if stateless else len(TOOLS)


def bound(eager: bool, stateless: bool = False, first: float = FIRST, item: float = ITEM) -> float:
    """Seconds, by the script: per step its first event, then its stream and the tools, either
    after the stream (``eager=False``, bound a) or each from the delta that closes its arguments."""
    total = 0.0
    for step in range(1, STEPS + 1):
        script = events(0, step)
        closes = {e["item_id"]: k for k, e in enumerate(script) if e["type"].endswith("arguments.delta")}
        stream = (len(script) - 1) * DELAY
        if not closes:
            done = stream
        elif eager:
            done = max(stream, max(k * DELAY + TOOL for k in closes.values()))
        else:
            done = stream + TOOL
        total += first + item * new_items(step, stateless) + done
    return total


def modelled_ratio(first: float = FIRST, item: float = ITEM) -> float:
    """The stateless loop over the incremental one, both at bound (b)."""
    return bound(True, True, first, item) / bound(True, False, first, item)


# ----------------------------------------------------------------------------- toolstitch legs


def ts_leg(server: Any, repeat: int, **options: Any) -> list[float]:
    """``repeat`` timed runs after one untimed, each checked: done in 10 steps, 18 tool executions."""
    import toolstitch as ts

    executed: list[str] = []

    @ts.tool(read_only=True)
    def read_file(path: str, start: int, end: int) -> str:
        """Read lines of a file."""
        executed.append(path)
        time.sleep(TOOL)
        return f"{path}: lines {start}-{end}"

    @ts.tool(read_only=True)
    def search_code(query: str, limit: int) -> str:
        """Search the code."""
        executed.append(query)
        time.sleep(TOOL)
        return f"3 matches for {query!r}"

    client = server.client()
    times = []
    for _ in range(repeat + 1):
        executed.clear()
        t0 = time.perf_counter()
        result = ts.run(
            client,
            model="m",
            input=QUESTION,
            toolbox=[read_file, search_code],
            api="responses",
            max_steps=STEPS + 2,
            **options,
        )
        times.append(time.perf_counter() - t0)
        check(result.stop_reason == "done", f"toolstitch {options}: stop_reason {result.stop_reason!r}")
        check(len(result.steps) == STEPS, f"toolstitch {options}: {len(result.steps)} steps")
        check(len(executed) == 2 * (STEPS - 1), f"toolstitch {options}: {len(executed)} tool executions")
    client.close()
    return times[1:]


# ----------------------------------------------------------------------------- openai-agents legs


async def agents_run(leg: str, base_url: str, websocket_url: str) -> tuple[float, int]:
    """One run in the frameworks' environment: (seconds, tool executions)."""
    from agents import (
        Agent,
        ModelSettings,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        responses_websocket_session,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    executed: list[str] = []

    async def read_file(path: str, start: int, end: int) -> str:
        """Read lines of a file."""
        executed.append(path)
        await asyncio.sleep(TOOL)
        return f"{path}: lines {start}-{end}"

    async def search_code(query: str, limit: int) -> str:
        """Search the code."""
        executed.append(query)
        await asyncio.sleep(TOOL)
        return f"3 matches for {query!r}"

    def agent(model: Any) -> Any:
        return Agent(
            name="coder",
            instructions="Answer questions about the code base.",
            model=model,
            tools=[function_tool(read_file), function_tool(search_code)],
            model_settings=ModelSettings(parallel_tool_calls=True),
        )

    async def drain(result: Any) -> float:
        async for _ in result.stream_events():
            pass
        elapsed = time.perf_counter() - t0
        check(result.final_output == ANSWER, f"openai-agents {leg}: answer {result.final_output!r}")
        return elapsed

    chained = leg != "http-full"
    if leg == "websocket":
        async with responses_websocket_session(
            api_key="bench", base_url=base_url, websocket_base_url=websocket_url
        ) as session:
            t0 = time.perf_counter()
            result = session.run_streamed(
                agent("m"), QUESTION, max_turns=STEPS + 2, auto_previous_response_id=True
            )
            elapsed = await drain(result)
    else:
        client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
        model = OpenAIResponsesModel(model="m", openai_client=client)
        t0 = time.perf_counter()
        result = Runner.run_streamed(
            agent(model), QUESTION, max_turns=STEPS + 2, auto_previous_response_id=chained
        )
        elapsed = await drain(result)
        await client.close()
    return elapsed, len(executed)


def run_leg(leg: str, base_url: str, websocket_url: str, repeat: int) -> None:
    """In the frameworks' environment: one untimed run, then ``repeat`` timed, as JSON."""
    runs = [asyncio.run(agents_run(leg, base_url, websocket_url)) for _ in range(repeat + 1)]
    print(json.dumps({"times": [t for t, _ in runs[1:]], "executed": [n for _, n in runs]}))


def framework_leg(python: str, leg: str, server: Any, repeat: int) -> list[float]:
    command = [python, __file__, "--leg", leg, "--base-url", server.base_url]
    command += ["--websocket-url", server.websocket_base_url, "--repeat", str(repeat)]
    out = subprocess.run(
        command,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1", "PYTHONPATH": str(ROOT / "src")},
    ).stdout
    found = json.loads(out.strip().splitlines()[-1])
    executed = found["executed"]
    check(executed == [2 * (STEPS - 1)] * (repeat + 1), f"openai-agents {leg}: tool executions {executed}")
    return list(found["times"])


# ----------------------------------------------------------------------------- report


def measure(server: Any, label: str, runs: Callable[[], list[float]], repeat: int, rows: list[Any]) -> None:
    before, sockets = len(server.requests), server.websocket_connections
    times = runs()
    items = checked_items(label, server.requests[before:], repeat + 1)
    opened = server.websocket_connections - sockets
    rows.append((label, statistics.median(times), items, opened))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per leg (the median is shown)")
    parser.add_argument("--no-frameworks", action="store_true", help="skip the openai-agents legs")
    parser.add_argument("--interop-python", help="the frameworks' python (default: built with uv)")
    parser.add_argument("--leg", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--websocket-url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.leg:
        run_leg(args.leg, args.base_url, args.websocket_url, args.repeat)
        return
    load = os.getloadavg()[0]
    rows: list[tuple[str, float, int, int]] = []
    server = start_model()
    try:
        for label, options in (
            ("toolstitch over WebSocket", {"transport": "websocket", "store": False}),
            ("toolstitch over HTTP, previous_response_id", {"incremental": True}),
            ("toolstitch stateless over HTTP (default)", {}),
        ):
            measure(server, label, lambda o=options: ts_leg(server, args.repeat, **o), args.repeat, rows)
        python = None if args.no_frameworks else interop_python(args.interop_python)
        if python is None and not args.no_frameworks:
            print("(no uv: the openai-agents legs are skipped)")
        for leg, label in FRAMEWORK_LEGS.items() if python else ():
            measure(
                server,
                label,
                lambda leg=leg: framework_leg(python, leg, server, args.repeat),
                args.repeat,
                rows,
            )
    finally:
        server.stop()
    a, b = bound(False), bound(True)
    print(
        f"A {STEPS}-step run (2 read-only tools of {TOOL * 1000:.0f} ms in each of {STEPS - 1} steps); "
        f"first event {FIRST * 1000:.0f} ms + {ITEM * 1000:.0f} ms per input item, events "
        f"{DELAY * 1000:.0f} ms apart; median of {args.repeat} runs "
        f"(load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end)"
    )
    print(f"  {'leg':<52} {'median':>9} {'items/run':>10} {'sockets':>8} {'x bound b':>10}")
    for label, median, items, opened in rows:
        print(f"  {label:<52} {median * 1000:6.0f} ms {items:>10} {opened:>8} {median / b:>10.3f}")
    print(f"  {'lower bound (a), tools after each response':<52} {a * 1000:6.0f} ms")
    print(f"  {'lower bound (b), tools as their arguments close':<52} {b * 1000:6.0f} ms")
    medians = {label: median for label, median, _, _ in rows}
    ws = medians["toolstitch over WebSocket"]
    targets = [("bound (b)", b, 1.04), ("toolstitch stateless", medians[rows[2][0]], 0.75)]
    if FRAMEWORK_LEGS["websocket"] in medians:
        targets.insert(1, ("openai-agents over WebSocket", medians[FRAMEWORK_LEGS["websocket"]], 0.93))
    for name, other, limit in targets:
        ratio = ws / other
        met = "met" if ratio <= limit else "NOT met"
        print(f"  target: toolstitch WebSocket <= {limit:.2f}x {name}: {ratio:.3f}x, {met}")
    measured, modelled = medians[rows[2][0]] / medians[rows[1][0]], modelled_ratio()
    verdict = "inside" if 1.2 <= measured <= 1.4 else "OUTSIDE"
    print(
        f"  toolstitch stateless / incremental (HTTP): {measured:.3f}x measured, {modelled:.3f}x by the "
        f"script (bound b); the issue asks 1.20-1.40: {verdict}"
    )
    if not 1.2 <= measured <= 1.4:
        inside = [i / 1000 for i in range(1, 60) if 1.2 <= modelled_ratio(item=i / 1000) <= 1.4]
        if inside:
            span = f"{inside[0]:.3f}-{inside[-1]:.3f} s"
            print(f"    item_delay {span} (first_delay {FIRST} s) would bring the script inside")


if __name__ == "__main__":
    main()
