"""``decode="fast"`` against plain SDK iteration, over loopback HTTP (issue 12, "Beyond").

Run: ``.venv/bin/python benchmarks/fast_decode.py`` (``--rounds N``, ``--workload w2|w3``).

A :class:`toolstitch.testing.LocalServer` in a separate process (so its CPU does not share this
process's GIL) serves the workload's body, one write per SSE event as a real server flushes them.
Each round streams it once per variant, in an order rotated every round (interleaved runs), and
times ``create(stream=True)`` to the end of the iteration:

* ``sdk``            plain ``openai`` iteration, no toolstitch: the baseline;
* ``wrap``           ``ts.wrap(client, decode="sdk")``: the SDK's decoding plus the accumulator;
* ``wrap fast``      ``ts.wrap(client)`` (``decode="fast"``, the default): pydantic-core decoding plus
  the accumulator;
* ``sdk fast``       the SDK stream with only the fast decoding installed (no accumulator).

Each variant's ``get_final_completion()`` (the wrapped ones) is built inside the timed region, so
accumulation is included. It prints medians, per-chunk times and the ratios to ``sdk``; the target
of issue 21 is ``wrap fast / sdk <= 0.3``. Numbers vary by machine and load; compare ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import openai
from workloads import TOOLS, w2, w3  # benchmarks/ is on sys.path when run as a script

import toolstitch as ts
from toolstitch.client import _fast
from toolstitch.testing import LocalServer, StreamScript

VARIANTS = ("sdk", "wrap", "wrap fast", "sdk fast")


def _serve(payloads: list[str], copies: int, ports: Any, stop: Any) -> None:
    """The server process: ``copies`` replies of the body, each event its own write."""
    with LocalServer() as server:
        script = StreamScript([f"data: {p}\n\n" for p in payloads])
        server.enqueue(*([script] * copies))
        ports.put(server.base_url)
        stop.wait()


def _variants(client: openai.OpenAI) -> dict[str, Callable[[], int]]:
    request: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "write the files"}],
        "tools": TOOLS,
        "stream": True,
    }
    wrapped = ts.wrap(client, decode="sdk")
    fast = ts.wrap(client)  # the default: decode="fast"

    def sdk() -> int:
        return sum(1 for _ in client.chat.completions.create(**request))

    def sdk_fast() -> int:
        stream = client.chat.completions.create(**request)
        assert _fast.install(stream)
        return sum(1 for _ in stream)

    def through(wrapper: Any) -> Callable[[], int]:
        def run() -> int:
            stream = wrapper.chat.completions.create(**request)
            n = sum(1 for _ in stream)
            stream.get_final_completion()
            assert all(c.status == "ready" for c in stream.tool_calls)
            return n

        return run

    return {"sdk": sdk, "wrap": through(wrapped), "wrap fast": through(fast), "sdk fast": sdk_fast}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--workload", choices=["w2", "w3"], default="w2")
    args = parser.parse_args()
    payloads = w2() if args.workload == "w2" else w3()
    warmup = 2
    ctx = multiprocessing.get_context("spawn")
    ports, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(
        target=_serve, args=(payloads, (args.rounds + warmup) * len(VARIANTS), ports, stop), daemon=True
    )
    server.start()
    base_url = ports.get(timeout=60)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    chunks = 0
    try:
        with openai.OpenAI(api_key="sk-bench", base_url=base_url, max_retries=0) as client:
            runs = _variants(client)
            for r in range(args.rounds + warmup):
                order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
                for name in order:
                    start = time.perf_counter()
                    chunks = runs[name]()
                    elapsed = time.perf_counter() - start
                    if r >= warmup:
                        times[name].append(elapsed)
    finally:
        stop.set()
        server.join(timeout=10)
    status = _fast.fast_decode_status()
    print(
        f"command: {sys.executable} benchmarks/fast_decode.py --workload {args.workload} "
        f"--rounds {args.rounds}"
    )
    print(
        f"openai {openai.__version__}; {args.workload}: {chunks} chunks over loopback HTTP, {args.rounds} "
        f"interleaved rounds; fast builder {'on' if status.builder else 'off'}, "
        f"fast SSE decoder {'on' if status.decoder else 'off'}"
    )
    base = statistics.median(times["sdk"])
    print(f"{'variant':<10} {'median ms':>10} {'µs/chunk':>9} {'÷ sdk':>7}")
    for name in VARIANTS:
        median = statistics.median(times[name])
        print(f"{name:<10} {median * 1e3:>10.2f} {median / chunks * 1e6:>9.2f} {median / base:>7.3f}")
    ratio = statistics.median(times["wrap fast"]) / base
    verdict = "met" if ratio <= 0.3 else "NOT met"
    print(f'wrap(decode="fast") / plain SDK = {ratio:.3f}  (target <= 0.3: {verdict})')


if __name__ == "__main__":
    main()
