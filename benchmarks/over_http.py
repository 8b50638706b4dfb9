"""Iterating a stream over real HTTP: the plain SDK against the same SDK wrapped by toolstitch.

Run: ``.venv/bin/python benchmarks/over_http.py`` (``--runs N``; ``--help`` for more).

A local OpenAI-compatible server (``toolstitch.testing.LocalServer``, in its own process) streams
workload W2 (8 interleaved calls of 500 B in 5-byte fragments, 810 chunks, one TCP write each) to
the real ``openai`` client. Each round runs the plain client, ``ts.wrap(client, decode="sdk")``
(the SDK's decoding, plus toolstitch) and ``ts.wrap(client)`` (the default, ``decode="fast"``) once
each, in an order that rotates; the medians over all rounds are shown:

* ``total``  from the request to the end of the iteration (wall clock);
* ``cpu``    the client process's CPU time for the same (the server runs elsewhere);
* ``first``  time to the first chunk.

The targets (issue 21): with ``decode="sdk"`` at most 5% more CPU than plain iteration; with no
option but the client, at most 0.3 times plain iteration's CPU. Besides the ratio of the medians,
the CPU ratio within each round (the clients ran back to back) is shown as a median and middle
half: on a busy machine the paired figure is the steadier one. The first chunk's difference is also
shown per round (the clients ran back to back), beside the plain client's own spread, so that a
difference can be told from noise.
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
    parser.add_argument("--runs", type=int, default=41, help="rounds (each runs every client once)")
    args = parser.parse_args()
    with served(w2()) as base_url:

        def client() -> openai.OpenAI:
            return openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)

        clients = {
            "plain SDK": client(),
            'wrap(decode="sdk")': ts.wrap(client(), decode="sdk"),
            "wrap()": ts.wrap(client()),  # the default: decode="fast"
        }
        for one in clients.values():  # warm up: imports, connection setup, schema validators
            one_run(one)
        results: dict[str, list[tuple[float, float, float, int]]] = {name: [] for name in clients}
        names = list(clients)
        for k in range(args.runs):
            for name in names[k % len(names) :] + names[: k % len(names)]:  # the order rotates
                results[name].append(one_run(clients[name]))
    chunks = results["plain SDK"][0][3]
    print(f"W2 over loopback HTTP: {chunks} chunks per stream; medians of {args.runs} interleaved runs")
    heads = f"{'total ms':>10}{'cpu ms':>10}{'first chunk ms':>16}{'cpu us/chunk':>14}{'cpu / plain':>13}"
    print(f"  {'':<20}{heads}")
    medians = {}
    for name, rows in results.items():
        total, cpu, first = (statistics.median(r[i] for r in rows) for i in range(3))
        medians[name] = (total, cpu, first)
    plain_cpu = medians["plain SDK"][1]
    for name, (total, cpu, first) in medians.items():
        row = f"{total * 1e3:>10.2f}{cpu * 1e3:>10.2f}{first * 1e3:>16.3f}{cpu / chunks * 1e6:>14.2f}"
        print(f"  {name:<20}{row}{cpu / plain_cpu:>13.3f}")
    pt, pc, pf = medians["plain SDK"]
    for name in ('wrap(decode="sdk")', "wrap()"):
        wt, wc, wf = medians[name]
        total_pct, cpu_pct, first_pct = (100 * (w / p - 1) for w, p in ((wt, pt), (wc, pc), (wf, pf)))
        print(f"{name} vs plain: total {total_pct:+.1f}%, cpu {cpu_pct:+.1f}%, first chunk {first_pct:+.1f}%")
    sdk_cpu = medians['wrap(decode="sdk")'][1]
    per_chunk = (sdk_cpu - pc) / chunks * 1e6
    print(f'toolstitch per chunk over HTTP (cpu, wrap(decode="sdk") - plain): {per_chunk:.2f} us')
    # The ratio of two medians moves with whatever else the machine did during the run (on a
    # shared virtual machine, by more than the few percent measured here). Each round ran the
    # clients back to back, so the ratio within a round is paired: its median and middle half say
    # how much of a difference is the client's, and how much is noise.
    for name in ('wrap(decode="sdk")', "wrap()"):
        ratios = sorted(w[1] / p[1] for p, w in zip(results["plain SDK"], results[name], strict=True))
        q1, q2, q3 = statistics.quantiles(ratios, n=4)
        print(f"{name} cpu / plain cpu in the same round: median {q2:.3f}, middle half [{q1:.3f}, {q3:.3f}]")
    # Time to first chunk is a few milliseconds of network, server and SDK work: compare it with
    # its own noise. Each round ran the clients back to back, so the difference per round is paired.
    paired = sorted(w[2] - p[2] for p, w in zip(results["plain SDK"], results["wrap()"], strict=True))
    low, mid, high = statistics.quantiles(paired, n=4)
    spread = statistics.quantiles([r[2] for r in results["plain SDK"]], n=4)
    print(
        f"first chunk, wrap() - plain in the same round: median {mid * 1e3:+.3f} ms, middle half "
        f"[{low * 1e3:+.3f}, {high * 1e3:+.3f}] ms (plain's own middle half spans "
        f"{(spread[2] - spread[0]) * 1e3:.3f} ms)"
    )
    print(f"reproduce: .venv/bin/python benchmarks/over_http.py --runs {args.runs}")


if __name__ == "__main__":
    main()
