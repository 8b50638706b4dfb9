"""Iterating a Responses API stream over real HTTP: the plain SDK against the same SDK wrapped.

Run: ``.venv/bin/python benchmarks/responses_over_http.py`` (``--runs N``; ``--help`` for more).

Workload R2, the Responses twin of W2: 8 function calls of 500 B of arguments each, in 5-byte
``response.function_call_arguments.delta`` events (items one after another, as OpenAI streams them),
about 830 events, one TCP write each, served by ``toolstitch.testing.LocalServer`` in its own
process. Each round runs, in alternating order:

* ``plain SDK``           ``client.responses.create(stream=True)``, iterated;
* ``wrap(decode="sdk")``  the same through ``ts.wrap(client, decode="sdk")`` (the SDK's decoding,
  plus toolstitch), iterated, then ``get_final_response()``;
* ``wrap()``              the default, ``decode="fast"``: each event built by the one member of the
  SDK's union its ``type`` names (``client/_fast_events.py``), equal to the SDK's own;
* ``SDK stream()``        the SDK's own ``client.responses.stream(...)`` helper (its snapshot state),
  for scale: what users who want the merged calls without toolstitch pay;
* ``fast decoding alone`` the plain SDK stream with only toolstitch's fast decoding installed (its
  SSE decoder, JSON parser, event builder and, for a sync stream, its copy of the SDK's loop:
  ``client/_fast_stream.py``), no reader: the floor under ``wrap()``;
* ``bytes alone``         the same request's body read with ``with_streaming_response`` and
  ``iter_bytes()``, no SSE, no decoding: what the SDK's transport (httpx, httpcore, h11: one HTTP
  chunk per event) costs by itself, the floor under every other row.

The medians over all rounds are shown (``total`` wall clock, ``cpu`` of the client process, and
``cpu / plain``), and the per-event CPU toolstitch adds with the SDK's decoding. The target
(issue 32): ``wrap()`` at most 0.3 times plain iteration's CPU. Then the sans-I/O cost alone: the same events,
decoded once by the SDK, fed to ``ts.ResponseAccumulator`` (``feed(event, events=False)``, as the
wrapped stream does) against a bare ``for`` loop over them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import openai
from openai._models import construct_type
from openai.types.responses import ResponseStreamEvent
from workloads import arguments_of, served  # benchmarks/ is on sys.path when run as a script

import toolstitch as ts
from toolstitch.client import _fast
from toolstitch.testing import response_events

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "write_file",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
            "required": ["path", "text"],
            "additionalProperties": False,
        },
    }
]


def r2() -> list[str]:
    """R2: 8 calls of 500 B in 5-byte deltas, as SSE payloads."""
    calls = [(f"call_{i}", "write_file", arguments_of(500, i)) for i in range(8)]
    events = response_events(calls, pieces=100)
    return [json.dumps(e, ensure_ascii=False) for e in events]


def one_run(client: Any, mode: str = "create") -> tuple[float, float, int]:
    """``(total, cpu, events)`` of one streamed request: ``create(stream=True)``, the SDK's
    ``stream()`` helper (``mode="helper"``), the plain stream with only fast decoding installed
    (``mode="fast"``), or the body's bytes alone (``mode="bytes"``: ``events`` counts reads)."""
    cpu = time.process_time()
    start = time.perf_counter()
    events = 0
    if mode == "bytes":
        with client.responses.with_streaming_response.create(
            model="m", input="write the notes", tools=TOOLS, stream=True
        ) as response:
            for _read in response.iter_bytes():
                events += 1
    elif mode == "helper":
        with client.responses.stream(model="m", input="write the notes", tools=TOOLS) as stream:
            for _event in stream:
                events += 1
            stream.get_final_response()
    else:
        stream = client.responses.create(model="m", input="write the notes", tools=TOOLS, stream=True)
        if mode == "fast":
            assert _fast.install(stream)
        for _event in stream:
            events += 1
        if isinstance(stream, ts.StitchedResponseStream):
            stream.get_final_response()
            assert len(stream.tool_calls) == 8 and all(c.ready for c in stream.tool_calls)
    return time.perf_counter() - start, time.process_time() - cpu, events


def sans_io(payloads: list[str], repeat: int) -> tuple[float, float, int]:
    """``(bare, fed, events)``: seconds per pass of a bare loop and of ``feed`` over the events."""
    decoded = [construct_type(type_=ResponseStreamEvent, value=json.loads(p)) for p in payloads]
    bare: list[float] = []
    fed: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _event in decoded:
            pass
        bare.append(time.perf_counter() - start)
        acc = ts.ResponseAccumulator(TOOLS)
        feed = acc.feed
        start = time.perf_counter()
        for event in decoded:
            feed(event, events=False)
        acc.end()
        fed.append(time.perf_counter() - start)
        assert all(c.ready for c in acc.tool_calls)
    return statistics.median(bare), statistics.median(fed), len(decoded)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=41, help="rounds (each runs every client once)")
    args = parser.parse_args()
    payloads = r2()
    with served(payloads) as base_url:

        def client() -> openai.OpenAI:
            return openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)

        clients = [
            ("plain SDK", client(), "create"),
            ('wrap(decode="sdk")', ts.wrap(client(), decode="sdk"), "create"),
            ("wrap()", ts.wrap(client()), "create"),  # the default: decode="fast"
            ("SDK stream()", client(), "helper"),
            ("fast decoding alone", client(), "fast"),
            ("bytes alone", client(), "bytes"),
        ]
        for _, one, mode in clients:  # warm up: imports, connections, schema validators
            one_run(one, mode)
        results: dict[str, list[tuple[float, float, int]]] = {name: [] for name, _, _ in clients}
        for k in range(args.runs):
            for name, one, mode in clients[k % len(clients) :] + clients[: k % len(clients)]:  # rotates
                results[name].append(one_run(one, mode))
    events = results["plain SDK"][0][2]
    print(f"R2 over loopback HTTP: {events} events per stream; medians of {args.runs} interleaved runs")
    print(f"  {'':<20}{'total ms':>10}{'cpu ms':>10}{'cpu us/event':>14}{'cpu / plain':>13}")
    medians: dict[str, tuple[float, float]] = {}
    for name, rows in results.items():
        total, cpu = (statistics.median(r[i] for r in rows) for i in range(2))
        medians[name] = (total, cpu)
    pt, pc = medians["plain SDK"]
    for name, (total, cpu) in medians.items():
        row = f"{total * 1e3:>10.2f}{cpu * 1e3:>10.2f}{cpu / events * 1e6:>14.2f}{cpu / pc:>13.3f}"
        print(f"  {name:<20}{row}")
    for name in ('wrap(decode="sdk")', "wrap()"):
        wt, wc = medians[name]
        print(f"{name} vs plain: total {100 * (wt / pt - 1):+.1f}%, cpu {100 * (wc / pc - 1):+.1f}%")
    sdk_cpu = medians['wrap(decode="sdk")'][1]
    added = (sdk_cpu - pc) / events * 1e6
    print(f'toolstitch per event over HTTP (cpu, wrap(decode="sdk") - plain): {added:.2f} us')
    bare, fed, count = sans_io(payloads, max(5, args.runs // 4))
    print(
        f"sans-I/O: ResponseAccumulator.feed {fed / count * 1e6:.2f} us/event, a bare loop "
        f"{bare / count * 1e6:.3f} us/event ({count} events)"
    )
    print(f"reproduce: .venv/bin/python benchmarks/responses_over_http.py --runs {args.runs}")


if __name__ == "__main__":
    main()
