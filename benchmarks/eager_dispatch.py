"""Time from request to "all results ready", with and without eager dispatch, measured in one run.

Run: ``.venv/bin/python benchmarks/eager_dispatch.py`` (``--help`` for the knobs).

A local server (``toolstitch.testing.LocalServer``, real HTTP, the real ``openai`` client) streams 4
parallel calls the way OpenAI does: one call after the other, each call's arguments in token-sized
fragments, with a per-chunk delay (default 15 ms, about 65 tokens/s). The 4 tools are ``read_only``
and take a while (they sleep, like a search or an HTTP lookup would).

Without eager dispatch every call starts when the stream is sealed. With ``eager=True`` a call starts
as soon as its arguments are a complete, schema-valid JSON value, so the early calls overlap with the
rest of the stream. The gain depends on the workload, and the script shows two:

* ``slow first call``  the first call is the slow one (a search, then quick lookups): eager dispatch
  hides most of the stream time behind it;
* ``equal latencies``  all calls take as long: the last call still starts when the stream ends, so
  "all results ready" barely moves (only the per-call results arrive earlier).

It prints the median time of each mode and the ratio eager / not eager (below 1 is faster).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import toolstitch as ts
from toolstitch.loop._run import CallFinished, RunEvent, StepStarted, run
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks
from toolstitch.tools import Tool, Toolbox, tool

ARGUMENTS = '{"query": "hotels near the Colosseum with free breakfast", "limit": 10}'


def make_search(index: int, latency: float) -> Tool:
    def search(query: str, limit: int) -> str:
        """Search the hotel index."""
        time.sleep(latency)  # the I/O the tool waits on
        return f"{limit} results for {query}"

    return tool(read_only=True, name=f"search_{index}")(search)


def one_run(server: LocalServer, box: Toolbox, script: StreamScript, eager: bool) -> float:
    """Seconds from sending the request to the moment the last result was ready."""
    marks: dict[str, float] = {}

    def on_event(event: RunEvent) -> None:
        if isinstance(event, StepStarted):
            marks["start"] = time.perf_counter()
        elif isinstance(event, CallFinished):
            marks["ready"] = time.perf_counter()

    server.enqueue(script)
    with server.client() as client:
        result = run(
            ts.wrap(client),
            model="bench",
            messages=[{"role": "user", "content": "find hotels"}],
            toolbox=box,
            max_steps=1,
            eager=eager,
            on_event=on_event,
        )
    assert all(r.ok for r in result.results), result.results
    assert sum(r.timings.eager for r in result.results) == (len(result.results) if eager else 0)
    return marks["ready"] - marks["start"]


def scenario(name: str, latencies: Sequence[float], args: argparse.Namespace) -> None:
    calls = [(f"call_{i}", f"search_{i}", ARGUMENTS) for i in range(len(latencies))]
    chunks = tool_call_chunks(calls, pieces=args.pieces, interleave=False)
    script = StreamScript(chunks, delay=args.delay)
    stream_time = args.delay * (len(chunks) - 1)
    with (
        LocalServer() as server,
        Toolbox([make_search(i, t) for i, t in enumerate(latencies)], max_workers=len(latencies)) as box,
    ):
        one_run(server, box, script, eager=False)  # warm up: connection, pool threads
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeat):
            for eager in (False, True):
                times[eager].append(one_run(server, box, script, eager))
    plain, fast = statistics.median(times[False]), statistics.median(times[True])
    shown = ", ".join(f"{t:g}" for t in latencies)
    print(f"{name}: {len(chunks)} chunks, ~{stream_time:.2f}s of streaming, tool latencies {shown} s")
    print(f"  not eager   {plain * 1000:8.1f} ms")
    print(f"  eager       {fast * 1000:8.1f} ms")
    print(f"  ratio eager / not eager: {fast / plain:.2f}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--delay", type=float, default=0.015, help="seconds between chunks")
    parser.add_argument("--pieces", type=int, default=18, help="argument fragments per call")
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode (the median is shown)")
    parser.add_argument("--latency", type=float, default=0.4, help="seconds each tool takes")
    args = parser.parse_args(argv)
    scenario(
        "slow first call", [3 * args.latency, args.latency / 2, args.latency / 2, args.latency / 2], args
    )
    scenario("equal latencies", [args.latency] * 4, args)


if __name__ == "__main__":
    main()
