"""Per-chunk cost of toolstitch against a bare join loop and the SDK's own helper, in one run.

Run: ``.venv/bin/python benchmarks/overhead.py`` (``--quick`` for a short run, ``--help`` for more).

Workloads (``workloads.py``; issue 12): W2, 8 interleaved calls of 500 B in 5-byte fragments
(810 chunks), and W3, one 200 KB call in 4-byte fragments (50,003 chunks), as the SDK's own
``ChatCompletionChunk`` objects (decoded once, outside the timings). Per chunk it times:

* ``bare loop``        a hand-written merge: fragments appended to a list per ``index``, joined
  and ``json.loads``-ed at the end; no checks at all (the floor);
* ``checked read``     the bare loop with the reading a fail-closed reader cannot skip: each of the
  chunk's SDK objects checked for its exact type and for extra fields, every declared field of it
  taken from ``__dict__`` (what toolstitch's reader does, ``core/_accumulator.py``), and the argument text
  kept only when nothing else is set; no limits, no events, no scanner (a floor for any checked
  reader, not a product);
* ``toolstitch``       ``Accumulator.feed`` (events returned) then ``get_final_completion``, with
  every check on: the scanner, limits, anomalies, schema validation at seal (the workload's tool
  has a JSON Schema), metrics;
* ``toolstitch quiet`` the same through ``Accumulator.feed(chunk, events=False)``, the entry a wrapped stream
  uses when nobody asked for events (no event objects built);
* ``sdk helper``       ``openai.lib.streaming.chat.ChatCompletionStreamState.handle_chunk`` then
  ``get_final_completion`` (W3: one run, it is slow).

Then the scaling series: one call of 25 KB to 800 KB in 4-byte fragments (the fragments come from a
pool of 1,024 chunk objects, so memory stays small), and the time ratio of each size to the one
before (2x the bytes should take about 2x the time).

Times are the process's CPU time (``time.process_time``), best of several runs: on a busy machine
wall-clock time also counts the time other processes held the CPU. Numbers vary with the machine;
the ratios measured in one run are what to compare.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable, Sequence
from functools import partial
from operator import itemgetter
from typing import Any

from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import (
    Choice,
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from workloads import TOOLS, decode, w2, w3  # benchmarks/ is on sys.path when run as a script

import toolstitch as ts


def bare_loop(chunks: Sequence[Any]) -> None:
    parts: dict[int, list[str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or ():
                pieces = parts.get(tc.index)
                if pieces is None:
                    pieces = parts[tc.index] = []
                function = tc.function
                if function is not None and function.arguments:
                    pieces.append(function.arguments)
    for pieces in parts.values():
        json.loads("".join(pieces))


_CHUNK = itemgetter("usage", "choices")
_CHOICE = itemgetter("index", "delta", "finish_reason", "logprobs")
_DELTA = itemgetter("tool_calls", "content", "role", "refusal", "function_call")
_ENTRY = itemgetter("index", "id", "type", "function")
_FUNCTION = itemgetter("name", "arguments")


def checked_read(chunks: Sequence[Any]) -> None:
    parts: dict[int, list[str]] = {}
    for chunk in chunks:
        if type(chunk) is not ChatCompletionChunk or chunk.__pydantic_extra__:
            continue
        usage, choices = _CHUNK(chunk.__dict__)
        if usage is not None or type(choices) is not list:
            continue
        for choice in choices:
            if type(choice) is not Choice or choice.__pydantic_extra__:
                continue
            _, delta, finish, logprobs = _CHOICE(choice.__dict__)
            if finish is not None or logprobs is not None:
                continue
            if type(delta) is not ChoiceDelta or delta.__pydantic_extra__:
                continue
            tool_calls, content, _role, refusal, function_call = _DELTA(delta.__dict__)
            if content is not None or refusal is not None or function_call is not None:
                continue
            if type(tool_calls) is not list:
                continue
            for entry in tool_calls:
                if type(entry) is not ChoiceDeltaToolCall or entry.__pydantic_extra__:
                    continue
                index, _, _, function = _ENTRY(entry.__dict__)
                if type(function) is not ChoiceDeltaToolCallFunction or function.__pydantic_extra__:
                    continue
                _, arguments = _FUNCTION(function.__dict__)
                if type(arguments) is str and arguments:
                    pieces = parts.get(index)
                    if pieces is None:
                        pieces = parts[index] = []
                    pieces.append(arguments)
    for pieces in parts.values():
        json.loads("".join(pieces))


def toolstitch(chunks: Sequence[Any]) -> None:
    acc = ts.Accumulator(tools=TOOLS)
    feed = acc.feed
    for chunk in chunks:
        feed(chunk)
    acc.get_final_completion()
    assert all(c.ready for c in acc.tool_calls)


def toolstitch_quiet(chunks: Sequence[Any]) -> None:
    acc = ts.Accumulator(tools=TOOLS)
    feed = partial(acc.feed, events=False)
    for chunk in chunks:
        feed(chunk)
    acc.get_final_completion()
    assert all(c.ready for c in acc.tool_calls)


def sdk_helper(chunks: Sequence[Any]) -> None:
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    state.get_final_completion()


def best_of(repeat: int, fn: Callable[[Sequence[Any]], None], chunks: Sequence[Any]) -> float:
    """The fastest of ``repeat`` runs (the least disturbed by the rest of the machine)."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        fn(chunks)
        best = min(best, time.process_time() - start)
    return best


def interleaved(
    repeat: int, fns: dict[str, Callable[[Sequence[Any]], None]], chunks: Sequence[Any]
) -> dict[str, float]:
    """Best of ``repeat`` rounds, the contenders taking turns so that load hits them alike."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            best[name] = min(best[name], best_of(1, fn, chunks))
    return best


def per_chunk_table(name: str, chunks: Sequence[Any], repeat: int, helper_repeat: int) -> None:
    n = len(chunks)
    results = interleaved(
        repeat,
        {
            "bare loop": bare_loop,
            "checked read": checked_read,
            "toolstitch": toolstitch,
            "toolstitch quiet": toolstitch_quiet,
        },
        chunks,
    )
    results["sdk helper"] = best_of(helper_repeat, sdk_helper, chunks)
    bare = results["bare loop"]
    print(f"\n{name}: {n} chunks; best of {repeat} (sdk helper: {helper_repeat})")
    print(f"  {'':<18}{'us/chunk':>10}{'x bare loop':>13}{'sdk helper / this':>19}")
    for label, seconds in results.items():
        helper = results["sdk helper"] / seconds
        print(f"  {label:<18}{seconds / n * 1e6:>10.3f}{seconds / bare:>13.2f}{helper:>19.1f}")


# -- the scaling series ---------------------------------------------------------------------------


def _pool_stream(size: int) -> list[Any]:
    """One call of about ``size`` bytes in 4-byte fragments, built from a pool of 1,024 fragment
    objects (the body repeats a line whose length fits the pool, so the text stays valid JSON)."""
    line = 'a line with a \\"quote\\", a tab\\t and \\u00e9 \u00e9; '  # 48 characters
    body = line * 85  # 4,080 characters = 1,020 fragments of 4
    pool = [
        ChatCompletionChunk.model_validate(
            {
                "id": "chatcmpl-scale",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": body[i : i + 4]}}]},
                    }
                ],
            }
        )
        for i in range(0, len(body), 4)
    ]

    def one(delta: dict[str, Any], finish: str | None = None) -> Any:
        return ChatCompletionChunk.model_validate(
            {
                "id": "chatcmpl-scale",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    head = '{"path": "notes.txt", "text": "'
    header = {
        "index": 0,
        "id": "call_0",
        "type": "function",
        "function": {"name": "write_file", "arguments": ""},
    }
    chunks = [one({"role": "assistant"}), one({"tool_calls": [header]})]
    chunks += [
        one({"tool_calls": [{"index": 0, "function": {"arguments": head[i : i + 4]}}]})
        for i in range(0, 32, 4)
    ]
    # Whole rounds of the pool, so the text ends at the end of a line (never inside an escape).
    fragments = max(1, round(size / 4 / len(pool))) * len(pool)
    chunks += [pool[k % len(pool)] for k in range(fragments)]
    chunks += [one({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}), one({}, "tool_calls")]
    return chunks


def scaling(sizes: list[int], repeat: int) -> None:
    print(f"\nscaling: one call in 4-byte fragments; best of {repeat}")
    columns = ("bytes", 9), ("chunks", 9), ("toolstitch ms", 15), ("us/chunk", 10), ("x previous", 12)
    print("  " + "".join(f"{name:>{width}}" for name, width in (*columns, ("bare ms", 9), ("x bare", 8))))
    previous = None
    for size in sizes:
        chunks = _pool_stream(size)
        built = (len(chunks) - 4) * 4
        results = interleaved(repeat, {"bare": bare_loop, "toolstitch": toolstitch_quiet}, chunks)
        seconds = results["toolstitch"]
        ratio = "" if previous is None else f"{seconds / previous:.2f}"
        per_chunk = seconds / len(chunks) * 1e6
        print(
            f"  {built:>9}{len(chunks):>9}{seconds * 1e3:>15.1f}{per_chunk:>10.3f}{ratio:>12}"
            f"{results['bare'] * 1e3:>9.1f}{seconds / results['bare']:>8.2f}"
        )
        previous = seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per contender (the best is shown)")
    parser.add_argument("--quick", action="store_true", help="fewer runs and a shorter scaling series")
    args = parser.parse_args()
    repeat = 3 if args.quick else args.repeat
    per_chunk_table("W2: 8 interleaved calls of 500 B in 5-byte fragments", decode(w2()), repeat * 4, repeat)
    per_chunk_table("W3: one 200 KB call in 4-byte fragments", decode(w3()), repeat, 1)
    sizes = [25_000 * 2**k for k in range(6)]  # 25 KB .. 800 KB
    scaling(sizes[:4] if args.quick else sizes, repeat)
    quick = " --quick" if args.quick else ""
    print(f"\nreproduce: .venv/bin/python benchmarks/overhead.py{quick} --repeat {repeat}")


if __name__ == "__main__":
    main()
