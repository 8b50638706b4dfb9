"""Python instructions per chunk, counted: a figure this machine's noise does not move.

Run: ``.venv/bin/python benchmarks/instructions.py`` (``--help`` for more).

The timings of ``overhead.py`` move by a third from run to run on a shared virtual machine, more
than most changes to the hot path are worth. This counts instead: every bytecode instruction the
interpreter runs (``sys.settrace`` with ``f_trace_opcodes``), per chunk, for the same workload and
the same contenders as ``overhead.py``:

* ``bare loop``        the hand-written merge of ``overhead.py`` (the floor);
* ``toolstitch``       ``Accumulator.feed`` with events, then ``get_final_completion``;
* ``toolstitch quiet`` the same with ``events=False`` (a wrapped stream nobody reads events from);
* ``sdk helper``       the SDK's ``ChatCompletionStreamState``.

Then toolstitch's own instructions per chunk by function, the largest first: where a change to
the hot path lands. Instructions are not time (a C call such as a regex match or an ``isascii``
is one instruction here, and the objects and code a chunk touches cost more in a live stream than
in a tight loop), so a change is judged by both: this count, and the ratios ``overhead.py``
measures in one run. Counting runs each contender about fifty times slower than untraced.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from overhead import bare_loop, sdk_helper, toolstitch, toolstitch_quiet
from workloads import decode, single_call, w2  # benchmarks/ is on sys.path when run as a script

import toolstitch as ts

PACKAGE = str(Path(ts.__file__).resolve().parent)
"""Instructions in files under this folder are toolstitch's (the package as imported)."""


def count(fn: Callable[[Sequence[Any]], None], chunks: Sequence[Any]) -> tuple[int, Counter[str]]:
    """``(instructions, toolstitch's instructions by function)`` of one run of ``fn``."""
    total = 0
    ours: Counter[str] = Counter()

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal total
        frame.f_trace_opcodes = True
        if event == "opcode":
            total += 1
            code = frame.f_code
            if code.co_filename.startswith(PACKAGE):
                ours[f"{Path(code.co_filename).name}:{code.co_name}"] += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn(chunks)
    finally:
        sys.settrace(None)
    return total, ours


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--top", type=int, default=12, help="functions shown per contender")
    parser.add_argument("--single", type=int, default=20_000, help="bytes of the one-call workload")
    args = parser.parse_args()
    workloads = {
        "W2: 8 interleaved calls of 500 B in 5-byte fragments": decode(w2()),
        f"one call of {args.single:,} B in 4-byte fragments (W3's shape)": decode(single_call(args.single)),
    }
    contenders = {
        "bare loop": bare_loop,
        "toolstitch": toolstitch,
        "toolstitch quiet": toolstitch_quiet,
        "sdk helper": sdk_helper,
    }
    for title, chunks in workloads.items():
        n = len(chunks)
        for fn in contenders.values():  # warm: imports, compiled schemas, specialised bytecode
            fn(chunks)
        counted = {name: count(fn, chunks) for name, fn in contenders.items()}
        bare = counted["bare loop"][0]
        print(f"{title}: {n} chunks")
        print(f"  {'':<18}{'per chunk':>11}{'x bare loop':>13}")
        for name, (total, _) in counted.items():
            print(f"  {name:<18}{total / n:>11.1f}{total / bare:>13.2f}")
        for name in ("toolstitch", "toolstitch quiet"):
            print(f"  {name}, by function (per chunk):")
            for where, k in counted[name][1].most_common(args.top):
                print(f"    {k / n:>9.1f}  {where}")
        print()
    print(f"reproduce: .venv/bin/python benchmarks/instructions.py --top {args.top} --single {args.single}")


if __name__ == "__main__":
    main()
