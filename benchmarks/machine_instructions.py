"""Machine instructions per chunk, counted by valgrind: ``overhead.py``'s ratios without the noise.

Run: ``.venv/bin/python benchmarks/machine_instructions.py`` (``--help`` for more). It needs
valgrind (``apt-get install valgrind``) and Python 3.11 or newer; valgrind is a tool for this
benchmark only, not a dependency of the package or its tests.

``overhead.py`` times the contenders, and on a shared virtual machine the bare loop's own time moves
by more than half from one run to the next (0.7 to 1.7 µs per chunk on one afternoon), so the ratio
it prints moves with it. ``instructions.py`` counts Python bytecodes, which the noise does not move,
but a bytecode can be one machine instruction or thousands (a dictionary lookup, a regex, an
allocation). This counts what the processor executes: every machine instruction (callgrind's
``Ir``) of the interpreter and the C libraries, per chunk, for the same workloads and contenders as
``overhead.py`` (the chunks are the SDK's own objects, decoded before counting starts):

* ``bare loop``        the hand-written merge of ``overhead.py`` (the floor);
* ``checked read``     the same merge with the reading of the SDK objects that a fail-closed reader
  cannot skip (``overhead.py``): the floor for any reader that checks what it reads;
* ``toolstitch``       ``Accumulator.feed`` with events, then ``get_final_completion``;
* ``toolstitch quiet`` the same with ``events=False``;
* ``sdk helper``       the SDK's ``ChatCompletionStreamState`` (one run: it is slow).

How: the script runs itself under ``valgrind --tool=callgrind`` with collection off, warms every
contender (imports, compiled schemas, specialised bytecode), then runs each one inside a call of
``operator.call``, a C function nothing else here calls. Callgrind counts only inside that function
(``--toggle-collect``) and writes one count each time it returns (``--dump-after``). The same
binary and inputs give the same count whatever else the machine does (the child runs with one
hash seed, so that its dictionaries probe alike). Counting is slow (about a
six minutes here, most of it the SDK helper, which runs two hundred times the instructions).

Instructions are not time either: a cache miss costs many instructions' worth, and the bare loop,
which does little but read the chunk objects, loses more to them than the others. This figure is
the ratio of the work done.
"""

from __future__ import annotations

import argparse
import operator
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CONTENDERS = ("bare loop", "checked read", "toolstitch", "toolstitch quiet", "sdk helper")
_TOTALS = re.compile(r"^(?:summary|totals):\s*(\d+)", re.MULTILINE)


def _workloads(single: int) -> dict[str, list[Any]]:
    from workloads import decode, single_call, w2  # benchmarks/ is on sys.path when run as a script

    return {
        "W2: 8 interleaved calls of 500 B in 5-byte fragments": decode(w2()),
        f"one call of {single:,} B in 4-byte fragments (W3's shape)": decode(single_call(single)),
    }


def _contenders() -> dict[str, Callable[[Sequence[Any]], None]]:
    from overhead import bare_loop, checked_read, sdk_helper, toolstitch, toolstitch_quiet

    fns = (bare_loop, checked_read, toolstitch, toolstitch_quiet, sdk_helper)
    return dict(zip(CONTENDERS, fns, strict=True))


def _repeat(fn: Callable[[Sequence[Any]], None], chunks: Sequence[Any], runs: int) -> None:
    for _ in range(runs):
        fn(chunks)


def child(runs: int, single: int) -> None:
    """Under callgrind: each contender on each workload inside one ``operator.call`` (one count)."""
    contenders = _contenders()
    for chunks in _workloads(single).values():
        for fn in contenders.values():
            fn(chunks)  # warm, not counted
        for name, fn in contenders.items():
            operator.call(_repeat, fn, chunks, 1 if name == "sdk helper" else runs)


def _counts(folder: Path, prefix: str) -> list[int]:
    """The count of each dump, in the order written (``prefix.1``, ``prefix.2``, ...)."""
    dumps = sorted(
        (p for p in folder.iterdir() if re.fullmatch(re.escape(prefix) + r"\.\d+", p.name)),
        key=lambda p: int(p.name.rsplit(".", 1)[1]),
    )
    counts = []
    for dump in dumps:
        found = _TOTALS.search(dump.read_text(errors="replace"))
        if found is None:
            raise SystemExit(f"no total in {dump}")
        counts.append(int(found.group(1)))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs counted per contender (the SDK helper: 1)")
    parser.add_argument("--single", type=int, default=20_000, help="bytes of the one-call workload")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.runs, args.single)
        return
    if not hasattr(operator, "call"):
        raise SystemExit("this benchmark needs Python 3.11 or newer (operator.call)")
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        command = [
            valgrind,
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=_operator_call",
            "--dump-after=_operator_call",
            f"--callgrind-out-file={folder / 'cg'}",
            sys.executable,
            __file__,
            "--child",
            f"--runs={args.runs}",
            f"--single={args.single}",
        ]
        # One hash seed: the string hashes, and so the dictionaries' probes, are the same every run.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            raise SystemExit(f"valgrind failed ({done.returncode}):\n{done.stderr[-2000:]}")
        counts = _counts(folder, "cg")
    workloads = _workloads(args.single)
    if not counts:
        raise SystemExit(
            "callgrind counted nothing: it found no function _operator_call in this Python"
            " (a build without symbols?)"
        )
    if len(counts) != len(workloads) * len(CONTENDERS):
        raise SystemExit(f"expected {len(workloads) * len(CONTENDERS)} counts, got {len(counts)}")
    for w, (title, chunks) in enumerate(workloads.items()):
        n = len(chunks)
        per_chunk = {}
        for c, name in enumerate(CONTENDERS):
            runs = 1 if name == "sdk helper" else args.runs
            per_chunk[name] = counts[w * len(CONTENDERS) + c] / runs / n
        bare, helper = per_chunk["bare loop"], per_chunk["sdk helper"]
        print(f"{title}: {n} chunks")
        print(f"  {'':<18}{'Ir per chunk':>14}{'x bare loop':>13}{'sdk helper / this':>19}")
        for name, value in per_chunk.items():
            print(f"  {name:<18}{value:>14,.0f}{value / bare:>13.2f}{helper / value:>19.1f}")
        print()
    print(
        "reproduce: .venv/bin/python benchmarks/machine_instructions.py"
        f" --runs {args.runs} --single {args.single}"
    )


if __name__ == "__main__":
    main()
