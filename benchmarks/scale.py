"""Many concurrent streams through one wrapped ``AsyncOpenAI``: cost under load, memory per stream.

Run: ``.venv/bin/python benchmarks/scale.py`` (``--streams 1000``; ``--help`` for more).

A local server (``toolstitch.testing.LocalServer``, in its own process) streams the same small
tool-call response to every request: ``--calls`` parallel calls of ``--size`` bytes of arguments in
``--fragment``-byte fragments. The client process opens ``--streams`` streams at once through one
``AsyncOpenAI`` (asyncio, one connection each) and reports:

* **cost under load**: rounds of all streams through the plain client and through
  ``ts.wrap(client)``, alternating; the client's CPU time per round (median), and toolstitch's
  share per chunk (wrapped minus plain, divided by the chunks of the round);
* **memory per stream**: every stream stops halfway (an ``asyncio.Event``) while ``tracemalloc``
  counts what was allocated by toolstitch's own code and is still alive, divided by the streams;
  the argument text itself is allocated by the SDK (the fragments toolstitch keeps), so it is not
  in that figure: it is shown beside it;
* **nothing grows**: after each round of finished streams (``gc.collect()``), the memory still held
  by toolstitch's code, and by the whole process.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc
from typing import Any

import openai
from workloads import TOOLS, _stream, arguments_of, served  # benchmarks/ is on sys.path as a script

import toolstitch as ts

MESSAGES: list[Any] = [{"role": "user", "content": "write the notes"}]


async def one_stream(
    client: Any, halfway: asyncio.Event | None = None, arrived: list[int] | None = None
) -> int:
    """Iterate one stream to its end; with ``halfway``, stop in the middle until it is set."""
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, stream=True)
    chunks = 0
    async with stream:
        async for _chunk in stream:
            chunks += 1
            if halfway is not None and arrived is not None and chunks == 20:
                arrived[0] += 1
                await halfway.wait()
    if isinstance(stream, ts.AsyncStitchedStream):
        await stream.get_final_completion()
        assert all(c.ready for c in stream.tool_calls)
    return chunks


async def one_round(client: Any, streams: int) -> tuple[float, float, int]:
    """``(wall, cpu, chunks)`` of ``streams`` concurrent streams."""
    cpu = time.process_time()
    start = time.perf_counter()
    counts = await asyncio.gather(*(one_stream(client) for _ in range(streams)))
    return time.perf_counter() - start, time.process_time() - cpu, sum(counts)


def _toolstitch_bytes(snapshot: tracemalloc.Snapshot) -> int:
    """Bytes still allocated whose allocating frame is in toolstitch's own source."""
    return sum(
        stat.size
        for stat in snapshot.filter_traces([tracemalloc.Filter(True, "*/toolstitch/*")]).statistics(
            "filename"
        )
    )


async def halfway_memory(client: Any, streams: int) -> tuple[float, float]:
    """``(toolstitch bytes per stream, argument characters per stream)`` with every stream open."""
    halfway = asyncio.Event()
    arrived = [0]
    tracemalloc.start()
    gc.collect()
    before = _toolstitch_bytes(tracemalloc.take_snapshot())
    tasks = [asyncio.create_task(one_stream(client, halfway, arrived)) for _ in range(streams)]
    while arrived[0] < streams:
        await asyncio.sleep(0.01)
    gc.collect()
    held = _toolstitch_bytes(tracemalloc.take_snapshot()) - before
    text = _open_argument_chars()
    halfway.set()
    await asyncio.gather(*tasks)
    tracemalloc.stop()
    return held / streams, text / streams


def _open_argument_chars() -> int:
    """Characters of argument text held by every live accumulator (found through the GC)."""
    total = 0
    for obj in gc.get_objects():
        if isinstance(obj, ts.Accumulator):
            total += sum(c.chars for c in obj.calls())
    return total


async def growth(client: Any, streams: int, rounds: int) -> list[tuple[int, int]]:
    """Per round of finished streams: (toolstitch bytes still held, all traced bytes)."""
    tracemalloc.start()
    out = []
    for _ in range(rounds):
        await one_round(client, streams)
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
        out.append((_toolstitch_bytes(snapshot), tracemalloc.get_traced_memory()[0]))
    tracemalloc.stop()
    return out


async def main_async(args: argparse.Namespace, base_url: str) -> None:
    limits = openai.DEFAULT_CONNECTION_LIMITS
    http = openai.DefaultAsyncHttpxClient(
        limits=type(limits)(max_connections=args.streams + 10), timeout=600.0
    )
    # A thousand connections opened at once wait for the server's accept loop: no connect timeout.
    options: dict[str, Any] = {"base_url": base_url, "api_key": "x", "max_retries": 0, "timeout": 600.0}
    plain = openai.AsyncOpenAI(http_client=http, **options)
    wrapped = ts.wrap(openai.AsyncOpenAI(http_client=http, **options))
    await one_round(plain, 10)  # warm up
    await one_round(wrapped, 10)
    rows: dict[str, list[tuple[float, float, int]]] = {"plain SDK": [], "ts.wrap": []}
    for k in range(args.rounds):
        order = [("plain SDK", plain), ("ts.wrap", wrapped)]
        for name, client in order if k % 2 else order[::-1]:
            rows[name].append(await one_round(client, args.streams))
    chunks = rows["plain SDK"][0][2]
    each = chunks // args.streams
    print(f"{args.streams} concurrent streams, {each} chunks each; medians of {args.rounds} rounds")
    print(f"  {'':<11}{'wall s':>9}{'cpu s':>9}{'cpu us/chunk':>14}")
    medians = {}
    for name, results in rows.items():
        wall, cpu = statistics.median(r[0] for r in results), statistics.median(r[1] for r in results)
        medians[name] = cpu
        print(f"  {name:<11}{wall:>9.2f}{cpu:>9.2f}{cpu / chunks * 1e6:>14.2f}")
    extra = medians["ts.wrap"] - medians["plain SDK"]
    per_chunk, per_stream_cost = extra / chunks * 1e6, extra / args.streams * 1e6
    print(f"toolstitch under this load (cpu, wrapped - plain): {per_chunk:.2f} us per chunk,")
    print(f"  {per_stream_cost:.0f} us per stream (request, chunks, sealing, final completion)")

    per_stream, text = await halfway_memory(wrapped, args.streams)
    print(f"\nmemory with {args.streams} streams open halfway (tracemalloc):")
    print(f"  allocated by toolstitch and alive, per stream: {per_stream / 1024:.1f} KiB")
    print(f"  argument text held per stream at that point: {text:.0f} characters (allocated by the SDK)")

    print(f"\nafter each round of {args.growth_streams} finished streams (gc.collect()):")
    print(f"  {'round':>7}{'toolstitch KiB':>16}{'process traced KiB':>20}")
    for number, (mine, total) in enumerate(await growth(wrapped, args.growth_streams, args.growth_rounds), 1):
        print(f"  {number:>7}{mine / 1024:>16.1f}{total / 1024:>20.1f}")
    await http.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per client")
    parser.add_argument("--growth-rounds", type=int, default=4)
    parser.add_argument(
        "--growth-streams", type=int, default=200, help="streams per growth round (tracemalloc is slow)"
    )
    parser.add_argument("--calls", type=int, default=2, help="parallel calls per stream")
    parser.add_argument("--size", type=int, default=400, help="argument bytes per call")
    parser.add_argument("--fragment", type=int, default=10, help="bytes per argument fragment")
    args = parser.parse_args()
    calls = [(f"call_{i}", "write_file", arguments_of(args.size, i)) for i in range(args.calls)]
    with served(_stream(calls, args.fragment)) as base_url:
        asyncio.run(main_async(args, base_url))
    options = f"--streams {args.streams} --rounds {args.rounds} --growth-rounds {args.growth_rounds}"
    options += f" --growth-streams {args.growth_streams}"
    shape = f"--calls {args.calls} --size {args.size} --fragment {args.fragment}"
    print(f"reproduce: .venv/bin/python benchmarks/scale.py {options} {shape}")


if __name__ == "__main__":
    main()
