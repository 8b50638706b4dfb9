"""What ``ToolCall.preview`` costs, against the SDK helper's partial parse (issue 13).

Run: ``.venv/bin/python benchmarks/preview.py`` (``--size BYTES`` for another call size).

Workload W3 (one 200 KB call in 4-byte fragments, about 50,002 chunks, see ``workloads.py``):

* ``accumulate``          ``Accumulator.feed(chunk, events=False)`` for every chunk, no previews
  (the baseline);
* ``preview every 100``   the same, reading ``call.preview`` every 100 chunks (a UI refreshing);
* ``preview every chunk`` the same, reading it after every chunk;
* ``sdk helper, strict``  ``ChatCompletionStreamState`` with the tool marked ``strict``: it parses
  the whole argument snapshot with ``jiter`` in partial mode on every chunk (``parsed_arguments``);
* ``sdk partial parse``   only that partial parse, on every prefix the helper sees.

Issue 13 asks: every chunk at least 3x faster than the SDK helper's partial parse; every 100
chunks at most 1.5x accumulation without previews. Times are the process's CPU time
(``time.process_time``), best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from jiter import from_json
from openai.lib.streaming.chat import ChatCompletionStreamState
from workloads import TOOLS, decode, single_call  # benchmarks/ is on sys.path when run as a script

import toolstitch as ts


def timed(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=200_000, help="argument bytes of the call")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    chunks = decode(single_call(args.size, 4))
    n = len(chunks)

    def accumulate(every: int = 0) -> None:
        acc = ts.Accumulator(tools=TOOLS)
        feed = partial(acc.feed, events=False)
        for number, chunk in enumerate(chunks):
            feed(chunk)
            if every and number % every == 0 and acc.tool_calls:
                acc.tool_calls[0].preview  # noqa: B018 - the read is what is measured
        acc.get_final_completion()
        assert acc.tool_calls[0].preview == acc.tool_calls[0].parsed

    def sdk_helper() -> None:
        state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(input_tools=TOOLS)  # type: ignore[arg-type]
        for chunk in chunks:
            state.handle_chunk(chunk)

    texts: list[str] = []
    text = ""
    for chunk in chunks:
        for tc in chunk.choices[0].delta.tool_calls or ():
            text += tc.function.arguments or ""
            texts.append(text)

    def sdk_partial_parse() -> None:
        for prefix in texts:
            if prefix:  # as the helper does: bytes, partial mode, never for empty text
                from_json(bytes(prefix, "utf-8"), partial_mode=True)

    results = {
        "accumulate": timed(accumulate, args.repeat),
        "preview every 100": timed(lambda: accumulate(100), args.repeat),
        "preview every chunk": timed(lambda: accumulate(1), args.repeat),
        "sdk helper, strict": timed(sdk_helper, 1),
        "sdk partial parse": timed(sdk_partial_parse, 1),
    }
    print(f"W3-shaped: one call of {args.size} bytes in 4-byte fragments, {n} chunks")
    print(f"{'':<22}{'total ms':>10}{'us/chunk':>10}")
    for name, seconds in results.items():
        print(f"{name:<22}{seconds * 1e3:>10.1f}{seconds / n * 1e6:>10.2f}")
    base = results["accumulate"]
    every_chunk = results["preview every chunk"]
    reads = max(every_chunk - base, 1e-9)
    every_100 = results["preview every 100"] / base
    helper = results["sdk helper, strict"] / every_chunk
    print(f"preview every 100 chunks / accumulation without previews: {every_100:.2f}x")
    print(f"sdk helper (strict) / toolstitch with a preview every chunk: {helper:.1f}x")
    print(f"sdk partial parse alone / preview reads alone: {results['sdk partial parse'] / reads:.1f}x")
    print(f"reproduce: .venv/bin/python benchmarks/preview.py --size {args.size} --repeat {args.repeat}")


if __name__ == "__main__":
    main()
