"""Iterating a stream over real HTTP: the plain SDK against the same SDK wrapped by toolstitch.

Run: ``.venv/bin/python benchmarks/over_http.py`` (``--runs N``; ``--help`` for more).

A local OpenAI-compatible server (``toolstitch.testing.LocalServer``, in its own process) streams
workload W2 (8 interleaved calls of 500 B in 5-byte fragments, 810 chunks, one TCP write each) to
the real ``openai`` client. Each round runs the plain client and the wrapped one
(``ts.wrap(client)``) once each, in alternating order; the medians over all rounds are shown:

* ``total``  from the request to the end of the iteration (wall clock);
* ``cpu``    the client process's CPU time for the same (the server runs elsewhere);
* ``first``  time to the first chunk.

Issue 12 asks: wrapped iteration at most 5% more than plain iteration, time to first chunk
unchanged. The first chunk's difference is also shown per round (both clients ran back to back),
beside the plain client's own spread, so that a difference can be told from noise.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import openai
from workloads import TOOLS, served, w2  # benchmarks/ is on sys.path when run as a script

import toolstitch as ts

MESSAGES: list[Any] = [{"role": "user", "content": "write the notes"}]


def one_run(client: Any) -> tuple[float, float, float, int]:
    """``(total, cpu, first, chunks)`` of one streamed request."""
    cpu = time.process_time()
    start = time.perf_counter()
    first = 0.0
    chunks = 0
    stream = client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, stream=True)
    for _chunk in stream:
        if not chunks:
            first = time.perf_counter() - start
        chunks += 1
    total = time.perf_counter() - start
    if isinstance(stream, ts.StitchedStream):
        stream.get_final_completion()
        assert all(c.ready for c in stream.tool_calls)
    return total, time.process_time() - cpu, first, chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=41, help="rounds (each runs both clients once)")
    args = parser.parse_args()
    with served(w2()) as base_url:
        plain = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)
        wrapped = ts.wrap(openai.OpenAI(base_url=base_url, api_key="x", max_retries=0))
        for client in (plain, wrapped):  # warm up: imports, connection setup, schema validators
            one_run(client)
        results: dict[str, list[tuple[float, float, float, int]]] = {"plain SDK": [], "ts.wrap": []}
        for k in range(args.runs):
            order = [("plain SDK", plain), ("ts.wrap", wrapped)]
            for name, client in order if k % 2 else order[::-1]:
                results[name].append(one_run(client))
    chunks = results["plain SDK"][0][3]
    print(f"W2 over loopback HTTP: {chunks} chunks per stream; medians of {args.runs} interleaved runs")
    print(f"  {'':<11}{'total ms':>10}{'cpu ms':>10}{'first chunk ms':>16}{'cpu us/chunk':>14}")
    medians = {}
    for name, rows in results.items():
        total, cpu, first = (statistics.median(r[i] for r in rows) for i in range(3))
        medians[name] = (total, cpu, first)
        row = f"{total * 1e3:>10.2f}{cpu * 1e3:>10.2f}{first * 1e3:>16.3f}{cpu / chunks * 1e6:>14.2f}"
        print(f"  {name:<11}{row}")
    (pt, pc, pf), (wt, wc, wf) = medians["plain SDK"], medians["ts.wrap"]
    total_pct, cpu_pct, first_pct = (100 * (w / p - 1) for w, p in ((wt, pt), (wc, pc), (wf, pf)))
    print(f"ts.wrap vs plain: total {total_pct:+.1f}%, cpu {cpu_pct:+.1f}%, first chunk {first_pct:+.1f}%")
    print(f"toolstitch per chunk over HTTP (cpu difference): {(wc - pc) / chunks * 1e6:.2f} us")
    # Time to first chunk is a few milliseconds of network, server and SDK work: compare it with
    # its own noise. Each round ran both clients back to back, so the difference per round is paired.
    paired = sorted(w[2] - p[2] for p, w in zip(results["plain SDK"], results["ts.wrap"], strict=True))
    low, mid, high = statistics.quantiles(paired, n=4)
    spread = statistics.quantiles([r[2] for r in results["plain SDK"]], n=4)
    print(
        f"first chunk, ts.wrap - plain in the same round: median {mid * 1e3:+.3f} ms, middle half "
        f"[{low * 1e3:+.3f}, {high * 1e3:+.3f}] ms (plain's own middle half spans "
        f"{(spread[2] - spread[0]) * 1e3:.3f} ms)"
    )
    print(f"reproduce: .venv/bin/python benchmarks/over_http.py --runs {args.runs}")


if __name__ == "__main__":
    main()
