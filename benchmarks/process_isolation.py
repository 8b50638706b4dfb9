"""What ``isolation="process"`` costs (issue 41): a one-call ``box.execute`` of a sync tool that runs
in a worker process, against the same tool in a thread.

Run: ``.venv/bin/python benchmarks/process_isolation.py`` (``--repeat`` warm calls, ``--fresh``
new workers). Every figure is measured in this one run:

* the first process call of the interpreter: it starts the forkserver (which imports toolstitch
  once) and a worker (``ts.run`` hides this behind the model's writing: it warms the toolbox when it
  sends a request offering the tool);
* a new worker once the forkserver runs: each of ``--fresh`` new toolboxes makes its first call;
* a call to an idle worker, against the same call in a thread (medians of ``--repeat``).

The tools live in this script (``__main__``): the workers import it as multiprocessing imports a
main module, which is what a user's script does too.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import toolstitch as ts
from toolstitch.testing import tool_call_chunks


@ts.tool(isolation="process")
def add_in_a_process(a: int, b: int) -> int:
    """Add two numbers (in a worker process)."""
    return a + b


@ts.tool
def add_in_a_thread(a: int, b: int) -> int:
    """Add two numbers (in a thread)."""
    return a + b


def sealed_call(name: str) -> list[Any]:
    acc = ts.Accumulator()
    for chunk in tool_call_chunks([("c1", name, '{"a": 1, "b": 2}')]):
        acc.feed(chunk)
    acc.end()
    return acc.tool_calls


def one_call(box: ts.Toolbox, name: str) -> float:
    """Milliseconds for one ``box.execute`` of one call to ``name``."""
    calls = sealed_call(name)
    t0 = time.perf_counter()
    (result,) = box.execute(calls)
    elapsed = (time.perf_counter() - t0) * 1000
    if result.status != "ok":
        raise SystemExit(f"{name}: {result.status} {result.error}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=50, help="warm calls timed per system (median)")
    parser.add_argument("--fresh", type=int, default=5, help="new workers timed (median)")
    args = parser.parse_args()
    with ts.Toolbox([add_in_a_process, add_in_a_thread]) as box:
        one_call(box, "add_in_a_thread")  # the toolbox's threads exist before anything is timed
        first = one_call(box, "add_in_a_process")
        warm = statistics.median(one_call(box, "add_in_a_process") for _ in range(args.repeat))
        thread = statistics.median(one_call(box, "add_in_a_thread") for _ in range(args.repeat))
    fresh = []
    for _ in range(args.fresh):
        with ts.Toolbox([add_in_a_process]) as box:  # a toolbox of its own: a new worker
            fresh.append(one_call(box, "add_in_a_process"))
    print(f"one call, box.execute (medians of {args.repeat} warm calls, {args.fresh} new workers)")
    print(f"  first process call of the interpreter       {first:8.1f} ms")
    print(f"  a new worker (the forkserver runs)          {statistics.median(fresh):8.1f} ms")
    print(f"  an idle worker                              {warm:8.2f} ms")
    print(f"  a thread                                    {thread:8.2f} ms")
    print(f"  idle worker / thread: {warm / thread:.2f}x")
    print(f"command: python benchmarks/process_isolation.py --repeat {args.repeat} --fresh {args.fresh}")


if __name__ == "__main__":
    main()
