"""One turn with MCP tools (issue 45): toolstitch against openai-agents and pydantic-ai, the same MCP
server and the same model script, each run counting the session's start.

Run: ``.venv/bin/python benchmarks/mcp_turn.py`` (``--help`` for the knobs; ``--no-frameworks`` skips
the framework legs). Every figure is the median over ``--repeat`` runs (after one untimed run),
measured in one run, from before the server is opened to the model's answer (closing is not counted).

The MCP server (``benchmarks/_mcp_bench_server.py``, the ``mcp`` package's ``MCPServer`` over stdio)
takes 300 ms to start on top of the interpreter's own start, and 150 ms per call. The model
(``toolstitch.testing.LocalServer``, real HTTP, the real ``openai`` client) sends its first chunk
300 ms after the request, then a chunk every 15 ms: three calls one after the other, two to
read-only tools (``search_docs``, ``get_price``) and one that is not (``create_ticket``); then,
given the results, an answer in 30 chunks.

Each system opens the server for the run, as it would for a new conversation:

* toolstitch: ``ts.Toolbox(mcp=[mcp.stdio(..., trust_annotations=True)])`` and ``ts.run``. When the
  server lets a client keep its tool list (``ttlMs``, here 60 s), a new toolbox is built from the
  list this process already read and the session opens while the model writes; the two read-only
  calls start as their arguments close. The same run with a server that says nothing (``ttlMs`` 0)
  is shown too: then the toolbox waits for the server before the request, as the frameworks do.
* openai-agents ``MCPServerStdio`` (``cache_tools_list=True``) with ``Runner.run_streamed``;
* pydantic-ai ``MCPToolset`` (its FastMCP client over stdio) with ``async with agent`` and
  ``run_stream``; both in an environment of their own (``interop/requirements.txt`` plus
  pydantic-ai's ``mcp`` extra, built here with uv unless ``--interop-python`` names one), which runs
  this file again as ``--leg NAME --base-url URL``.

The lower bound: the session starts with the request (the interpreter's start measured once here,
plus the server's 300 ms), each read-only call as soon as its arguments are complete and the session
is open, the other once the stream ended, the results sent when all are back, then the answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from turn_latency import answer_chunks  # benchmarks/ is on sys.path when run as a script
from turn_latency import call_chunks as turn_call_chunks

FIRST = 0.300  # seconds to the model's first chunk
DELAY = 0.015  # seconds between chunks
START = 0.300  # the MCP server's start, on top of the interpreter's
CALL = 0.150  # seconds per MCP call
TTL_MS = 60_000
# name, fragments, read-only, arguments
CALLS = [
    ("search_docs", 10, True, {"query": "resetting the router to factory settings", "limit": 5}),
    ("get_price", 8, True, {"sku": "RT-AX58U", "currency": "EUR"}),
    ("create_ticket", 10, False, {"title": "Router resets itself", "body": "Every night at 3 am."}),
]
QUESTION = (
    "My router resets itself every night. What do the docs say, what does a new one cost? Open a ticket."
)
ROOT = Path(__file__).resolve().parents[1]
SERVER = str(Path(__file__).with_name("_mcp_bench_server.py"))


def server_env(ttl_ms: int) -> dict[str, str]:
    return {"START": str(START), "CALL": str(CALL), "LIST_TTL_MS": str(ttl_ms)}


# ----------------------------------------------------------------------------- the model


def call_chunks() -> list[dict[str, Any]]:
    """The three calls, one after the other, the header the first fragment of each (the chunks
    of benchmarks/turn_latency.py's model)."""
    return turn_call_chunks(
        [(f"call_{i}", name, json.dumps(args), n) for i, (name, n, _, args) in enumerate(CALLS)]
    )


def start_model() -> Any:
    """The local server playing the model: the calls first, the answer once the results came back."""
    from toolstitch.testing import LocalServer, StreamScript

    calls, answer = call_chunks(), answer_chunks()

    def handler(body: dict[str, Any]) -> Any:
        answered = any(isinstance(m, dict) and m.get("role") == "tool" for m in body.get("messages") or [])
        return StreamScript(answer if answered else calls, first_delay=FIRST, delay=DELAY)

    return LocalServer(handler=handler).start()


def interpreter_start(repeat: int = 5) -> float:
    """Seconds from spawning a fresh interpreter to its having imported the MCP server's modules
    (the part of a session's start before the server's own ``START``), measured here: the child
    prints the wall clock when its imports are done."""
    code = "import anyio, mcp.server.mcpserver, mcp.server.caching, mcp.types, time; print(time.time())"
    times = []
    for _ in range(repeat):
        t0 = time.time()
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
        times.append(float(out.stdout.strip()) - t0)
    return statistics.median(times)


def lower_bound(spawn: float) -> float:
    """Seconds, by the model above (see the module)."""
    from toolstitch.testing import StreamScript

    calls = call_chunks()

    def at(k: int) -> float:
        return FIRST + k * DELAY

    complete: dict[int, int] = {}
    for k, c in enumerate(calls):
        for frag in (c["choices"][0]["delta"].get("tool_calls") or []) if c["choices"] else []:
            complete[frag["index"]] = k
    end = at(len(StreamScript(calls).writes()) - 1)
    ready = spawn + START
    done = [
        max(ready, at(complete[i]) if read_only else end) + CALL
        for i, (_, _, read_only, _) in enumerate(CALLS)
    ]
    return max(max(done), end) + at(len(StreamScript(answer_chunks()).writes()) - 1)


# ----------------------------------------------------------------------------- toolstitch


def ts_turn(base_url: str, ttl_ms: int) -> float:
    import openai

    import toolstitch as ts
    from toolstitch import mcp

    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
    server = mcp.stdio(sys.executable, [SERVER], env=server_env(ttl_ms), name="docs", trust_annotations=True)
    t0 = time.perf_counter()
    box = ts.Toolbox(mcp=[server])
    try:
        result = ts.run(client, model="m", messages=[{"role": "user", "content": QUESTION}], toolbox=box)
        elapsed = time.perf_counter() - t0
    finally:
        box.close()
    assert result.stop_reason == "done" and [r.ok for r in result.results] == [True] * 3, result.results
    client.close()
    return elapsed


# ----------------------------------------------------------------------------- framework legs


async def agents_turn(base_url: str, ttl_ms: int) -> float:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from agents.mcp import MCPServerStdio
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    params: Any = {"command": sys.executable, "args": [SERVER], "env": {**os.environ, **server_env(ttl_ms)}}
    t0 = time.perf_counter()
    async with MCPServerStdio(
        params=params, cache_tools_list=True, client_session_timeout_seconds=30
    ) as server:
        agent = Agent(
            name="support",
            instructions="Help with the router.",
            model=OpenAIChatCompletionsModel(model="m", openai_client=client),
            mcp_servers=[server],
        )
        result = Runner.run_streamed(agent, QUESTION)
        async for _ in result.stream_events():
            pass
        elapsed = time.perf_counter() - t0
    assert result.final_output, result
    await client.close()
    return elapsed


async def pydantic_ai_turn(base_url: str, ttl_ms: int) -> float:
    from fastmcp.client.transports import StdioTransport
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    toolset = MCPToolset(StdioTransport(sys.executable, [SERVER], env={**os.environ, **server_env(ttl_ms)}))
    agent = Agent(OpenAIChatModel("m", provider=OpenAIProvider(openai_client=client)), toolsets=[toolset])
    t0 = time.perf_counter()
    async with agent:
        async with agent.run_stream(QUESTION) as result:
            output = await result.get_output()
        elapsed = time.perf_counter() - t0
    assert output, output
    await client.close()
    return elapsed


LEGS: dict[str, Callable[[str, int], Any]] = {
    "openai-agents MCPServerStdio": agents_turn,
    "pydantic-ai MCPToolset": pydantic_ai_turn,
}


def run_leg(name: str, base_url: str, repeat: int, ttl_ms: int) -> None:
    """In the frameworks' environment: one framework, ``repeat`` timed turns (after one untimed)."""
    leg = LEGS[name]
    asyncio.run(leg(base_url, ttl_ms))
    print(json.dumps([asyncio.run(leg(base_url, ttl_ms)) for _ in range(repeat)]))


def frameworks_python(given: str | None) -> str | None:
    if given:
        return given
    uv = ROOT / ".venv" / "bin" / "uv"
    if not uv.exists():
        return None
    env = Path(tempfile.mkdtemp(prefix="mcp-turn-")) / "env"
    subprocess.run([str(uv), "venv", "--quiet", "--python", sys.executable, str(env)], check=True)
    requirements = ["-r", str(ROOT / "interop" / "requirements.txt"), "pydantic-ai-slim[openai,mcp]==2.68.0"]
    subprocess.run(
        [str(uv), "pip", "install", "--quiet", "-e", f"{ROOT}[mcp]", *requirements],
        check=True,
        env={**os.environ, "VIRTUAL_ENV": str(env)},
    )
    return str(env / "bin" / "python")


# ----------------------------------------------------------------------------- report


def median_of(fn: Callable[[], float], repeat: int) -> tuple[float, float]:
    """(the first run, the median of ``repeat`` runs after it)."""
    first = fn()
    return first, statistics.median(fn() for _ in range(repeat))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-frameworks", action="store_true")
    parser.add_argument("--interop-python", help="a python with openai-agents, pydantic-ai and fastmcp")
    parser.add_argument("--leg", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--ttl-ms", type=int, default=TTL_MS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.leg:
        run_leg(args.leg, args.base_url, args.repeat, args.ttl_ms)
        return
    spawn = interpreter_start()
    bound = lower_bound(spawn)
    rows: list[tuple[str, float, float]] = []
    model = start_model()
    try:
        for ttl, label in (
            (TTL_MS, "toolstitch ts.run, server keeps ttlMs 60 s"),
            (0, "toolstitch ts.run, ttlMs 0"),
        ):
            first, median = median_of(lambda ttl=ttl: ts_turn(model.base_url, ttl), args.repeat)
            rows.append((label, first, median))
        python = None if args.no_frameworks else frameworks_python(args.interop_python)
        for name in LEGS if python else ():
            out = subprocess.run(
                [python, __file__, "--leg", name, "--base-url", model.base_url, "--repeat", str(args.repeat)],
                check=True,
                capture_output=True,
                text=True,
            )
            times = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append((name, float("nan"), statistics.median(times)))
    finally:
        model.stop()
    best = min((m for name, _, m in rows if not name.startswith("toolstitch")), default=None)
    print(
        f"One MCP turn: server start {START * 1000:.0f} ms + interpreter {spawn * 1000:.0f} ms, "
        f"{CALL * 1000:.0f} ms per call; median of {args.repeat} runs"
    )
    print(f"{'system':48} {'first ms':>9} {'median ms':>10} {'x best framework':>17} {'x bound':>8}")
    for name, first, median in rows:
        ratio = f"{median / best:.2f}" if best else "-"
        shown_first = "-" if first != first else f"{first * 1000:.0f}"
        print(f"{name:48} {shown_first:>9} {median * 1000:>10.0f} {ratio:>17} {median / bound:>8.2f}")
    print(f"{'lower bound':48} {'':>9} {bound * 1000:>10.0f}")


if __name__ == "__main__":
    main()
