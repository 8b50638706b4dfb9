"""Per-chunk cost of toolstitch against the SDK's own work, measured in one run.

Run: ``.venv/bin/python benchmarks/overhead.py`` (``--chunks N`` to size the stream).

For one realistic stream (parallel tool calls cut into small fragments, as OpenAI streams them) it
times, per chunk:

* ``sdk decode``  what the SDK spends turning one SSE ``data:`` line into a ``ChatCompletionChunk``
  (``json.loads`` + the SDK's ``construct_type``), the cost every user already pays;
* ``bare loop``   a hand-written merge: ``dict`` keyed by index, ``+=`` on the arguments (no checks);
* ``sdk helper``  the SDK's ``ChatCompletionStreamState.handle_chunk`` (snapshot per chunk);
* ``toolstitch``  ``Accumulator.feed`` (normalize, scan, events) plus ``get_final_completion``.

It prints absolute times and the ratios that matter: toolstitch / sdk decode (the design asks for a
small fraction) and toolstitch / sdk helper. Numbers vary by machine; ratios are what to compare.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

import toolstitch as ts
from toolstitch.testing import tool_call_chunks


def make_stream(n_chunks: int) -> list[str]:
    """SSE ``data:`` payloads of 4 parallel calls whose arguments total about ``n_chunks`` fragments."""
    per_call = max(1, n_chunks // 4)
    body = ", ".join(f'"k{i}": "välue {i} \\"q\\""' for i in range(per_call // 3 + 1))
    calls = [(f"call_{i}", f"tool_{i}", "{" + body + "}") for i in range(4)]
    chunks = tool_call_chunks(
        calls, pieces=per_call, usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    )
    return [json.dumps(c, ensure_ascii=False) for c in chunks]


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    lines = make_stream(args.chunks)
    objects = [construct_type(type_=ChatCompletionChunk, value=json.loads(line)) for line in lines]

    def sdk_decode() -> None:
        for line in lines:
            construct_type(type_=ChatCompletionChunk, value=json.loads(line))

    def bare_loop() -> None:
        calls: dict[int, dict[str, Any]] = {}
        for chunk in objects:
            for choice in chunk.choices:  # type: ignore[attr-defined]
                for tc in choice.delta.tool_calls or ():
                    slot = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                    if tc.id:
                        slot["id"] = tc.id
                    if tc.function and tc.function.name:
                        slot["name"] = tc.function.name
                    if tc.function and tc.function.arguments:
                        slot["arguments"] += tc.function.arguments
        for slot in calls.values():
            json.loads(slot["arguments"])

    def sdk_helper() -> None:
        state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
        for chunk in objects:
            state.handle_chunk(chunk)  # type: ignore[arg-type]
        state.get_final_completion()

    def toolstitch() -> None:
        acc = ts.Accumulator()
        for chunk in objects:
            acc.feed(chunk)
        acc.get_final_completion()
        assert all(c.ready for c in acc.tool_calls)

    n = len(objects)
    results = {
        "sdk decode": best_of(args.repeat, sdk_decode),
        "bare loop": best_of(args.repeat, bare_loop),
        "sdk helper": best_of(args.repeat, sdk_helper),
        "toolstitch": best_of(args.repeat, toolstitch),
    }
    print(f"stream: {n} chunks, {sum(len(x) for x in lines)} bytes of SSE data; best of {args.repeat}")
    for name, seconds in results.items():
        print(f"  {name:<11} {seconds * 1e3:8.2f} ms   {seconds / n * 1e6:7.2f} us/chunk")
    t = results["toolstitch"]
    print(f"toolstitch / sdk decode : {t / results['sdk decode']:.2f}")
    print(f"toolstitch / sdk helper : {t / results['sdk helper']:.2f}")
    print(f"toolstitch / bare loop  : {t / results['bare loop']:.2f}")


if __name__ == "__main__":
    main()
