"""The fastest turn (issue 30): one hotel-search turn, ts.run as a user writes it against the frameworks.

Run: ``.venv/bin/python benchmarks/turn_latency.py`` (``--help`` for the knobs; ``--no-frameworks``
skips the framework legs). Every figure is a median over ``--repeat`` runs, measured in one run.

The turn, on ``toolstitch.testing.LocalServer`` (real HTTP, the real ``openai`` client): the first
chunk comes 300 ms after the request, then a chunk every 15 ms. The model calls three tools in
parallel, one call after the other in the stream: ``search_hotels`` (25 fragments, 600 ms of work),
``get_weather`` (8 fragments, 200 ms), ``convert_currency`` (12 fragments, 100 ms). Each tool pays a
150 ms connection setup on its first use in a turn. Then the model answers in 30 chunks.

Systems:

* ``ts.run`` as a user writes it: ``@ts.tool(read_only=True, warm=connect)``, no other option
  (eager dispatch and warm-ups are the defaults that act); also ``eager=False`` for reference;
* a hand-written SDK loop (stream, join the fragments, run the calls in parallel threads, ask again);
* openai-agents ``Runner.run_streamed``, pydantic-ai ``run_stream``, LangChain's
  ``create_agent`` (``astream(stream_mode="messages")``) and a langchain-openai ``bind_tools`` /
  ``astream`` loop (tools in parallel), in the interop environment
  (``interop/requirements.txt``, built here with uv unless ``--interop-python`` names one), which
  runs this file again as ``--leg NAME --base-url URL``;
* the computed lower bound: every tool starting the moment its arguments are complete, its setup
  done before (warmed from the request), the results sent when the last one is ready and the stream
  ended, and the answer streamed at the same pace.

The same turn over the Responses API: ``ts.run(api="responses")`` and its lower bound. The
fail-fast turn: the model's first call goes wrong early in a long call (a string where an integer
belongs, then 150 more fragments), its second attempt is right; time to the answer with and without
``fail_fast=True``, and the chunks the server never had to generate.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

FIRST = 0.300  # seconds to the first chunk
DELAY = 0.015  # seconds between chunks
SETUP = 0.150  # each tool's first-use setup, per turn
ANSWER_CHUNKS = 30
# name, fragments, seconds of work, arguments
CALLS = [
    ("search_hotels", 25, 0.600, {"city": "Lisbon", "check_in": "2026-05-01", "nights": 3, "max_price": 180}),
    ("get_weather", 8, 0.200, {"city": "Lisbon", "day": "2026-05-01"}),
    ("convert_currency", 12, 0.100, {"amount": 180, "source": "EUR", "target": "USD"}),
]
WORK = {name: work for name, _, work, _ in CALLS}
QUESTION = "Find me a hotel in Lisbon for May 1st, 3 nights, under 180 EUR; weather and the price in USD?"
ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- the tools


class Connections:
    """The tools' backends for one turn: the first use of each pays ``SETUP`` (a connection)."""

    def __init__(self) -> None:
        self.ready: set[str] = set()
        self.lock = threading.Lock()
        self.locks = {name: threading.Lock() for name in WORK}

    def connect(self, name: str) -> None:
        with self.locks[name]:
            if name not in self.ready:
                time.sleep(SETUP)
                self.ready.add(name)

    async def aconnect(self, name: str) -> None:
        if name not in self.ready:
            self.ready.add(name)
            await asyncio.sleep(SETUP)

    def use(self, name: str) -> str:
        self.connect(name)
        time.sleep(WORK[name])
        return f"{name}: ok"

    async def ause(self, name: str) -> str:
        await self.aconnect(name)
        await asyncio.sleep(WORK[name])
        return f"{name}: ok"


def search_hotels(city: str, check_in: str, nights: int, max_price: int) -> str:
    """Search hotels."""
    raise NotImplementedError  # the signatures give every system the same schema


def get_weather(city: str, day: str) -> str:
    """The weather forecast."""
    raise NotImplementedError


def convert_currency(amount: float, source: str, target: str) -> str:
    """Convert an amount."""
    raise NotImplementedError


SIGNATURES: dict[str, Callable[..., Any]] = {
    "search_hotels": search_hotels,
    "get_weather": get_weather,
    "convert_currency": convert_currency,
}


def bound_to(conns: Connections, name: str) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> str:
        return conns.use(name)

    fn.__name__, fn.__doc__ = name, SIGNATURES[name].__doc__
    fn.__signature__ = inspect.signature(SIGNATURES[name])  # type: ignore[attr-defined]
    fn.__annotations__ = dict(SIGNATURES[name].__annotations__)
    return fn


def abound_to(conns: Connections, name: str) -> Callable[..., Any]:
    async def fn(*args: Any, **kwargs: Any) -> str:
        return await conns.ause(name)

    fn.__name__, fn.__doc__ = name, SIGNATURES[name].__doc__
    fn.__signature__ = inspect.signature(SIGNATURES[name])  # type: ignore[attr-defined]
    fn.__annotations__ = dict(SIGNATURES[name].__annotations__)
    return fn


# ----------------------------------------------------------------------------- the model


def _fragments(text: str, n: int) -> list[str]:
    bounds = [round(k * len(text) / n) for k in range(n + 1)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def call_chunks(calls: Sequence[tuple[str, str, str, int]]) -> list[dict[str, Any]]:
    """``(id, name, arguments, fragments)``: one call after the other, the header the first fragment."""
    from toolstitch.testing import chunk

    out = [chunk(delta={"role": "assistant", "content": None})]
    for i, (call_id, name, arguments, n) in enumerate(calls):
        pieces = _fragments(arguments, n - 1)
        header = {"index": i, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        out.append(chunk(delta={"tool_calls": [header]}))
        out += [chunk(delta={"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in pieces]
    out.append(chunk(delta={}, finish_reason="tool_calls"))
    return out


def answer_chunks() -> list[dict[str, Any]]:
    from toolstitch.testing import chunk

    words = [f"word{k} " for k in range(ANSWER_CHUNKS - 1)]
    out = [chunk(delta={"role": "assistant", "content": words[0]})]
    out += [chunk(delta={"content": w}) for w in words[1:]]
    out.append(chunk(delta={}, finish_reason="stop"))
    return out


def turn_calls(prefix: str = "call") -> list[tuple[str, str, str, int]]:
    return [(f"{prefix}_{i}", name, json.dumps(args), n) for i, (name, n, _, args) in enumerate(CALLS)]


def responses_calls(prefix: str = "call") -> list[dict[str, Any]]:
    """The same three calls as Responses API events: each call's header (``output_item.added``)
    then its arguments in ``fragments - 1`` deltas, one call after the other."""
    from toolstitch.testing import response_events

    calls = turn_calls(prefix)
    fragments = {call_id: n for call_id, _, _, n in calls}
    by_item: dict[str, int] = {}
    events: list[dict[str, Any]] = []
    for e in response_events([(c, name, args) for c, name, args, _ in calls], pieces=1):
        if e.get("type") == "response.output_item.added":
            by_item[e["item"]["id"]] = fragments[e["item"]["call_id"]]
        if e.get("type") == "response.function_call_arguments.delta":
            events += [{**e, "delta": piece} for piece in _fragments(e["delta"], by_item[e["item_id"]] - 1)]
        else:
            events.append(e)
    for k, e in enumerate(events):
        if "sequence_number" in e:
            e["sequence_number"] = k
    return events


def responses_answer() -> list[dict[str, Any]]:
    from toolstitch.testing import response_events

    return response_events(
        text="".join(f"word{k} " for k in range(ANSWER_CHUNKS - 1)), pieces=ANSWER_CHUNKS - 2
    )


def start_server() -> Any:
    """The local server playing the model: calls first, the answer once the results came back."""
    from toolstitch.testing import LocalServer, StreamScript

    calls, answer = call_chunks(turn_calls()), answer_chunks()
    r_calls, r_answer = responses_calls(), responses_answer()

    def handler(body: dict[str, Any]) -> Any:
        if "input" in body:
            items = body["input"] if isinstance(body["input"], list) else []
            answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
            script = StreamScript.responses(r_answer if answered else r_calls, first_delay=FIRST, delay=DELAY)
            if body.get("stream") is not True:  # a model answers whole only once it wrote it all
                time.sleep(FIRST + DELAY * (len(script.writes()) - 1))
            return script
        answered = any(isinstance(m, dict) and m.get("role") == "tool" for m in body.get("messages") or [])
        return StreamScript(answer if answered else calls, first_delay=FIRST, delay=DELAY)

    server = LocalServer(handler=handler).start()
    return server, (calls, answer), (r_calls, r_answer)


def lower_bound(first: int, done_writes: int, complete: dict[str, int], answer_writes: int) -> float:
    """Seconds: each tool starts when its last fragment arrives (write index in ``complete``) and
    its warm-up (from the request) is over; the results go when all are ready and the stream ended
    (its last write, ``done_writes - 1``); then the answer streams (``answer_writes``)."""

    def at(k: int) -> float:
        return FIRST + k * DELAY

    ready = max(max(at(k), SETUP) + WORK[name] for name, k in complete.items())
    results = max(ready, at(done_writes - 1))
    return results + at(answer_writes - 1)


def chat_bound(calls: list[Any], answer: list[Any]) -> float:
    from toolstitch.testing import StreamScript

    complete: dict[str, int] = {}
    for k, c in enumerate(calls):
        for frag in (c["choices"][0]["delta"].get("tool_calls") or []) if c["choices"] else []:
            name = CALLS[frag["index"]][0]
            complete[name] = k
    writes = len(StreamScript(calls).writes())
    return lower_bound(0, writes, complete, len(StreamScript(answer).writes()))


def responses_bound(calls: list[Any], answer: list[Any]) -> float:
    from toolstitch.testing import StreamScript

    complete: dict[str, int] = {}
    names: dict[int, str] = {}
    for k, e in enumerate(calls):
        if e.get("type") == "response.output_item.added":
            names[e["output_index"]] = e["item"]["name"]
        if e.get("type") == "response.function_call_arguments.delta":
            complete[names[e["output_index"]]] = k
    return lower_bound(
        0, len(StreamScript.responses(calls).writes()), complete, len(StreamScript.responses(answer).writes())
    )


# ----------------------------------------------------------------------------- the legs in this env


def ts_turn(base_url: str, api: str = "chat", **options: Any) -> float:
    import openai

    import toolstitch as ts

    conns = Connections()
    tools = [
        ts.tool(read_only=True, warm=lambda name=name: conns.connect(name), name=name)(bound_to(conns, name))
        for name in WORK
    ]
    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
    with ts.Toolbox(tools) as box:
        t0 = time.perf_counter()
        if api == "responses":
            result = ts.run(client, model="m", input=QUESTION, toolbox=box, api="responses", **options)
        else:
            result = ts.run(
                client, model="m", messages=[{"role": "user", "content": QUESTION}], toolbox=box, **options
            )
        elapsed = time.perf_counter() - t0
    assert result.stop_reason == "done" and all(r.ok for r in result.results), result.results
    client.close()
    return elapsed


def sdk_turn(base_url: str) -> float:
    """The loop people write with the SDK alone: stream, join the fragments by index, run the calls
    in parallel threads, send the results, stream the answer."""
    import openai

    conns = Connections()
    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
    tools = [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
        for name in WORK
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        while True:
            calls: dict[int, dict[str, Any]] = {}
            text = ""
            for c in client.chat.completions.create(model="m", messages=messages, tools=tools, stream=True):
                if not c.choices:
                    continue
                delta = c.choices[0].delta
                text += delta.content or ""
                for tc in delta.tool_calls or []:
                    slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = tc.id or slot["id"]
                    if tc.function is not None:
                        slot["name"] += tc.function.name or ""
                        slot["arguments"] += tc.function.arguments or ""
            if not calls:
                break
            ordered = [calls[i] for i in sorted(calls)]
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in ordered
                    ],
                }
            )
            futures = [
                pool.submit(conns.use, c["name"]) for c in ordered if json.loads(c["arguments"]) is not None
            ]
            for c, f in zip(ordered, futures, strict=True):
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": f.result()})
    elapsed = time.perf_counter() - t0
    assert conns.ready == set(WORK), conns.ready
    client.close()
    return elapsed


def sdk_runner_turn(base_url: str, best: bool) -> float:
    """The SDK's own ``ResponsesToolRunner``: its defaults (no streaming, calls two at a time), or
    its best configuration (``stream=True, eager=True, max_concurrent_calls=3``, every function
    ``independent=True``)."""
    import openai
    import pydantic
    from openai.lib._tools import pydantic_responses_function_tool
    from openai.lib.responses_tool_runner import RegisteredFunction, ResponsesToolRunner

    conns = Connections()
    functions = []
    for name, fn in SIGNATURES.items():
        fields: Any = {p.name: (p.annotation, ...) for p in inspect.signature(fn).parameters.values()}
        model = pydantic.create_model(name, **fields)
        functions.append(
            RegisteredFunction.from_tool(
                pydantic_responses_function_tool(model, name=name, description=fn.__doc__),
                execute=lambda args, name=name: conns.use(name),
                independent=best,
            )
        )
    runner = ResponsesToolRunner(functions=functions)
    options: dict[str, Any] = {"stream": True, "eager": True, "max_concurrent_calls": 3} if best else {}
    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
    t0 = time.perf_counter()
    response = runner.run(client, {"model": "m", "input": QUESTION}, **options)
    elapsed = time.perf_counter() - t0
    assert response.output_text and conns.ready == set(WORK), conns.ready
    client.close()
    return elapsed


def has_responses_runner() -> bool:
    try:
        from openai.lib.responses_tool_runner import ResponsesToolRunner  # noqa: F401
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------------------- framework legs


async def agents_turn(base_url: str) -> float:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    conns = Connections()
    client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    agent = Agent(
        name="hotels",
        instructions="Help with trips.",
        model=OpenAIChatCompletionsModel(model="m", openai_client=client),
        tools=[function_tool(abound_to(conns, name)) for name in WORK],
    )
    t0 = time.perf_counter()
    result = Runner.run_streamed(agent, QUESTION)
    async for _ in result.stream_events():
        pass
    elapsed = time.perf_counter() - t0
    assert result.final_output and conns.ready == set(WORK), conns.ready
    await client.close()
    return elapsed


async def pydantic_ai_turn(base_url: str) -> float:
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    conns = Connections()
    client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    agent = Agent(OpenAIChatModel("m", provider=OpenAIProvider(openai_client=client)))
    for name in WORK:
        agent.tool_plain(abound_to(conns, name))
    t0 = time.perf_counter()
    async with agent.run_stream(QUESTION) as result:
        output = await result.get_output()
    elapsed = time.perf_counter() - t0
    assert output and conns.ready == set(WORK), conns.ready
    await client.close()
    return elapsed


async def langchain_turn(base_url: str) -> float:
    from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI

    conns = Connections()
    tools = {name: StructuredTool.from_function(coroutine=abound_to(conns, name), name=name) for name in WORK}
    llm = ChatOpenAI(model="m", api_key="bench", base_url=base_url, max_retries=0).bind_tools(
        list(tools.values())
    )
    messages: list[BaseMessage] = [HumanMessage(QUESTION)]
    t0 = time.perf_counter()
    while True:
        message: Any = None
        async for piece in llm.astream(messages):
            message = piece if message is None else message + piece
        messages.append(message)
        if not message.tool_calls:
            break
        outputs = await asyncio.gather(*(tools[c["name"]].ainvoke(c["args"]) for c in message.tool_calls))
        for call, output in zip(message.tool_calls, outputs, strict=True):
            messages.append(ToolMessage(str(output), tool_call_id=call["id"]))
    elapsed = time.perf_counter() - t0
    assert conns.ready == set(WORK), conns.ready
    return elapsed


async def langchain_agent_turn(base_url: str) -> float:
    """LangChain's own agent (``langchain.agents.create_agent``, a LangGraph graph whose tool node
    runs the calls of one message concurrently), streamed with ``astream(stream_mode="messages")``:
    the same model, the same tools as the ``bind_tools`` loop."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessageChunk
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI

    conns = Connections()
    tools = [StructuredTool.from_function(coroutine=abound_to(conns, name), name=name) for name in WORK]
    agent = create_agent(
        ChatOpenAI(model="m", api_key="bench", base_url=base_url, max_retries=0), tools=tools
    )
    pieces = 0
    answer = ""
    t0 = time.perf_counter()
    async for message, _metadata in agent.astream(
        {"messages": [{"role": "user", "content": QUESTION}]}, stream_mode="messages"
    ):
        if isinstance(message, AIMessageChunk):
            pieces += 1
            answer += message.text if isinstance(message.text, str) else ""
    elapsed = time.perf_counter() - t0
    assert conns.ready == set(WORK), conns.ready
    # Streamed, chunk by chunk (the calls' fragments and the answer's words), not read whole.
    assert pieces >= ANSWER_CHUNKS + sum(n for _, n, _, _ in CALLS) and answer.startswith("word0"), (
        pieces,
        answer,
    )
    return elapsed


LEGS: dict[str, Callable[[str], Any]] = {
    "openai-agents Runner.run_streamed": agents_turn,
    "pydantic-ai run_stream": pydantic_ai_turn,
    "langchain create_agent (astream, messages)": langchain_agent_turn,
    "langchain-openai bind_tools loop": langchain_turn,
}


def run_leg(name: str, base_url: str, repeat: int) -> None:
    """In the interop environment: one framework, ``repeat`` timed turns (after one untimed), as JSON."""
    leg = LEGS[name]
    asyncio.run(leg(base_url))
    times = [asyncio.run(leg(base_url)) for _ in range(repeat)]
    print(json.dumps(times))


def interop_python(given: str | None) -> str | None:
    """The interop environment's python: ``given``, else one built with uv (seconds, from its cache)."""
    if given:
        return given
    uv = ROOT / ".venv" / "bin" / "uv"
    if not uv.exists():
        return None
    env = Path(tempfile.mkdtemp(prefix="turn-interop-")) / "env"
    subprocess.run([str(uv), "venv", "--quiet", "--python", sys.executable, str(env)], check=True)
    subprocess.run(
        [
            str(uv),
            "pip",
            "install",
            "--quiet",
            "-e",
            str(ROOT),
            "-r",
            str(ROOT / "interop" / "requirements.txt"),
        ],
        check=True,
        env={**os.environ, "VIRTUAL_ENV": str(env)},
    )
    return str(env / "bin" / "python")


# ----------------------------------------------------------------------------- fail fast


def fail_fast_turn(repeat: int) -> tuple[float, float, int, int]:
    """Medians with and without ``fail_fast``, and the chunks the server did not generate (of how many)."""
    import openai

    import toolstitch as ts
    from toolstitch.testing import LocalServer, StreamScript, chunk

    bad_head = {
        "index": 0,
        "id": "bad",
        "type": "function",
        "function": {"name": "search_hotels", "arguments": ""},
    }
    tail = [', "notes": "' + "quiet room, high floor" + '"'] * 150
    # ``nights`` is an integer: the string it begins can never be one (refused early, in the core).
    pieces = ['{"city": "Lisbon", ', '"nights": "two"', *tail, "}"]
    wrong = [chunk(delta={"role": "assistant", "content": None}), chunk(delta={"tool_calls": [bad_head]})]
    wrong += [chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    wrong.append(chunk(delta={}, finish_reason="tool_calls"))
    right = call_chunks(turn_calls("again")[:1])
    answer = answer_chunks()
    results: dict[bool, list[float]] = {False: [], True: []}
    saved: list[tuple[int, int]] = []
    with LocalServer() as server:
        for n in range(repeat + 1):
            for fail_fast in (False, True):
                conns = Connections()
                tools = [
                    ts.tool(
                        read_only=True, warm=lambda name=name, conns=conns: conns.connect(name), name=name
                    )(bound_to(conns, name))
                    for name in WORK
                ]
                server.enqueue(
                    *(StreamScript(s, first_delay=FIRST, delay=DELAY) for s in (wrong, right, answer))
                )
                before = len(server.streamed)
                client = openai.OpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
                with ts.Toolbox(tools) as box:
                    t0 = time.perf_counter()
                    result = ts.run(
                        client,
                        model="m",
                        messages=[{"role": "user", "content": QUESTION}],
                        toolbox=box,
                        fail_fast=fail_fast,
                    )
                    elapsed = time.perf_counter() - t0
                assert result.stop_reason == "done", result.stop_reason
                client.close()
                if n:
                    results[fail_fast].append(elapsed)
                    if fail_fast:
                        deadline = time.monotonic() + 5
                        while len(server.streamed) <= before and time.monotonic() < deadline:
                            time.sleep(0.01)
                        saved.append(server.streamed[before])
    sent, scripted = saved[-1]
    return statistics.median(results[False]), statistics.median(results[True]), scripted - sent, scripted


# ----------------------------------------------------------------------------- main


def median_of(fn: Callable[[], float], repeat: int) -> float:
    fn()  # untimed: connections, imports, first-use self-checks
    return statistics.median(fn() for _ in range(repeat))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="timed turns per system (the median is shown)")
    parser.add_argument("--no-frameworks", action="store_true", help="skip the framework legs")
    parser.add_argument("--interop-python", help="the interop environment's python (default: built with uv)")
    parser.add_argument("--leg", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.leg:
        run_leg(args.leg, args.base_url, args.repeat)
        return
    server, (calls, answer), (r_calls, r_answer) = start_server()
    url = server.base_url
    rows: list[tuple[str, float]] = []
    try:
        bound = chat_bound(calls, answer)
        default = median_of(lambda: ts_turn(url), args.repeat)
        rows.append(("ts.run, as a user writes it (read_only tools with warm=)", default))
        rows.append(("ts.run(eager=False)", median_of(lambda: ts_turn(url, eager=False), args.repeat)))
        rows.append(("a hand-written SDK loop", median_of(lambda: sdk_turn(url), args.repeat)))
        frameworks: list[tuple[str, float]] = []
        if not args.no_frameworks:
            python = interop_python(args.interop_python)
            if python is None:
                print("(no uv: the framework legs are skipped)")
            for name in LEGS if python else ():
                out = subprocess.run(
                    [python, __file__, "--leg", name, "--base-url", url, "--repeat", str(args.repeat)],
                    check=True,
                    capture_output=True,
                    text=True,
                    env={**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1", "PYTHONPATH": str(ROOT / "src")},
                ).stdout
                frameworks.append((name, statistics.median(json.loads(out.strip().splitlines()[-1]))))
        rows[1:1] = frameworks
        r_bound = responses_bound(r_calls, r_answer)
        r_ts = median_of(lambda: ts_turn(url, api="responses"), args.repeat)
        r_lazy = median_of(lambda: ts_turn(url, api="responses", eager=False), args.repeat)
        runner: list[tuple[str, float]] = []
        if has_responses_runner():
            plain_runner = median_of(lambda: sdk_runner_turn(url, False), args.repeat)
            runner.append(("ResponsesToolRunner, defaults", plain_runner))
            runner.append(
                (
                    "ResponsesToolRunner(stream, eager, 3 concurrent, independent)",
                    median_of(lambda: sdk_runner_turn(url, True), args.repeat),
                )
            )
    finally:
        server.stop()
    ts_default = rows[0][1]
    pace = f"first chunk {FIRST * 1000:.0f} ms, a chunk every {DELAY * 1000:.0f} ms"
    print(f"chat turn, median of {args.repeat} ({pace})")
    print(f"  {'system':<60} {'turn':>9}  {'/ lower bound':>13}")
    for name, value in rows:
        print(f"  {name:<60} {value * 1000:7.0f} ms  {value / bound:12.3f}x")
    print(f"  {'the lower bound (computed)':<60} {bound * 1000:7.0f} ms")
    if frameworks:
        best = min(frameworks, key=lambda r: r[1])
        print(f"  ts.run / the best framework ({best[0]}): {ts_default / best[1]:.3f}x")
    print(f"  ts.run / the lower bound: {ts_default / bound:.3f}x")
    print("Responses API turn")
    for label, value in (
        ('ts.run(api="responses"), as a user writes it', r_ts),
        ('ts.run(api="responses", eager=False)', r_lazy),
    ):
        print(f"  {label:<60} {value * 1000:7.0f} ms  {value / r_bound:12.3f}x")
    for label, value in runner:
        print(f"  {label:<60} {value * 1000:7.0f} ms  {value / r_bound:12.3f}x")
    print(f"  {'the lower bound (computed)':<60} {r_bound * 1000:7.0f} ms")
    if runner:
        print(f'  ts.run(api="responses") / the runner at its best: {r_ts / runner[-1][1]:.3f}x')
    else:
        print("  (this openai has no openai.lib.responses_tool_runner)")
    without, with_, never, scripted = fail_fast_turn(args.repeat)
    print(
        "fail-fast turn (the first call goes wrong at its 2nd fragment of 153; the second attempt is right)"
    )
    print(f"  {'ts.run, without fail_fast':<60} {without * 1000:7.0f} ms")
    print(f"  {'ts.run(fail_fast=True)':<60} {with_ * 1000:7.0f} ms  {with_ / without:12.3f}x")
    print(f"  chunks never generated: {never} of {scripted} of the broken stream")
    print(f"command: {Path(sys.executable).name} benchmarks/turn_latency.py --repeat {args.repeat}")


if __name__ == "__main__":
    main()
