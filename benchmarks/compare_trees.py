"""Two checkouts of toolstitch in one process, timed in turns: is a change to the hot path faster?

Run: ``.venv/bin/python benchmarks/compare_trees.py BASE [NEW]`` (``--help`` for more), where
``BASE`` and ``NEW`` are checkouts (``git worktree add --detach ../base main``); ``NEW`` defaults to
this one.

On a shared machine two runs of ``overhead.py`` differ by more than most changes to the reader are
worth, and so do two processes. Here both packages are imported side by side (each under its own
``sys.modules`` entries, so each runs its own code) and fed the same SDK chunk objects, the
contenders taking turns for many rounds; the best round of each is kept. Printed: NEW's time over
BASE's, with events (``Accumulator.feed``) and without (``events=False``), each run ending in
``get_final_completion``, for W2 and, with ``--w3``, W3.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from workloads import TOOLS, decode, w2, w3  # benchmarks/ is on sys.path when run as a script


def load(tree: Path) -> ModuleType:
    """Import ``tree/src/toolstitch`` and take it out of ``sys.modules`` (its modules keep their
    references to one another), so that another checkout can be imported beside it."""
    src = str(tree / "src")
    mine = lambda name: name == "toolstitch" or name.startswith("toolstitch.")  # noqa: E731
    saved = {k: sys.modules.pop(k) for k in [k for k in sys.modules if mine(k)]}
    sys.path.insert(0, src)
    try:
        module = importlib.import_module("toolstitch")
    finally:
        sys.path.remove(src)
        for k in [k for k in sys.modules if mine(k)]:
            del sys.modules[k]
        sys.modules.update(saved)
    if not str(Path(module.__file__ or "").resolve()).startswith(str(Path(src).resolve())):
        raise SystemExit(f"{tree}: imported {module.__file__}, not this checkout's package")
    return module


def feed_all(ts: Any, chunks: Sequence[Any], events: bool) -> None:
    acc = ts.Accumulator(tools=TOOLS)
    feed = acc.feed if events else partial(acc.feed, events=False)
    for chunk in chunks:
        feed(chunk)
    acc.get_final_completion()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("base", type=Path, help="the checkout to compare against")
    parser.add_argument("new", type=Path, nargs="?", default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--rounds", type=int, default=400, help="turns per contender (W2)")
    parser.add_argument("--w3", action="store_true", help="also W3 (one 200 KB call), 8 rounds")
    args = parser.parse_args()
    trees = {"base": load(args.base.resolve()), "new": load(args.new.resolve())}
    workloads = [("W2", decode(w2()), args.rounds)]
    if args.w3:
        workloads.append(("W3", decode(w3()), 8))
    for title, chunks, rounds in workloads:
        runs: dict[tuple[str, bool], Callable[[], None]] = {
            (name, events): partial(feed_all, ts, chunks, events)
            for name, ts in trees.items()
            for events in (True, False)
        }
        best = dict.fromkeys(runs, float("inf"))
        for k in range(rounds):
            for key, run in runs.items():
                if k % 20 == 0:
                    gc.collect()
                start = time.perf_counter()
                run()
                best[key] = min(best[key], time.perf_counter() - start)
        n = len(chunks)
        parts = []
        for events, label in ((True, "events"), (False, "no events")):
            new, base = best["new", events], best["base", events]
            parts.append(
                f"{label} new/base {new / base:.3f} ({new / n * 1e6:.2f} vs {base / n * 1e6:.2f} us/chunk)"
            )
        print(f"{title}, best of {rounds}: " + " | ".join(parts))
    command = f"benchmarks/compare_trees.py {args.base} {args.new} --rounds {args.rounds}"
    print(f"reproduce: .venv/bin/python {command}")


if __name__ == "__main__":
    main()
